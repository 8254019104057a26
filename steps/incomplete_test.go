package steps

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/steps/targets/container"
)

// TestMissingEnvironmentIsNotRun: what the suite's own environment lacks
// is never the proxy's failure. With no redis-server on PATH, the global
// rate-limit scenarios (on the reference, in process) are not run, each
// saying what is missing and the fix; the report says the run is
// incomplete, and no scenario failed. Not parallel: it takes PATH away.
func TestMissingEnvironmentIsNotRun(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("GWDIAG_RATELIMIT_BIN", filepath.Join(t.TempDir(), "never-used"))
	dir := t.TempDir()
	var out strings.Builder
	o := Options{Output: &out, AllFeatures: true, Tags: "@global-rate-limit", Concurrency: 2,
		Report: filepath.Join(dir, "report.yaml"), JUnit: filepath.Join(dir, "junit.xml")}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	checkIncomplete(t, rep, out.String(), "redis-server", "apt-get install redis-server")
	junit, err := os.ReadFile(o.JUnit)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(junit), "<failure") || !strings.Contains(string(junit), "redis-server") {
		t.Errorf("JUnit: want skipped test cases naming redis-server, no failure:\n%s", clipText(string(junit), 2000))
	}
}

// TestNoDockerIsNotRun: the container target with no Docker daemon to
// reach runs nothing, and says so scenario by scenario; the run is
// incomplete, not failed, and not an error without a report.
func TestNoDockerIsNotRun(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-docker.sock"))
	var out strings.Builder
	o := Options{Target: "container", Container: container.Options{Image: "gwdiag/refproxy:never-pulled"},
		Output: &out, Tags: "@admin", Concurrency: 2}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	checkIncomplete(t, rep, out.String(), "a Docker daemon", "start Docker")
}

func checkIncomplete(t *testing.T, rep *ConformanceReport, out, what, fix string) {
	t.Helper()
	in := rep.Incomplete
	if rep.Failed() || in == nil || in.NotRun == 0 || in.NotRun != rep.Summary.NotRun || rep.Summary.Passed != 0 || rep.Interrupted != nil {
		t.Fatalf("summary %+v, incomplete %+v, interrupted %+v: want every scenario not run, none failed, the run incomplete\n%s", rep.Summary, in, rep.Interrupted, out)
	}
	if len(in.Missing) != 1 || !strings.Contains(in.Missing[0].Reason, what) || !strings.Contains(in.Missing[0].Reason, fix) || in.Missing[0].Scenarios != in.NotRun {
		t.Errorf("missing %+v: want one part naming %q with the fix %q, counting every scenario", in.Missing, what, fix)
	}
	for _, f := range rep.Features {
		if f.Result != NotRun {
			t.Errorf("feature %s: %s, want not run", f.Name, f.Result)
		}
		for _, s := range f.Scenarios {
			if s.Result != NotRun || !strings.Contains(s.Message, fix) {
				t.Errorf("%s: %s %q, want not run with the fix", s.Name, s.Result, s.Message)
			}
		}
	}
	for _, p := range rep.Profiles {
		if p.Core.Result == Failed || p.Extended.Result == Failed {
			t.Errorf("profile %s: core %s, extended %s: nothing may fail", p.Name, p.Core.Result, p.Extended.Result)
		}
	}
	if !strings.Contains(out, "run incomplete:") || strings.Contains(out, "FAIL ") {
		t.Errorf("progress output: want the incomplete line and no FAIL:\n%s", out)
	}
}

func clipText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// TestNoClusterIsNotRun: the cluster target with no cluster to reach (no
// kubeconfig) runs nothing and says what to give it; incomplete, not
// failed.
func TestNoClusterIsNotRun(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	var out strings.Builder
	rep, err := Run(context.Background(), Options{Target: "cluster", Output: &out, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	checkIncomplete(t, rep, out.String(), "a Kubernetes cluster", "--kubeconfig")
}
