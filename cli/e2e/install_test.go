package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/steps/targets/container"
	"github.com/gwdiag/gwdiag/steps/targets/container/containertest"
)

// TestCgoGwdiagRunsContainerTarget: a gwdiag built with cgo on, so
// dynamically linked as a plain `go build` makes it, runs the container
// target: it builds a static copy of itself with the Go toolchain into
// the user's cache for the mock image, once; the second run finds it
// there. It is built with -race (which needs cgo): the race tests have
// compiled its packages so, and a plain build would compile gwdiag's
// whole graph in a configuration nothing else in make test uses (a
// fresh machine's minutes; docs/ci.md).
func TestCgoGwdiagRunsContainerTarget(t *testing.T) {
	t.Parallel()
	proxy, _ := containertest.Images(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "gwdiag")
	build := exec.Command("go", "build", "-race", "-o", bin, "github.com/gwdiag/gwdiag/cli/cmd/gwdiag")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -race (cgo): %v\n%s", err, out)
	}
	if container.CheckStatic(bin) == nil {
		t.Skip("go build with CGO_ENABLED=1 made a static gwdiag (no C toolchain?): nothing to show")
	}
	cache := filepath.Join(dir, "cache")
	// The user's cache moves; Go's own caches stay where they are, warm.
	goEnv, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	caches := strings.Fields(string(goEnv))
	run := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "conformance", "run", "--target", "container", "--image", proxy, "--pull", "never",
			"--tags", "@admin", "--run-scenario", "GET /logging tells the current level")
		cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache, "GOCACHE="+caches[0], "GOMODCACHE="+caches[1])
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the cgo gwdiag on the container target: %v\n%s", err, out)
		}
		return string(out)
	}
	first := run()
	if !strings.Contains(first, "this gwdiag is dynamically linked (cgo); building a static one") || !strings.Contains(first, "1 passed, 0 failed") {
		t.Errorf("first run:\n%s", first)
	}
	matches, _ := filepath.Glob(filepath.Join(cache, "gwdiag", "static", "*", "gwdiag"))
	if len(matches) != 1 || container.CheckStatic(matches[0]) != nil {
		t.Errorf("cache: %v, want one static gwdiag", matches)
	}
	if second := run(); strings.Contains(second, "building a static one") {
		t.Errorf("second run built again:\n%s", second)
	}
}
