package steps

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/gwdiag/gwdiag/steps/targets/inprocess"
)

// TestFailFast: against a proxy with wrong admin answers (five admin
// scenarios fail without --fail-fast), --fail-fast stops at the first
// failure: no scenario starts after it, the rest are reported not run,
// and the report, written all the same, says the run stopped early.
func TestFailFast(t *testing.T) {
	run := func(t *testing.T, failFast bool) (*ConformanceReport, string, string) {
		t.Helper()
		dir := t.TempDir()
		var out strings.Builder
		o := Options{TargetImpl: &faultyTarget{inner: inprocess.New(), fault: faults["wrong admin answers"]}, Output: &out,
			AllFeatures: true, Tags: "@admin", Concurrency: 1, FailFast: failFast,
			Report: filepath.Join(dir, "report.yaml"), JUnit: filepath.Join(dir, "junit.xml")}
		rep, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(o.Report)
		if err != nil {
			t.Fatal(err)
		}
		return rep, string(b), out.String()
	}
	full, _, _ := run(t, false)
	if full.Summary.Failed < 2 || full.StoppedEarly != nil {
		t.Fatalf("without --fail-fast: %d failed, stoppedEarly %+v; want several failures and no early stop", full.Summary.Failed, full.StoppedEarly)
	}
	rep, file, out := run(t, true)
	if rep.Summary.Failed != 1 {
		t.Errorf("failed: got %d, want 1 (the first failure stops the run)", rep.Summary.Failed)
	}
	stop := rep.StoppedEarly
	if stop == nil || stop.NotStarted == 0 || stop.NotStarted != rep.Summary.NotRun || rep.Interrupted != nil {
		t.Fatalf("stoppedEarly %+v, interrupted %+v, summary %+v: want an early stop counting every scenario not run, no interruption", stop, rep.Interrupted, rep.Summary)
	}
	var failed string
	notRun := 0
	for _, f := range rep.Features {
		for _, s := range f.Scenarios {
			switch s.Result {
			case Failed:
				failed = s.Name
			case NotRun:
				notRun++
				if !strings.Contains(s.Message, "--fail-fast") || !strings.Contains(s.Message, stop.AfterFailureOf) {
					t.Errorf("%s: message %q, want it to name --fail-fast and %q", s.Name, s.Message, stop.AfterFailureOf)
				}
			}
		}
	}
	if failed == "" || failed != stop.AfterFailureOf || notRun != stop.NotStarted {
		t.Errorf("failed scenario %q, stoppedEarly %+v, %d not run listed", failed, stop, notRun)
	}
	if !strings.Contains(file, "stoppedEarly:") || !strings.Contains(file, "afterFailureOf: "+failed) && !strings.Contains(file, "afterFailureOf: '"+failed) {
		t.Errorf("report file lacks the early stop:\n%s", file)
	}
	var back ConformanceReport
	if err := yaml.Unmarshal([]byte(file), &back); err != nil || back.StoppedEarly == nil || back.Options.FailFast != true {
		t.Errorf("report file: %v, stoppedEarly %+v, options.failFast %v", err, back.StoppedEarly, back.Options.FailFast)
	}
	if !strings.Contains(out, "run stopped early (--fail-fast)") {
		t.Errorf("progress output lacks the early stop:\n%s", out)
	}
}
