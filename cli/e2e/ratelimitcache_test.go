package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/gwdiag/gwdiag/steps"
	"github.com/gwdiag/gwdiag/steps/ratelimitsvc"
)

// outsideCheckout is the environment of a gwdiag run from a user's own
// repository: HOME and the user's cache are temp dirs (so no service was
// built before), $GWDIAG_RATELIMIT_BIN is unset, and PATH is path when
// not empty. Go's own caches and settings stay where they are, warm.
func outsideCheckout(t *testing.T, cache, path string) []string {
	t.Helper()
	goEnv, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOENV").Output()
	if err != nil {
		t.Fatal(err)
	}
	g := strings.Fields(string(goEnv))
	drop := map[string]bool{ratelimitsvc.EnvBin: true, "HOME": true, "XDG_CACHE_HOME": true, "GOCACHE": true, "GOMODCACHE": true, "GOENV": true}
	if path != "" {
		drop["PATH"] = true
	}
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+t.TempDir(), "XDG_CACHE_HOME="+cache, "GOCACHE="+g[0], "GOMODCACHE="+g[1], "GOENV="+g[2])
	if path != "" {
		env = append(env, "PATH="+path)
	}
	return env
}

// runOutsideCheckout runs gwdiag conformance on the global-rate-limit
// feature from an empty directory, and returns its output and report.
func runOutsideCheckout(t *testing.T, deadline time.Duration, env []string) (string, *steps.ConformanceReport, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, gwdiagBin, "conformance", "run", "--target", "inprocess",
		"--tags", "@global-rate-limit", "--all-features", "--report", "r.yaml")
	cmd.Dir, cmd.Env = dir, env
	out, runErr := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("gwdiag did not finish in %s:\n%s", deadline, out)
	}
	if _, err := os.Stat(filepath.Join(dir, ".bin")); err == nil {
		t.Errorf("gwdiag made .bin in the user's directory")
	}
	b, err := os.ReadFile(filepath.Join(dir, "r.yaml"))
	if err != nil {
		t.Fatalf("no report: %v (exit: %v)\n%s", err, runErr, out)
	}
	var rep steps.ConformanceReport
	if err := yaml.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return string(out), &rep, runErr
}

func needRedis(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not on PATH (make redis-server installs it): the global-rate-limit feature needs it")
	}
	return p
}

// TestInstalledGwdiagBuildsRateLimitService: a gwdiag run outside any
// checkout (installed with go install, run from the user's repository)
// passes the global-rate-limit feature: it builds the service with the Go
// toolchain from the pin it embeds into the user's cache, saying so in
// one line. Cold, the build takes a minute or two (Go's build cache makes
// later runs of this test fast; the user's cache here is always new).
func TestInstalledGwdiagBuildsRateLimitService(t *testing.T) {
	t.Parallel()
	needRedis(t)
	cache := t.TempDir()
	out, rep, err := runOutsideCheckout(t, 10*time.Minute, outsideCheckout(t, cache, ""))
	if err != nil {
		t.Errorf("gwdiag: %v\n%s", err, out)
	}
	var ran int
	for _, f := range rep.Features {
		if f.Name != "global-rate-limit" {
			continue
		}
		ran += f.Passed
		if f.Result != steps.Passed || f.Failed+f.Skipped+f.Unsupported+f.NotRun > 0 {
			t.Errorf("global-rate-limit (%s): %s: %+v\n%s", f.Profile, f.Result, f.Counts, out)
		}
	}
	if rep.Incomplete != nil {
		t.Errorf("the run is incomplete: %+v\n%s", rep.Incomplete, out)
	}
	if ran < 6 {
		t.Errorf("%d global-rate-limit scenarios passed, want its 6 at least\n%s", ran, out)
	}
	built := filepath.Join(cache, "gwdiag", "ratelimit-*", "ratelimit")
	if bins, _ := filepath.Glob(built); len(bins) != 1 {
		t.Errorf("service binaries %s: %v, want one", built, bins)
	}
	announce := "building the global rate-limit service (github.com/envoyproxy/ratelimit/src/service_cmd) with the Go toolchain into " + filepath.Join(cache, "gwdiag", "ratelimit-")
	if n := strings.Count(out, announce); n != 1 {
		t.Errorf("the output says %d times %q, want once\n%s", n, announce, out)
	}
}

// TestInstalledGwdiagWithoutGo: outside a checkout, with no service built
// and no go command, the global-rate-limit scenarios are not run (the
// machine's lack, not the proxy's failure), each saying in one line what
// to install; the run is incomplete (exit 3).
func TestInstalledGwdiagWithoutGo(t *testing.T) {
	t.Parallel()
	redis := needRedis(t)
	path := t.TempDir()
	if err := os.Symlink(redis, filepath.Join(path, "redis-server")); err != nil {
		t.Fatal(err)
	}
	out, rep, err := runOutsideCheckout(t, 2*time.Minute, outsideCheckout(t, t.TempDir(), path))
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("gwdiag: %v, want exit status 3 (incomplete)\n%s", err, out)
	}
	var n int
	for _, f := range rep.Features {
		for _, s := range f.Scenarios {
			if f.Name == "global-rate-limit" {
				n++
				if s.Result != steps.NotRun || !strings.Contains(s.Message, ratelimitsvc.ErrNoGo.Error()) {
					t.Errorf("%s: %s: %q, want not run saying %q", s.Name, s.Result, s.Message, ratelimitsvc.ErrNoGo)
				}
			}
		}
	}
	if n == 0 || rep.Summary.Failed > 0 {
		t.Errorf("%d global-rate-limit scenarios reported the missing go command, %d failed; want them all, none\n%s", n, rep.Summary.Failed, out)
	}
	if in := rep.Incomplete; in == nil || len(in.Missing) != 1 || !strings.Contains(in.Missing[0].Reason, "the Go toolchain") || !strings.Contains(in.Missing[0].Reason, "install Go 1.26+") {
		t.Errorf("incomplete: %+v, want one missing part, the Go toolchain, with its fix\n%s", in, out)
	}
	if !strings.Contains(out, ratelimitsvc.ErrNoGo.Error()+"\n") {
		t.Errorf("the output does not say %q on a line's end\n%s", ratelimitsvc.ErrNoGo, out)
	}
}
