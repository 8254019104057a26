package steps

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// TestInterruptedReport: scenarios an interruption kept from their end are
// not run, never failed; they make the feature and the profile's core
// interrupted, unless a scenario failed before the signal, and the report
// counts what ran, was cut short and never started.
func TestInterruptedReport(t *testing.T) {
	res := func(f FeatureName, r Result, cutShort bool) scenarioResult {
		return scenarioResult{feature: f, profile: ProfileStandalone, cutShort: cutShort,
			ScenarioReport: ScenarioReport{Name: string(f) + " " + string(r), Result: r}}
	}
	tests := []struct {
		name        string
		results     []scenarioResult
		signal      string
		wantCore    Result
		wantFeature Result
		wantInt     *Interruption
	}{
		{"all passed, no signal", []scenarioResult{res(FeatureAdmin, Passed, false)}, "", Passed, Passed, nil},
		{"a signal after the last scenario", []scenarioResult{res(FeatureAdmin, Passed, false)}, "SIGINT", Passed, Passed, nil},
		{"cut short and not started", []scenarioResult{res(FeatureAdmin, Passed, false), res(FeatureAdmin, NotRun, true), res(FeatureAdmin, NotRun, false)},
			"SIGTERM", Interrupted, Interrupted, &Interruption{Signal: "SIGTERM", Ran: 1, CutShort: 1, NotStarted: 1}},
		{"a failure before the signal stays a failure", []scenarioResult{res(FeatureAdmin, Failed, false), res(FeatureAdmin, NotRun, false)},
			"SIGINT", Failed, Failed, &Interruption{Signal: "SIGINT", Ran: 1, NotStarted: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := buildReport(Options{}, "inprocess", []ConformanceProfileName{ProfileStandalone}, time.Now(), tt.results, tt.signal)
			if got := rep.Profiles[0].Core.Result; got != tt.wantCore {
				t.Errorf("core result: got %q, want %q", got, tt.wantCore)
			}
			if got := rep.Features[0].Result; got != tt.wantFeature {
				t.Errorf("feature result: got %q, want %q", got, tt.wantFeature)
			}
			switch got := rep.Interrupted; {
			case (got == nil) != (tt.wantInt == nil):
				t.Errorf("interrupted: got %+v, want %+v", got, tt.wantInt)
			case got != nil && *got != *tt.wantInt:
				t.Errorf("interrupted: got %+v, want %+v", *got, *tt.wantInt)
			}
			if rep.Summary.Failed != rep.Profiles[0].Core.Failed || rep.Summary.NotRun != rep.Profiles[0].Core.NotRun {
				t.Errorf("summary %+v and core counts %+v differ", rep.Summary, rep.Profiles[0].Core.Counts)
			}
		})
	}
}

// TestMarkNotRunJUnit: godog's JUnit test cases of scenarios not run
// become <skipped> with the reason, an outline's example that passed stays
// passed, and the suites' counts follow.
func TestMarkNotRunJUnit(t *testing.T) {
	// As godog writes them: a cut-short scenario keeps status "passed" with
	// a skipped step; one never started has no status.
	const godogJUnit = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="gwdiag-conformance" tests="4" skipped="0" failures="0" errors="0" time="1">
  <testsuite name="Admin endpoints" tests="4" skipped="0" failures="0" errors="0" time="1">
    <testcase name="Served #1" status="passed" time="0.1"></testcase>
    <testcase name="Served #2" status="" time="0"><error message="Step a" type="skipped"></error></testcase>
    <testcase name="Cut short" status="passed" time="0.2"><error message="Step b" type="skipped"></error></testcase>
    <testcase name="Passed" status="passed" time="0.1"></testcase>
  </testsuite>
</testsuites>`
	path := filepath.Join(t.TempDir(), "junit.xml")
	if err := os.WriteFile(path, []byte(godogJUnit), 0o644); err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{"admin.feature": {Data: []byte("@admin\nFeature: Admin endpoints\n")}}
	results := []scenarioResult{
		{ScenarioReport: ScenarioReport{Name: "Served", File: "admin.feature", Result: Passed}},
		{ScenarioReport: ScenarioReport{Name: "Served", File: "admin.feature", Result: NotRun, Message: "not run (interrupted by SIGINT before it started)"}},
		{ScenarioReport: ScenarioReport{Name: "Cut short", File: "admin.feature", Result: NotRun, Message: "not run (interrupted by SIGINT while it ran)"}},
		{ScenarioReport: ScenarioReport{Name: "Passed", File: "admin.feature", Result: Passed}},
	}
	if err := rewriteJUnit(path, fsys, results); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	var doc junitSuites
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Skipped != 2 || doc.Suites[0].Skipped != 2 || doc.Failures != 0 {
		t.Errorf("counts: got %d skipped (suite %d), %d failures; want 2, 2, 0\n%s", doc.Skipped, doc.Suites[0].Skipped, doc.Failures, b)
	}
	want := map[string]string{"Served #1": "", "Served #2": "interrupted by SIGINT before it started", "Cut short": "interrupted by SIGINT while it ran", "Passed": ""}
	for _, c := range doc.Suites[0].Cases {
		got := ""
		if c.Skipped != nil {
			got = c.Skipped.Message
		}
		if w := want[c.Name]; (w == "") != (got == "") || !strings.Contains(got, w) || (w != "" && (c.Status != "skipped" || len(c.Errors) != 0)) {
			t.Errorf("test case %q: got status %q, skipped %q, errors %v; want skipped %q", c.Name, c.Status, got, c.Errors, w)
		}
	}
}
