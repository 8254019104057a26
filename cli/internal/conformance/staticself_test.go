package conformance

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStaticBuildInTheCheckout: a gwdiag built from a checkout (this test
// binary is) builds its static copy in that checkout's root, however deep
// this package lies below it (TestCgoGwdiagRunsContainerTarget runs it
// whole); a folder with no gwdiag go.mod above it is a checkout that is
// gone.
func TestStaticBuildInTheCheckout(t *testing.T) {
	cmd, from, err := staticBuildCommand(context.Background(), "go", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cmd.Dir, "cli", "cmd", "gwdiag", "main.go")); err != nil || from != "the checkout "+cmd.Dir {
		t.Errorf("builds in %s (%s), want the checkout's root: %v", cmd.Dir, from, err)
	}
	if got := strings.Join(cmd.Args[1:2], " ") + " " + cmd.Args[len(cmd.Args)-1]; got != "build ./cli/cmd/gwdiag" {
		t.Errorf("command %q, want go build ... ./cli/cmd/gwdiag", cmd.Args)
	}
	gone := t.TempDir()
	if _, err := moduleRoot(gone); err == nil || !strings.Contains(err.Error(), "the checkout it was built in ("+gone+") is gone") {
		t.Errorf("moduleRoot of a folder outside any checkout: %v", err)
	}
}
