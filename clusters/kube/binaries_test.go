package kube

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
)

func TestEnsureBinariesFromEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(envBinDir, dir)
	if _, err := EnsureBinaries(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "$"+envBinDir) {
		t.Errorf("empty $%s: got %v, want an error naming the variable", envBinDir, err)
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := EnsureBinaries(context.Background(), nil)
	if err != nil || b.APIServer() != filepath.Join(dir, "kube-apiserver") || b.Etcd() != filepath.Join(dir, "etcd") {
		t.Errorf("prebuilt binaries in $%s: got %+v, %v", envBinDir, b, err)
	}
	// A node wants its three programs too, from the same directory.
	if _, err := EnsureNodeBinaries(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "$"+envBinDir) || !strings.Contains(err.Error(), "kubelet") {
		t.Errorf("$%s without a node's programs: got %v, want an error naming the variable and the kubelet", envBinDir, err)
	}
	for _, name := range []string{"kubelet", "kube-controller-manager", "kube-scheduler"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err = EnsureNodeBinaries(context.Background(), nil)
	if err != nil || b.Kubelet() != filepath.Join(dir, "kubelet") || b.Scheduler() != filepath.Join(dir, "kube-scheduler") {
		t.Errorf("a node's prebuilt binaries in $%s: got %+v, %v", envBinDir, b, err)
	}
}

// TestBuildKeepsUpToDateBinaries checks an up-to-date binary is not
// rebuilt: with binaries newer than the tools module's go.mod, Build must
// not run the go command at all (an empty PATH would make it fail).
func TestBuildKeepsUpToDateBinaries(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	future := time.Now().Add(time.Hour)
	for _, name := range []string{"kube-apiserver", "etcd"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, future, future); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", "")
	if _, err := build(context.Background(), root, dir, nil); err != nil {
		t.Errorf("up-to-date binaries: got %v, want no build", err)
	}
	// A stale one is rebuilt: with no go command, that fails, naming it.
	old := time.Unix(0, 0)
	if err := os.Chtimes(filepath.Join(dir, "etcd"), old, old); err != nil {
		t.Fatal(err)
	}
	_, err = build(context.Background(), root, dir, nil)
	if err == nil || errors.Is(err, ErrNoNetwork) || !strings.Contains(err.Error(), "go.etcd.io/etcd/server/v3") {
		t.Errorf("stale etcd without a go command: got %v, want a build error naming the etcd package", err)
	}
}

// TestToolsModuleSharesMainVersions: every module that both the tools
// module and gwdiag's own require is at the same version in both (a
// replace counts as its replacement's version). The Kubernetes binaries
// are built in the static configuration gwdiag's packages are vetted in
// (toolbin.StaticFlags), so a package they share (client-go,
// apimachinery, x/net, ...) compiles once for both; one module at another
// version gives every package above it another cache key, and
// kube-apiserver's cold build took 202 s instead of 130 s (docs/ci.md).
func TestToolsModuleSharesMainVersions(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	versions := func(path string) map[string]string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := modfile.Parse(path, b, nil)
		if err != nil {
			t.Fatal(err)
		}
		v := map[string]string{}
		for _, r := range f.Require {
			v[r.Mod.Path] = r.Mod.Version
		}
		for _, r := range f.Replace {
			if _, ok := v[r.Old.Path]; ok && r.New.Path == r.Old.Path {
				v[r.Old.Path] = r.New.Version
			}
		}
		return v
	}
	main, tools := versions(filepath.Join(root, "go.mod")), versions(filepath.Join(root, toolsModule, "go.mod"))
	var drift []string
	for path, want := range main {
		if got, ok := tools[path]; ok && got != want {
			drift = append(drift, path+"@"+want+" (tools: "+got+")")
		}
	}
	sort.Strings(drift)
	if len(drift) > 0 {
		t.Errorf("%s requires %d modules at other versions than go.mod; in it, go get each at go.mod's version:\n%s",
			toolsModule, len(drift), strings.Join(drift, "\n"))
	}
}
