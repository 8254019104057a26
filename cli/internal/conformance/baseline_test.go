package conformance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
	"github.com/gwdiag/gwdiag/steps"
)

// TestBaselineCommand: `conformance baseline REPORT` lists the report's
// failed scenarios, to stdout or to -o; a baseline it writes loads back.
func TestBaselineCommand(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, "report.yaml")
	r := &steps.ConformanceReport{APIVersion: steps.ReportAPIVersion, Kind: steps.ReportKind, Features: []steps.FeatureReport{
		{Name: "admin", Result: steps.Failed, Scenarios: []steps.ScenarioReport{
			{Name: "config_dump answers JSON", Result: steps.Failed, Message: "got text/plain, want application/json\nmore"},
			{Name: "a skipped one", Result: steps.Skipped}}},
	}}
	if err := r.WriteFile(report); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "baseline", report)
	if err != nil || !strings.Contains(out, "kind: ConformanceBaseline") || !strings.Contains(out, "scenario: config_dump answers JSON") ||
		!strings.Contains(out, "reason: got text/plain, want application/json\n") || strings.Contains(out, "a skipped one") {
		t.Errorf("baseline to stdout: %v\n%s", err, out)
	}
	file := filepath.Join(dir, "baseline.yaml")
	if _, err := run(t, "baseline", report, "-o", file); err != nil {
		t.Fatal(err)
	}
	b, err := steps.LoadBaseline(file)
	if err != nil || len(b.ExpectedFailures) != 1 || b.ExpectedFailures[0].Feature != "admin" {
		t.Errorf("written baseline: %v, %+v", err, b)
	}
	if _, err := run(t, "baseline"); exitcode.Code(err) != 2 {
		t.Errorf("baseline with no report: exit %d, want 2", exitcode.Code(err))
	}
	os.WriteFile(filepath.Join(dir, "not.yaml"), []byte("kind: Other\n"), 0o644)
	if _, err := run(t, "baseline", filepath.Join(dir, "not.yaml")); exitcode.Code(err) != 1 || !strings.Contains(err.Error(), "not.yaml") {
		t.Errorf("baseline of no report: %v, want exit 1 naming the file", err)
	}
}
