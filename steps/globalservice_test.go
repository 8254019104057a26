package steps

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoGoIsNotRun: outside a checkout, with no service built and no go
// command to build it, the global rate-limit scenarios are not run, with
// the fix naming the Go toolchain. Not parallel: it takes PATH away and
// leaves the checkout.
func TestNoGoIsNotRun(t *testing.T) {
	redis, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not on PATH (make redis-server): without it, it is what is missing")
	}
	bin := t.TempDir()
	if err := os.Symlink(redis, filepath.Join(bin, "redis-server")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	t.Setenv("PATH", bin)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("GWDIAG_RATELIMIT_BIN", "")
	var out strings.Builder
	rep, err := Run(context.Background(), Options{Output: &out, AllFeatures: true, Tags: "@global-rate-limit", Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	checkIncomplete(t, rep, out.String(), "the Go toolchain", "install Go 1.26+")
}
