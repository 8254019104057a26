package toolbin

import (
	"os"
	"path/filepath"
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
