package reportview

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gwdiag/gwdiag/steps"
)

// The side-by-side matrix: the reports of several implementations (or
// runs), a column each in the order given, and a row for every feature any
// of them names, grouped by profile (the profile's core result, its core
// features, then its extended ones), in the spirit of the Gateway API's
// implementations table.

// column is one report of the matrix.
type column struct {
	// Label is the implementation's name and version, numbered when an
	// earlier column has the same on the same target.
	Label    string
	R        *steps.ConformanceReport
	Verdict  string
	Producer string
	Date     string
}

// cell is one report's result on a row; an empty Result is a row the
// report does not have.
type cell struct {
	Result steps.Result
	// Counts is "3/5" (scenarios passed of those run) for a feature, the
	// scenarios by result for a core result.
	Counts string
	// Claim says of an extended feature whether the run claimed it.
	Claim string
}

// row is a profile's core result (Feature empty) or one feature.
type row struct {
	Profile  steps.ConformanceProfileName
	Feature  steps.FeatureName
	Extended bool
	// First marks the first row of its profile.
	First bool
	Cells []cell
}

// matrix is what both renderings show.
type matrix struct {
	Columns []column
	Rows    []row
	// Span is the table's width in cells (a profile's heading spans it).
	Span   int
	Legend string
	// Note says when the reports ran different feature sets, whose results
	// are not comparable; empty when they all ran the same.
	Note string
}

const legend = "n/m: the feature's scenarios passed, of those not skipped. claimed: the run was told the implementation has " +
	"the extended feature, so failing it fails the run (unclaimed, it is unsupported). —: not in that report."

func newMatrix(rs []*steps.ConformanceReport) matrix {
	m := matrix{Span: len(rs) + 1, Legend: legend}
	seen := map[string]int{}
	sets := make([]string, len(rs))
	mixed := false
	for i, r := range rs {
		label := cmp.Or(r.Implementation.Name, "unnamed")
		if v := r.Implementation.Version; v != "" {
			label += " " + v
		}
		key := label + "\x00" + r.Target
		if seen[key]++; seen[key] > 1 {
			label += fmt.Sprintf(" (%d)", seen[key])
		}
		m.Columns = append(m.Columns, column{Label: label, R: r, Verdict: verdict(r), Producer: producer(r), Date: when(r)})
		sets[i] = fmt.Sprintf("%s: %s (%s)", label, r.Producer.FeatureSet, r.Producer.FeatureDigest)
		if p := r.Producer; p.FeatureSet != rs[0].Producer.FeatureSet || p.FeatureDigest != rs[0].Producer.FeatureDigest {
			mixed = true
		}
	}
	if mixed {
		m.Note = "Not comparable: these reports ran different feature sets (" + strings.Join(sets, "; ") + "), " +
			"so a feature may not hold the same scenarios in each."
	}
	m.Rows = matrixRows(rs)
	return m
}

// matrixRows is every profile's core result and every feature the
// reports name, a cell per report.
func matrixRows(rs []*steps.ConformanceReport) []row {
	type key struct {
		profile steps.ConformanceProfileName
		feature steps.FeatureName
	}
	byKey := map[key]*row{}
	at := func(k key, extended bool) *row {
		if byKey[k] == nil {
			byKey[k] = &row{Profile: k.profile, Feature: k.feature, Extended: extended, Cells: make([]cell, len(rs))}
		}
		return byKey[k]
	}
	for i, r := range rs {
		for _, p := range r.Profiles {
			at(key{p.Name, ""}, false).Cells[i] = cell{Result: p.Core.Result, Counts: "(" + coreCounts(p.Core) + ")"}
		}
		for _, f := range r.Features {
			c := cell{Result: f.Result, Counts: passedOfRun(f)}
			if f.Extended {
				c.Claim = map[bool]string{true: "claimed", false: "not claimed"}[f.Claimed]
			}
			at(key{f.Profile, f.Name}, f.Extended).Cells[i] = c
		}
	}
	var rows []row
	for _, r := range byKey {
		rows = append(rows, *r)
	}
	slices.SortFunc(rows, func(a, b row) int {
		return cmp.Or(cmp.Compare(profileRank(a.Profile), profileRank(b.Profile)), cmp.Compare(a.Profile, b.Profile),
			cmp.Compare(btoi(a.Feature != ""), btoi(b.Feature != "")), cmp.Compare(btoi(a.Extended), btoi(b.Extended)), cmp.Compare(a.Feature, b.Feature))
	})
	for i := range rows {
		rows[i].First = i == 0 || rows[i-1].Profile != rows[i].Profile
	}
	return rows
}

// profileRank orders the profiles as steps.Profiles does, any other after.
func profileRank(p steps.ConformanceProfileName) int {
	i := slices.IndexFunc(steps.Profiles, func(q steps.ConformanceProfile) bool { return q.Name == p })
	if i < 0 {
		return len(steps.Profiles)
	}
	return i
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// MatrixMarkdown writes the reports side by side as a GitHub-flavoured
// Markdown table, a column per report in the order given.
func MatrixMarkdown(w io.Writer, rs []*steps.ConformanceReport) error {
	m := newMatrix(rs)
	var b bytes.Buffer
	fmt.Fprintf(&b, "## gwdiag conformance: %d reports side by side\n\n| Profile | Feature |", len(m.Columns))
	for _, c := range m.Columns {
		fmt.Fprintf(&b, " **%s**<br>%s target, %s<br>%s<br>%s, features %s (%s) |", mdCell(c.Label), mdCell(c.R.Target), c.Date,
			c.Verdict, mdCell(c.Producer), mdCell(c.R.Producer.FeatureSet), mdCell(c.R.Producer.FeatureDigest))
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(m.Columns)) + "\n")
	for _, r := range m.Rows {
		name := "**core result**"
		if r.Feature != "" {
			name = mdCell(string(r.Feature))
		}
		if r.Extended {
			name += " (extended)"
		}
		fmt.Fprintf(&b, "| %s | %s |", mdCell(string(r.Profile)), name)
		for _, c := range r.Cells {
			switch {
			case c.Result == "":
				b.WriteString(" — |")
			case c.Claim != "":
				fmt.Fprintf(&b, " %s %s %s · %s |", mark(c.Result), c.Result, c.Counts, c.Claim)
			default:
				fmt.Fprintf(&b, " %s %s %s |", mark(c.Result), c.Result, c.Counts)
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n%s\n", m.Legend)
	if m.Note != "" {
		fmt.Fprintf(&b, "\n> **%s**\n", mdCell(m.Note))
	}
	_, err := w.Write(b.Bytes())
	return err
}

// mdCell makes s safe in a Markdown table cell.
func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(escapeMD(s))
}

// MatrixHTML writes the reports side by side as a self-contained page (no
// script, no external resource), a column per report in the order given.
func MatrixHTML(w io.Writer, rs []*steps.ConformanceReport) error {
	var b bytes.Buffer
	if err := page.ExecuteTemplate(&b, "matrix.html.tmpl", newMatrix(rs)); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}
