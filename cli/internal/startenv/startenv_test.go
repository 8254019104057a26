package startenv

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestInitEmptiesPathUntilRestore: this test binary initialised the
// package as gwdiag does, so PATH is empty until Restore puts back the
// one the process started with (/proc/self/environ holds it).
func TestInitEmptiesPathUntilRestore(t *testing.T) {
	environ, err := os.ReadFile("/proc/self/environ")
	if err != nil {
		t.Skip("no /proc/self/environ:", err)
	}
	var want string
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if v, ok := strings.CutPrefix(string(kv), "PATH="); ok {
			want = v
		}
	}
	if want == "" {
		t.Skip("the test runs without PATH")
	}
	if got, ok := os.LookupEnv("PATH"); !ok || got != "" {
		t.Fatalf("PATH before Restore = %q (set %v), want empty: godog's initialiser would find go", got, ok)
	}
	Restore()
	if got := os.Getenv("PATH"); got != want {
		t.Errorf("PATH after Restore = %q, want %q", got, want)
	}
}

// TestEnvtestCanStart: envtest's folder is made where envtest looks for
// it, or under shm when neither of its own can be made, and when none can,
// the error says which folders and what to set.
func TestEnvtestCanStart(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the user's cache folder is $XDG_CACHE_HOME on Linux only")
	}
	unwritable := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(unwritable, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("the user's cache folder", func(t *testing.T) {
		cache := t.TempDir()
		t.Setenv("XDG_CACHE_HOME", cache)
		t.Setenv("TMPDIR", unwritable)
		if err := envtestCanStart(unwritable); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(cache, envtestDir)); err != nil {
			t.Error(err)
		}
	})
	t.Run("the temporary folder", func(t *testing.T) {
		tmp := t.TempDir()
		t.Setenv("XDG_CACHE_HOME", unwritable)
		t.Setenv("TMPDIR", tmp)
		if err := envtestCanStart(unwritable); err != nil || os.Getenv("TMPDIR") != tmp {
			t.Fatalf("err %v, TMPDIR %s; want nil and %s", err, os.Getenv("TMPDIR"), tmp)
		}
	})
	t.Run("shm", func(t *testing.T) {
		shm := t.TempDir()
		t.Setenv("XDG_CACHE_HOME", unwritable)
		t.Setenv("TMPDIR", unwritable)
		if err := envtestCanStart(shm); err != nil || os.Getenv("TMPDIR") != shm {
			t.Fatalf("err %v, TMPDIR %s; want nil and %s", err, os.Getenv("TMPDIR"), shm)
		}
		if _, err := os.Stat(filepath.Join(shm, envtestDir)); err != nil {
			t.Error(err)
		}
	})
	t.Run("none", func(t *testing.T) {
		t.Setenv("XDG_CACHE_HOME", unwritable)
		t.Setenv("TMPDIR", unwritable)
		err := envtestCanStart(unwritable)
		if err == nil || !strings.Contains(err.Error(), "set TMPDIR to a writable folder") || !strings.Contains(err.Error(), unwritable) {
			t.Errorf("err = %v; want one that names %s and says to set TMPDIR", err, unwritable)
		}
	})
}
