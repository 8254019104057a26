package steps

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gwdiag/gwdiag/clusters/toolbin"
)

// built holds the binaries the package's tests build, each once: tests
// that run the same binary as a process share it.
var built struct {
	mu   sync.Mutex
	dir  string
	bins map[string]string
}

// builtBinary returns pkg built once for the package's tests.
func builtBinary(t *testing.T, pkg string) string {
	t.Helper()
	built.mu.Lock()
	defer built.mu.Unlock()
	if bin, ok := built.bins[pkg]; ok {
		return bin
	}
	if built.dir == "" {
		dir, err := os.MkdirTemp("", "gwdiag-steps-bin-")
		if err != nil {
			t.Fatal(err)
		}
		built.dir, built.bins = dir, map[string]string{}
	}
	bin := filepath.Join(built.dir, path.Base(pkg))
	if err := toolbin.BuildStatic(context.Background(), "", bin, pkg); err != nil {
		t.Fatal(err)
	}
	built.bins[pkg] = bin
	return bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}
