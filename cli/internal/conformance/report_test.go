package conformance

import (
	"os"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
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

// TestReportCommandSideBySide: several reports make one matrix, a column
// each (the same report twice makes two columns told apart); a file among
// them that is no report fails the command (1) and is named; no file at
// all is a usage error (2).
func TestReportCommandSideBySide(t *testing.T) {
	dir := t.TempDir()
	report := dir + "/report.yaml"
	if out, err := run(t, "run", "--tags", "@admin", "--run-scenario", "GET /logging tells the current level", "--report", report); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	md, err := run(t, "report", report, report, "--format", "markdown")
	if err != nil || !strings.HasPrefix(md, "## gwdiag conformance: 2 reports side by side\n") ||
		!strings.Contains(md, "| Profile | Feature | **gwdiag refproxy (in process)**<br>inprocess target, ") ||
		!strings.Contains(md, "| **gwdiag refproxy (in process) (2)**<br>inprocess target, ") ||
		!strings.Contains(md, "| standalone | admin | ✅ passed 1/1 | ✅ passed 1/1 |\n") {
		t.Errorf("markdown: %v\n%s", err, md)
	}
	html, err := run(t, "report", report, report, "--format", "html")
	if err != nil || !strings.HasPrefix(html, "<!DOCTYPE html>") ||
		!strings.Contains(html, `<tr><td>admin</td><td class="passed">passed <small>1/1</small></td><td class="passed">passed <small>1/1</small></td></tr>`) {
		t.Errorf("html: %v\n%s", err, html)
	}
	os.WriteFile(dir+"/gateway-api.yaml", []byte("apiVersion: gateway.networking.k8s.io/v1\nkind: ConformanceReport\n"), 0o644)
	_, err = run(t, "report", report, dir+"/gateway-api.yaml", "--format", "html")
	if err == nil || exitcode.Code(err) != 1 || !strings.Contains(err.Error(), "gateway-api.yaml: a ConformanceReport of apiVersion") {
		t.Errorf("a file that is no gwdiag report: got %v (exit %d), want it named, exit 1", err, exitcode.Code(err))
	}
	for _, args := range [][]string{{"report"}, {"report", report, report, "--format", "pdf"}} {
		if _, err := run(t, args...); exitcode.Code(err) != 2 {
			t.Errorf("%q: got %v (exit %d), want a usage error", args, err, exitcode.Code(err))
		}
	}
}
