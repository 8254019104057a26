package toolbin

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNetworkFailure(t *testing.T) {
	tests := []struct {
		name string
		out  string
		want bool
	}{
		{"proxy unreachable", `go: k8s.io/kubernetes@v1.36.3: Get "https://proxy.golang.org/k8s.io/kubernetes/@v/v1.36.3.zip": dial tcp: lookup proxy.golang.org: no such host`, true},
		{"timeout", "read tcp 10.0.0.2:443: i/o timeout", true},
		{"compile error", "./main.go:3:1: syntax error: non-declaration statement outside function body", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := networkFailure(tt.out); got != tt.want {
				t.Errorf("networkFailure(%q) = %v, want %v", tt.out, got, tt.want)
			}
		})
	}
}

// TestUpToDate: a binary counts as built only when it is newer than both
// go.mod and go.sum of its tools module, the rule Build skips by.
func TestUpToDate(t *testing.T) {
	root := t.TempDir()
	mod := filepath.Join(root, "tools")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	progs := []Program{{Name: "svc", Pkg: "example.com/svc"}}
	then := time.Now().Add(-time.Hour)
	for _, f := range []string{"go.mod", "go.sum"} {
		p := filepath.Join(mod, f)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, then, then); err != nil {
			t.Fatal(err)
		}
	}
	if UpToDate(root, "tools", root, progs) {
		t.Error("up to date with no binary")
	}
	if err := os.WriteFile(filepath.Join(root, "svc"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if !UpToDate(root, "tools", root, progs) {
		t.Error("not up to date with a binary newer than go.mod and go.sum")
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(mod, "go.sum"), later, later); err != nil {
		t.Fatal(err)
	}
	if UpToDate(root, "tools", root, progs) {
		t.Error("up to date with go.sum newer than the binary")
	}
}

// TestSharedCache: a program built in one checkout is taken from the
// shared cache by the next (same bytes, counted up to date, no go build);
// a change to the tools module's go.mod builds it again; with the cache
// off nothing is kept.
func TestSharedCache(t *testing.T) {
	cache := t.TempDir()
	t.Setenv(envCache, cache)
	root := t.TempDir()
	mod := filepath.Join(root, "tools")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(mod, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/tools\n\ngo 1.26\n")
	write("go.sum", "")
	write("main.go", "package main\n\nfunc main() { println(\"hello\") }\n")
	progs := []Program{{Name: "hello", Pkg: "example.com/tools"}}
	build := func(dir string) string {
		t.Helper()
		var log strings.Builder
		if err := Build(context.Background(), root, "tools", dir, progs, &log, "CGO_ENABLED=0"); err != nil {
			t.Fatalf("%v\n%s", err, log.String())
		}
		if !UpToDate(root, "tools", dir, progs) {
			t.Errorf("%s: not up to date after Build", dir)
		}
		return log.String()
	}
	first, second := t.TempDir(), t.TempDir()
	if log := build(first); !strings.Contains(log, "building hello") {
		t.Fatalf("first checkout: %q, want a build", log)
	}
	if log := build(second); !strings.Contains(log, "hello: built before, taken from "+cache) || strings.Contains(log, "building") {
		t.Errorf("second checkout: %q, want the program from the cache, no build", log)
	}
	a, _ := os.ReadFile(filepath.Join(first, "hello"))
	b, _ := os.ReadFile(filepath.Join(second, "hello"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("the cached program differs from the one built (%d and %d bytes)", len(a), len(b))
	}
	write("go.mod", "module example.com/tools\n\ngo 1.26\n\n// changed\n")
	if log := build(t.TempDir()); !strings.Contains(log, "building hello") {
		t.Errorf("after go.mod changed: %q, want a new build", log)
	}
	t.Setenv(envCache, "off")
	before, _ := filepath.Glob(filepath.Join(cache, "*"))
	write("go.mod", "module example.com/tools\n\ngo 1.26\n\n// changed again\n")
	if log := build(t.TempDir()); !strings.Contains(log, "building hello") {
		t.Errorf("cache off: %q, want a build", log)
	}
	if after, _ := filepath.Glob(filepath.Join(cache, "*")); len(after) != len(before) {
		t.Errorf("cache off: %d entries before, %d after; want nothing kept", len(before), len(after))
	}
}
