package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartsWithoutActingOnTheMachine: gwdiag starting up runs no go
// command (godog's initialiser ran `go env GOTOOLDIR` on every start,
// which in a module asking for a newer Go downloaded that toolchain, and
// left go's telemetry writing under $HOME after gwdiag exited), and a
// machine whose cache and temporary folders cannot be written does not
// crash it (envtest's initialiser panicked there).
func TestStartsWithoutActingOnTheMachine(t *testing.T) {
	t.Run("no go command", func(t *testing.T) {
		bin, marker := t.TempDir(), filepath.Join(t.TempDir(), "go-ran")
		script := "#!/bin/sh\necho \"$@\" >> " + marker + "\n"
		if err := os.WriteFile(filepath.Join(bin, "go"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		home := t.TempDir()
		r := gwdiag(t, []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + home, "XDG_CACHE_HOME=", "XDG_CONFIG_HOME="}, nil, "version")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "gwdiag ") {
			t.Fatalf("gwdiag version: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		if ran, err := os.ReadFile(marker); err == nil {
			t.Errorf("gwdiag version ran go %q; want no go command at start", strings.TrimSpace(string(ran)))
		}
		if _, err := os.Stat(filepath.Join(home, ".config")); err == nil {
			t.Errorf("gwdiag version wrote %s/.config; want nothing there", home)
		}
	})
	t.Run("nothing writable", func(t *testing.T) {
		if _, err := os.Stat("/dev/shm"); err != nil {
			t.Skip("no /dev/shm:", err)
		}
		file := filepath.Join(t.TempDir(), "file") // no folder can be made under it
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		r := gwdiag(t, []string{"HOME=" + file, "XDG_CACHE_HOME=" + file, "TMPDIR=" + file}, nil, "version")
		if r.code != 0 || strings.Contains(r.stderr, "panic") {
			t.Errorf("gwdiag version with no writable cache or temporary folder: exit %d, stderr %q; want it to start", r.code, r.stderr)
		}
	})
}
