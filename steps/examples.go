package steps

import (
	"bytes"

	gherkin "github.com/cucumber/gherkin/go/v26"
	"github.com/cucumber/godog"
	messages "github.com/cucumber/messages/go/v21"
)

// exampleLine returns the line of the Examples row a Scenario Outline's
// scenario was made from, 0 for a plain scenario (or a source that does
// not parse). The examples of one outline share its name; the line tells
// them apart in bundle folders and lets replay run the one that failed.
//
// godog's pickle IDs belong to its own parse, so the scenario is found in
// a parse of src by what identifies it: its name and its steps' texts and
// arguments after the row's values were put in.
func exampleLine(src []byte, p *godog.Scenario) int {
	if len(p.AstNodeIds) < 2 {
		return 0
	}
	for _, e := range examples(src, p.Uri) {
		if e.pickle.Name == p.Name && sameSteps(e.pickle.Steps, p.Steps) {
			return e.line
		}
	}
	return 0
}

// exampleLines returns the lines of the Examples rows of the outline
// named name, in the order of the file (godog's JUnit numbers the test
// cases of an outline #1, #2, ... in this order).
func exampleLines(src []byte, name string) []int {
	var lines []int
	for _, e := range examples(src, "") {
		if e.pickle.Name == name {
			lines = append(lines, e.line)
		}
	}
	return lines
}

type example struct {
	pickle *messages.Pickle
	line   int
}

// examples parses src and returns the scenarios made from Examples rows,
// in the order of the file, each with its row's line (none when src does
// not parse).
func examples(src []byte, uri string) []example {
	var out []example
	all, _ := pickles(src, uri)
	for _, e := range all {
		if e.line > 0 {
			out = append(out, e)
		}
	}
	return out
}

// pickles parses src and returns every scenario godog would make of it, in
// the order of the file, each with the line of its Examples row (0 for a
// plain scenario), or the parse error (which names the line).
func pickles(src []byte, uri string) ([]example, error) {
	newID := (&messages.Incrementing{}).NewId
	doc, err := gherkin.ParseGherkinDocument(bytes.NewReader(src), newID)
	if err != nil || doc.Feature == nil {
		return nil, err
	}
	rows := map[string]int{}
	var scenarios []*messages.Scenario
	for _, c := range doc.Feature.Children {
		if c.Scenario != nil {
			scenarios = append(scenarios, c.Scenario)
		}
		if c.Rule != nil {
			for _, rc := range c.Rule.Children {
				if rc.Scenario != nil {
					scenarios = append(scenarios, rc.Scenario)
				}
			}
		}
	}
	for _, s := range scenarios {
		for _, e := range s.Examples {
			for _, r := range e.TableBody {
				rows[r.Id] = int(r.Location.Line)
			}
		}
	}
	var out []example
	for _, q := range gherkin.Pickles(*doc, uri, newID) {
		line := 0
		if len(q.AstNodeIds) > 1 {
			line = rows[q.AstNodeIds[1]]
		}
		out = append(out, example{q, line})
	}
	return out, nil
}

func sameSteps(a, b []*messages.PickleStep) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Text != b[i].Text || argument(a[i].Argument) != argument(b[i].Argument) {
			return false
		}
	}
	return true
}

// argument flattens a step's doc string or data table for comparison.
func argument(a *messages.PickleStepArgument) string {
	if a == nil {
		return ""
	}
	var b bytes.Buffer
	if a.DocString != nil {
		b.WriteString(a.DocString.Content)
	}
	if a.DataTable != nil {
		for _, r := range a.DataTable.Rows {
			for _, c := range r.Cells {
				b.WriteString(c.Value)
				b.WriteByte(0)
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}
