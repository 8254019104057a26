package conformance

import (
	"os"
	"strings"
	"testing"
)

// TestReportCommand: the command renders the report of a real run in each
// format, and refuses a format it does not know (usage) and a file that is
// no report.
func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	report := dir + "/report.yaml"
	if out, err := run(t, "run", "--tags", "@admin", "--run-scenario", "GET /logging tells the current level", "--report", report); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	md, err := run(t, "report", report, "--format", "markdown")
	if err != nil || !strings.Contains(md, "## gwdiag conformance: gwdiag refproxy (in process) on the inprocess target: PASSED") ||
		!strings.Contains(md, "| standalone | 🟡 partial (1 passed, 0 failed,") {
		t.Errorf("markdown: %v\n%s", err, md)
	}
	html, err := run(t, "report", report, "--format", "html")
	if err != nil || !strings.HasPrefix(html, "<!DOCTYPE html>") || !strings.Contains(html, `<td>admin</td><td>core</td><td class="passed">`) {
		t.Errorf("html: %v\n%s", err, html)
	}
	if _, err := run(t, "report", report, "--format", "pdf"); err == nil || !strings.Contains(err.Error(), `--format "pdf": want markdown or html`) {
		t.Errorf("--format pdf: got %v", err)
	}
	os.WriteFile(dir+"/other.yaml", []byte("kind: Pod\n"), 0o644)
	if _, err := run(t, "report", dir+"/other.yaml"); err == nil || !strings.Contains(err.Error(), "other.yaml") {
		t.Errorf("a file that is no report: got %v, want an error naming it", err)
	}
}
