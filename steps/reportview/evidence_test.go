package reportview

import (
	"bytes"
	"image/color"
	"os"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/steps"
	"github.com/gwdiag/gwdiag/steps/bundle"
)

// failingEvent is the background of the event a failure names
// (style.html.tmpl: ol.trace li.failing).
var failingEvent = color.RGBA{0xff, 0xd8, 0xd3, 0xff}

// evidenceReport is a report whose one failure has a bundle holding the
// trace the failed step read: the golden trace of the scenario with
// routeSelection and policySelection swapped (events 4 and 5).
func evidenceReport(t *testing.T) *steps.ConformanceReport {
	t.Helper()
	golden, err := os.ReadFile("../../golden/traces/a-forwarded-request-traces-every-required-event-in-order.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(golden)), "\n")
	lines[3], lines[4] = lines[4], lines[3]
	var stream bytes.Buffer
	for _, l := range lines {
		stream.WriteString("data: " + l + "\n\n")
	}
	const name = "A forwarded request traces every required event in order"
	const msg = "order: event 5: routeSelection out of order: it comes after policySelection"
	dir := bundle.Dir(t.TempDir(), "trace-order", name, 0, 0)
	b := &bundle.Bundle{Feature: []byte("Feature: x\n"), Meta: bundle.Meta{Scenario: name, Feature: "trace-order", FeatureFile: "trace_order.feature", Result: "failed", Message: msg},
		Exchanges: []bundle.Exchange{{Method: "POST", URL: "http://127.0.0.1:1/debug/trace", Status: 200, ResponseBody: stream.Bytes()}}}
	if err := bundle.Write(dir, b, plain{}); err != nil {
		t.Fatal(err)
	}
	return &steps.ConformanceReport{APIVersion: steps.ReportAPIVersion, Kind: steps.ReportKind, Target: "process",
		Implementation: steps.Implementation{Name: "myproxy"}, Summary: steps.Counts{Failed: 1},
		Profiles: []steps.ProfileReport{{Name: steps.ProfileStandalone, Core: steps.CoreResult{Result: steps.Failed, Counts: steps.Counts{Failed: 1}}}},
		Features: []steps.FeatureReport{{Name: "trace-order", Profile: steps.ProfileStandalone, Result: steps.Failed, Counts: steps.Counts{Failed: 1},
			Scenarios: []steps.ScenarioReport{{Name: name, File: "trace_order.feature", Result: steps.Failed, Step: "the trace events follow the order of the spec", Message: msg, Bundle: dir}}}}}
}

type plain struct{}

func (plain) Header(_, v string) string { return v }
func (plain) Text(s string) string      { return s }
func (plain) Capture(b []byte) []byte   { return b }
func (plain) Config(b []byte) []byte    { return b }

// TestReportsPointToTheEvidence: a failure with a bundle links to it in
// both views and shows the trace it read inline, the event the failure
// names marked.
func TestReportsPointToTheEvidence(t *testing.T) {
	r := evidenceReport(t)
	dir := r.Features[0].Scenarios[0].Bundle
	var md, page bytes.Buffer
	if err := Markdown(&md, r); err != nil {
		t.Fatal(err)
	}
	if err := HTML(&page, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"- evidence: [`" + dir + "`](" + dir + ")", "→  5 routeSelection\n", "   4 policySelection\n", "trace `traces/01-trace.sse`"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	for _, want := range []string{`<a href="` + dir + `">`, `<li class="failing" id="failing-event">routeSelection ← the failure</li>`, `<li>policySelection</li>`} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("html lacks %q", want)
		}
	}
	if strings.Count(page.String(), `class="failing"`) != 1 {
		t.Errorf("html marks %d events, want one", strings.Count(page.String(), `class="failing"`))
	}
}

// TestEvidenceInBrowser: the page with a failure's inline trace, in a real
// browser: the marked event is in the DOM, and its colour on the screen.
func TestEvidenceInBrowser(t *testing.T) {
	var page bytes.Buffer
	if err := HTML(&page, evidenceReport(t)); err != nil {
		t.Fatal(err)
	}
	dom, img := inBrowser(t, page.Bytes(), "conformance-report-evidence.png")
	if !strings.Contains(dom, `id="failing-event"`) || !strings.Contains(dom, "routeSelection ← the failure") {
		t.Errorf("the browser's DOM lacks the marked event")
	}
	colours(t, img, map[string]color.RGBA{"failing event": failingEvent})
}
