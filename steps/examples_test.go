package steps

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gherkin "github.com/cucumber/gherkin/go/v26"
	messages "github.com/cucumber/messages/go/v21"

	"github.com/gwdiag/gwdiag/features"
	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/steps/bundle"
	"github.com/gwdiag/gwdiag/steps/targets/inprocess"
)

// outlineScenario is a Scenario Outline of trace_order.feature; its
// Examples rows are at lines 51, 52 and 53.
const outlineScenario = "The trace reports the status the backend answered and the client received"

// TestExampleLine: each example of an outline is told apart by the line
// of its Examples row, whatever IDs the parse that made it gave (here
// UUIDs, not the counter exampleLine parses with); a plain scenario has 0.
func TestExampleLine(t *testing.T) {
	t.Parallel()
	src, err := fs.ReadFile(features.FS, "trace_order.feature")
	if err != nil {
		t.Fatal(err)
	}
	newID := (&messages.UUID{}).NewId
	doc, err := gherkin.ParseGherkinDocument(bytes.NewReader(src), newID)
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	plain := 0
	for _, p := range gherkin.Pickles(*doc, "trace_order.feature", newID) {
		l := exampleLine(src, p)
		switch {
		case p.Name == outlineScenario:
			lines = append(lines, l)
		case l != 0:
			t.Errorf("%s: line %d, want 0 (a plain scenario)", p.Name, l)
		default:
			plain++
		}
	}
	if !slices.Equal(lines, []int{51, 52, 53}) || plain == 0 {
		t.Errorf("outline examples at lines %v (want [51 52 53]), %d plain scenarios", lines, plain)
	}
	if l := exampleLine([]byte("not gherkin: ["), &messages.Pickle{Name: outlineScenario, AstNodeIds: []string{"1", "2"}}); l != 0 {
		t.Errorf("unparsable source: line %d, want 0", l)
	}
}

// TestOutlineExamplesBundledApart: every example of an outline that fails
// leaves a bundle of its own (they share the outline's name), and replay
// runs only the example its bundle names.
func TestOutlineExamplesBundledApart(t *testing.T) {
	t.Parallel()
	faulty := func() *faultyTarget {
		return &faultyTarget{inner: inprocess.New(), fault: faults["trace hides the backend status"]}
	}
	o := Options{TargetImpl: faulty(), Output: &strings.Builder{}, AllFeatures: true, Tags: "@trace-order", RunScenario: outlineScenario}
	plantCredentials(t, &o)
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, s := range rep.Scenario(outlineScenario) {
		if s.Result != Failed || s.Bundle == "" {
			t.Fatalf("%+v: want every example failed with a bundle", s)
		}
		dirs = append(dirs, filepath.Base(s.Bundle))
	}
	slices.Sort(dirs)
	base := "the-trace-reports-the-status-the-backend-answered-and-the-client-received"
	if want := []string{base + "-line-51", base + "-line-52", base + "-line-53"}; !slices.Equal(dirs, want) {
		t.Fatalf("bundle folders %v, want %v", dirs, want)
	}
	dir := filepath.Join(o.BundleDir, "trace-order", base+"-line-52")
	b, _, err := bundle.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b.Meta.Example != 52 || !strings.Contains(b.Meta.Message, "418") {
		t.Errorf("bundle meta example %d message %q: want the 418 example, line 52", b.Meta.Example, b.Meta.Message)
	}
	for _, tc := range []struct {
		tgt  *faultyTarget
		want Result
	}{{nil, Passed}, {faulty(), Failed}} {
		ro := Options{Output: &strings.Builder{}}
		if tc.tgt != nil {
			ro.TargetImpl = tc.tgt
		}
		plantCredentials(t, &ro)
		r, err := Replay(context.Background(), dir, ro)
		if err != nil {
			t.Fatal(err)
		}
		// The report lists the scenarios that did not pass; the counts
		// hold every one.
		ran := 0
		for _, f := range r.Report.Features {
			if f.Name == "trace-order" {
				ran = f.Counts.Passed + f.Counts.Failed
			}
		}
		if ran != 1 || r.Scenario.Result != tc.want || tc.want == Failed && !strings.Contains(r.Scenario.Message, "418") {
			t.Errorf("replay: %d examples ran, result %s %q; want one (of the feature's), %s (the 418 example)", ran, r.Scenario.Result, r.Scenario.Message, tc.want)
		}
	}
}

// TestRepeatKeepsExamplesApart: under --repeat, the attempts of each
// example of an outline are merged with each other, never with another
// example's: a proxy that fails one example every time, and passes the
// others, has that example failed in every attempt and none flaky.
func TestRepeatKeepsExamplesApart(t *testing.T) {
	t.Parallel()
	o := Options{TargetImpl: &faultyTarget{inner: inprocess.New(), fault: only418()}, Output: &strings.Builder{}, AllFeatures: true,
		Tags: "@trace-order", RunScenario: outlineScenario, Repeat: 2, Concurrency: 1}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	sc := rep.Scenario(outlineScenario)
	if len(sc) != 1 || sc[0].Result != Failed || !strings.Contains(sc[0].Message, "failed in all 2 attempts") || !strings.Contains(sc[0].Message, "want 418") {
		t.Fatalf("scenarios %+v: want the 418 example failed in both attempts, and no other entry", sc)
	}
	if rep.Summary.Flaky != 0 || rep.Summary.Passed != 2 || rep.Summary.Failed != 1 {
		t.Errorf("summary %+v: want the other two examples passed, none flaky", rep.Summary)
	}
}

// only418 fails one example of outlineScenario, the 418 one: its trace
// says the backend answered 200.
func only418() fault {
	return fault{frames: func() func(sse.Frame) []sse.Frame {
		return rewriteEvents(func(e *trace.Event) {
			if e.Type() == trace.BackendCallResult && fmt.Sprint(e.Message["status"]) == "418" {
				e.Message["status"] = 200
			}
		})
	}}
}

// TestBaselineNamesTheExample: a baseline made from a run where one
// example of an outline failed lists that example (by its row's line), so
// the next run has it an expected failure and the other examples, which
// pass, are not taken for a stale baseline.
func TestBaselineNamesTheExample(t *testing.T) {
	t.Parallel()
	run := func(baseline string) *ConformanceReport {
		o := Options{TargetImpl: &faultyTarget{inner: inprocess.New(), fault: only418()}, Output: &strings.Builder{}, AllFeatures: true,
			Tags: "@trace-order", RunScenario: outlineScenario, Baseline: baseline}
		rep, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	b := BaselineOf(run(""), "first run")
	if len(b.ExpectedFailures) != 1 || b.ExpectedFailures[0].Example != 52 {
		t.Fatalf("baseline %+v: want the 418 example (line 52) alone", b.ExpectedFailures)
	}
	path := filepath.Join(t.TempDir(), "baseline.yaml")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Encode(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rep := run(path)
	if rep.Failed() || rep.Summary.ExpectedFailures != 1 || rep.Summary.Stale != 0 || rep.Summary.Passed != 2 {
		t.Errorf("with the baseline: summary %+v; want one expected failure, two passed, none stale", rep.Summary)
	}
}

// TestJUnitNamesTheExample: of an outline's JUnit test cases (godog names
// them "#1", "#2", ... in the order of the Examples rows) and Cucumber
// elements (each at its row's line), the one of the failed example
// carries its own bundle, and the examples that passed carry none.
func TestJUnitNamesTheExample(t *testing.T) {
	t.Parallel()
	o := Options{TargetImpl: &faultyTarget{inner: inprocess.New(), fault: only418()}, Output: &strings.Builder{}, AllFeatures: true,
		Tags: "@trace-order", RunScenario: outlineScenario}
	plantCredentials(t, &o)
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(o.JUnit)
	if err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			if strings.HasPrefix(c.Name, outlineScenario) {
				got[strings.TrimPrefix(c.Name, outlineScenario)] = c.Status + " " + c.SystemOut
			}
		}
	}
	if len(got) != 3 || strings.TrimSpace(got[" #1"]) != "passed" || strings.TrimSpace(got[" #3"]) != "passed" ||
		!strings.HasPrefix(got[" #2"], "failed gwdiag failure bundle: ") || !strings.Contains(got[" #2"], "-line-52 ") {
		t.Errorf("outline test cases %q: want #2 failed with the bundle of line 52, #1 and #3 passed with none", got)
	}
	for line, want := range map[int]string{51: "", 52: "-line-52", 53: ""} {
		var bundles []string
		for _, st := range cucumberSteps(t, o.CucumberJSON, outlineScenario, line) {
			for _, e := range st.Embeddings {
				bundles = append(bundles, string(e.Data))
			}
		}
		if want == "" && len(bundles) > 0 || want != "" && (len(bundles) != 1 || !strings.Contains(bundles[0], want)) {
			t.Errorf("cucumber example at line %d embeds %q, want %q", line, bundles, want)
		}
	}
}
