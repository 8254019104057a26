package conformance

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunReportDir: --report-dir names the report the submission way and
// writes a README with the results table and the command, which a shell
// splits back into the very arguments of the run.
func TestRunReportDir(t *testing.T) {
	dir := t.TempDir()
	opts := filepath.Join(dir, "options.yaml")
	os.WriteFile(opts, []byte("implementation: {name: refproxy, version: v1.2.3}\n"), 0o644)
	out := filepath.Join(dir, "submission")
	args := []string{"run", "-c", opts, "--all-features", "--tags", "@admin && ~@extended", "--run-scenario", "GET /logging tells the current level", "--report-dir", out}
	if o, err := run(t, args...); err != nil {
		t.Fatalf("run: %v\n%s", err, o)
	}
	report := filepath.Join(out, "extended-v1.2.3-inprocess-report.yaml")
	if _, err := os.Stat(report); err != nil {
		t.Fatalf("report: %v", err)
	}
	readme, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# refproxy: gwdiag conformance", "| standalone | 🟡 partial (1 passed, 0 failed,", "## Reproduce",
		"[extended-v1.2.3-inprocess-report.yaml](extended-v1.2.3-inprocess-report.yaml)"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README lacks %q:\n%s", want, readme)
		}
	}
	_, cmdline, ok := strings.Cut(string(readme), "```sh\n")
	if !ok {
		t.Fatalf("README has no command:\n%s", readme)
	}
	cmdline, _, _ = strings.Cut(cmdline, "\n```")
	split, err := exec.Command("sh", "-c", `set -- `+cmdline+`; printf '%s\n' "$@"`).Output()
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(split), "\n"), "\n")
	// The command path, then the flags in flag order (Visit is sorted).
	want := []string{"conformance", "run", "--all-features=true", "--config", opts, "--report-dir", out, "--run-scenario", "GET /logging tells the current level", "--tags", "@admin && ~@extended"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the README's command splits into\n %q\nwant\n %q", got, want)
	}
}
