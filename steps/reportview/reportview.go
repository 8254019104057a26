// Package reportview renders a ConformanceReport for people: a Markdown
// summary for a CI job page ($GITHUB_STEP_SUMMARY) and a self-contained
// HTML page with the feature × profile matrix and each failure's step,
// what was wanted and what came.
package reportview

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io"
	"os"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gwdiag/gwdiag/steps"
)

// Read reads a report YAML file (what `conformance run --report` writes).
func Read(path string) (*steps.ConformanceReport, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r steps.ConformanceReport
	if err := yaml.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.Kind != steps.ReportKind {
		return nil, fmt.Errorf("%s: kind %q, want a %s", path, r.Kind, steps.ReportKind)
	}
	// The Gateway API's reports are ConformanceReports too, of another shape.
	if r.APIVersion != steps.ReportAPIVersion {
		return nil, fmt.Errorf("%s: a %s of apiVersion %q, want %s (gwdiag's)", path, r.Kind, r.APIVersion, steps.ReportAPIVersion)
	}
	return &r, nil
}

// verdict is the one-word result of the run: failed when a scenario
// failed, stopped or interrupted when some did not run, passed otherwise.
func verdict(r *steps.ConformanceReport) string {
	switch {
	case r.Failed():
		return "FAILED"
	case r.Interrupted != nil:
		return "INTERRUPTED"
	case r.StoppedEarly != nil:
		return "STOPPED EARLY"
	case r.Incomplete != nil:
		return "INCOMPLETE"
	default:
		return "PASSED"
	}
}

// failure is one failed scenario, with what was wanted and what came
// when its message says so ("got X, want Y"), else the whole message.
type failure struct {
	Feature  steps.FeatureName
	Profile  steps.ConformanceProfileName
	Scenario string
	File     string
	Step     string
	Wanted   string
	Got      string
	Message  string
	// Bundle is the failure bundle's folder, TraceFile the trace in it
	// that Trace shows, the failing event marked.
	Bundle    string
	TraceFile string
	Trace     []traceLine
}

var gotWant = regexp.MustCompile(`(?s)^(.*?)got (.*?), want (.*)$`)

// failures lists the failed scenarios in report order.
func failures(r *steps.ConformanceReport) []failure {
	var out []failure
	for _, f := range r.Features {
		for _, s := range f.Scenarios {
			if s.Result != steps.Failed {
				continue
			}
			fl := failure{Feature: f.Name, Profile: f.Profile, Scenario: s.Name, File: s.File, Step: s.Step, Message: s.Message, Bundle: s.Bundle}
			if s.Example > 0 {
				// One example of an outline: the line of its row.
				fl.File = fmt.Sprintf("%s:%d", s.File, s.Example)
			}
			fl.Trace, fl.TraceFile = bundleTrace(s.Bundle, s.Message)
			if m := gotWant.FindStringSubmatch(s.Message); m != nil && !strings.Contains(m[3], "\n") {
				fl.Got, fl.Wanted = strings.TrimSpace(m[1]+m[2]), m[3]
			}
			out = append(out, fl)
		}
	}
	return out
}

// Markdown writes the summary for a CI job page.
func Markdown(w io.Writer, r *steps.ConformanceReport) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "## gwdiag conformance: %s on the %s target: %s\n\n", r.Implementation.Name, r.Target, verdict(r))
	fmt.Fprintf(&b, "%s, features %s (%s), %s, took %s.\n\n", producer(r), r.Producer.FeatureSet, r.Producer.FeatureDigest,
		when(r), r.Duration)
	s := r.Summary
	fmt.Fprintf(&b, "**%d passed, %d failed, %d skipped, %d unsupported", s.Passed, s.Failed, s.Skipped, s.Unsupported)
	if s.NotRun > 0 {
		fmt.Fprintf(&b, ", %d not run", s.NotRun)
	}
	b.WriteString("**\n\n")
	if e := r.StoppedEarly; e != nil {
		fmt.Fprintf(&b, "> Stopped early (`--fail-fast`) after the failure of %q: %d scenarios not run.\n\n", e.AfterFailureOf, e.NotStarted)
	}
	if i := r.Interrupted; i != nil {
		fmt.Fprintf(&b, "> Interrupted by %s after %d scenarios: %d cut short, %d not started (not counted as failed).\n\n", i.Signal, i.Ran, i.CutShort, i.NotStarted)
	}
	if in := r.Incomplete; in != nil {
		fmt.Fprintf(&b, "> Incomplete: %d scenarios not run because the suite's environment lacks something (not counted as failed):\n", in.NotRun)
		for _, m := range in.Missing {
			fmt.Fprintf(&b, "> - %d: %s\n", m.Scenarios, m.Reason)
		}
		b.WriteString("\n")
	}
	b.WriteString(resultsTable(r))
	if fs := failures(r); len(fs) > 0 {
		b.WriteString("\n### Failures\n")
		for _, f := range fs {
			fmt.Fprintf(&b, "\n<details><summary><b>%s</b> (%s): %s</summary>\n\n", f.Feature, f.Profile, escapeMD(f.Scenario))
			if f.Step != "" {
				fmt.Fprintf(&b, "- step: `%s`\n", strings.ReplaceAll(f.Step, "`", "'"))
			}
			if f.Wanted != "" {
				fmt.Fprintf(&b, "- wanted: `%s`\n- got: `%s`\n", strings.ReplaceAll(f.Wanted, "`", "'"), strings.ReplaceAll(f.Got, "`", "'"))
			}
			fmt.Fprintf(&b, "\n```\n%s\n```\n", strings.ReplaceAll(f.Message, "```", "'''"))
			if f.Bundle != "" {
				fmt.Fprintf(&b, "\n- evidence: [`%s`](%s) (`gwdiag conformance replay %s`)\n", f.Bundle, f.Bundle, f.Bundle)
			}
			if len(f.Trace) > 0 {
				fmt.Fprintf(&b, "- trace `%s` (→ the event the failure names):\n\n```\n%s```\n", f.TraceFile, markdownTrace(f.Trace))
			}
			b.WriteString("\n</details>\n")
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// resultsTable is the per-profile results as a Markdown table (the
// submission README has it too).
func resultsTable(r *steps.ConformanceReport) string {
	var b strings.Builder
	b.WriteString("| Profile | Core | Extended | Supported | Unsupported | Failed |\n|---|---|---|---|---|---|\n")
	for _, p := range r.Profiles {
		core := fmt.Sprintf("%s %s (%s)", mark(p.Core.Result), p.Core.Result, coreCounts(p.Core))
		e := p.Extended
		fmt.Fprintf(&b, "| %s | %s | %s %s | %s | %s | %s |\n", p.Name, core, mark(e.Result), e.Result,
			names(e.SupportedFeatures), names(e.UnsupportedFeatures), names(e.FailedFeatures))
	}
	return b.String()
}

// coreCounts is a profile's core scenarios by result: "9 passed, 1
// failed, 1 not run" (the others only when there are some).
func coreCounts(c steps.CoreResult) string {
	s := fmt.Sprintf("%d passed, %d failed", c.Passed, c.Failed)
	for _, n := range []struct {
		n    int
		what string
	}{{c.Flaky, "flaky"}, {c.Stale, "stale baseline"}, {c.ExpectedFailures, "expected failures"}, {c.Skipped, "skipped"}, {c.NotRun, "not run"}} {
		if n.n > 0 {
			s += fmt.Sprintf(", %d %s", n.n, n.what)
		}
	}
	return s
}

// passedOfRun is a feature's scenarios passed of those not skipped: "3/5".
func passedOfRun(f steps.FeatureReport) string {
	return fmt.Sprintf("%d/%d", f.Passed, f.Passed+f.Failed+f.Unsupported+f.NotRun+f.ExpectedFailures+f.Stale+f.Flaky)
}

// when is the report's date, to the minute, in UTC.
func when(r *steps.ConformanceReport) string { return r.Date.UTC().Format("2006-01-02 15:04 UTC") }

func producer(r *steps.ConformanceReport) string {
	p := "gwdiag"
	if r.Producer.Version != "" {
		p += " " + r.Producer.Version
	}
	if r.Producer.Revision != "" {
		p += " (" + r.Producer.Revision + ")"
	}
	return p
}

func names(fs []steps.FeatureName) string {
	if len(fs) == 0 {
		return "-"
	}
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

// mark is a result's sign, so that a page is read at a glance.
func mark(r steps.Result) string {
	switch r {
	case steps.Passed:
		return "✅"
	case steps.Failed, steps.Flaky, steps.StaleBaseline:
		return "❌"
	case steps.Partial, steps.Unsupported, steps.ExpectedFailure:
		return "🟡"
	case steps.Interrupted, steps.NotRun, steps.Incomplete:
		return "⏹️"
	default:
		return "➖"
	}
}

func escapeMD(s string) string {
	return strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(s)
}

//go:embed *.html.tmpl
var templates embed.FS

var page = template.Must(template.New("report.html.tmpl").ParseFS(templates, "*.html.tmpl"))

// matrixRow is one feature across the profiles of the run.
type matrixRow struct {
	Feature  steps.FeatureName
	Extended bool
	Claimed  bool
	Cells    []matrixCell
}

type matrixCell struct {
	Result steps.Result
	Counts string
}

// HTML writes a self-contained page (no script, no external resource).
func HTML(w io.Writer, r *steps.ConformanceReport) error {
	var profiles []steps.ConformanceProfileName
	for _, p := range r.Profiles {
		profiles = append(profiles, p.Name)
	}
	var rows []matrixRow
	for _, f := range r.Features {
		row := matrixRow{Feature: f.Name, Extended: f.Extended, Claimed: f.Claimed}
		for _, p := range profiles {
			c := matrixCell{}
			if f.Profile == p {
				c.Result = f.Result
				c.Counts = passedOfRun(f)
			}
			row.Cells = append(row.Cells, c)
		}
		rows = append(rows, row)
	}
	var b bytes.Buffer
	err := page.Execute(&b, map[string]any{
		"R": r, "Verdict": verdict(r), "Producer": producer(r), "Profiles": profiles, "Rows": rows, "Failures": failures(r),
		"Date": when(r),
	})
	if err != nil {
		return err
	}
	_, err = w.Write(b.Bytes())
	return err
}
