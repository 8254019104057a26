package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Binaries are the control-plane programs a local API server needs.
type Binaries struct {
	// Dir holds kube-apiserver and etcd.
	Dir string
}

// APIServer is the path of kube-apiserver.
func (b Binaries) APIServer() string { return filepath.Join(b.Dir, "kube-apiserver") }

// Etcd is the path of etcd.
func (b Binaries) Etcd() string { return filepath.Join(b.Dir, "etcd") }

// ErrNoNetwork is returned (wrapped) when the binaries are missing and
// cannot be built because the Go module proxy is unreachable. Tests skip on
// it; everything else is a failure.
var ErrNoNetwork = errors.New("cannot build kube-apiserver and etcd: the Go module proxy is unreachable")

// EnvBinDir names a directory holding prebuilt kube-apiserver and etcd; when
// set, nothing is built. KUBEBUILDER_ASSETS (setup-envtest's variable) is
// honoured the same way.
const EnvBinDir = "GWDIAG_KUBE_BIN"

// toolsModule is the nested module, relative to the repository root, that
// pins k8s.io/kubernetes and etcd as tools, so the main module never
// requires k8s.io/kubernetes.
const toolsModule = "clusters/kube/tools"

// programs maps each binary to the package it is built from.
var programs = []struct{ name, pkg string }{
	{"kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"},
	{"etcd", "go.etcd.io/etcd/server/v3"},
}

// EnsureBinaries returns kube-apiserver and etcd: from $GWDIAG_KUBE_BIN or
// $KUBEBUILDER_ASSETS when set, otherwise from <repo>/.bin, building them
// there from the nested tools module when they are missing or older than
// its go.mod/go.sum. Building is idempotent: a cold build takes minutes
// (the whole of kube-apiserver), a warm one seconds (Go's build cache), and
// up-to-date binaries are not rebuilt at all. log receives the go command's
// output; nil discards it.
func EnsureBinaries(ctx context.Context, log io.Writer) (Binaries, error) {
	for _, env := range []string{EnvBinDir, "KUBEBUILDER_ASSETS"} {
		if dir := os.Getenv(env); dir != "" {
			b := Binaries{Dir: dir}
			for _, p := range []string{b.APIServer(), b.Etcd()} {
				if _, err := os.Stat(p); err != nil {
					return b, fmt.Errorf("$%s=%s: %w", env, dir, err)
				}
			}
			return b, nil
		}
	}
	root, err := RepoRoot()
	if err != nil {
		return Binaries{}, err
	}
	return Build(ctx, root, filepath.Join(root, ".bin"), log)
}

// Build builds kube-apiserver and etcd into dir from the tools module of
// the repository at root, skipping a binary newer than the module's
// go.mod and go.sum.
func Build(ctx context.Context, root, dir string, log io.Writer) (Binaries, error) {
	b := Binaries{Dir: dir}
	mod := filepath.Join(root, toolsModule)
	newest, err := newestMod(mod)
	if err != nil {
		return b, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return b, err
	}
	// Test packages run in parallel and each may call Build: one builds,
	// the others wait and then find the binaries up to date.
	unlock, err := lockFile(filepath.Join(dir, ".kube-bins.lock"))
	if err != nil {
		return b, err
	}
	defer unlock()
	for _, p := range programs {
		out := filepath.Join(dir, p.name)
		if st, err := os.Stat(out); err == nil && st.ModTime().After(newest) {
			continue
		}
		// Build beside the target and rename, so a reader never sees a
		// half-written binary.
		tmp := out + ".tmp"
		cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, p.pkg)
		cmd.Dir = mod
		// The tools module has its own go.mod; a GOFLAGS=-mod=vendor or a
		// GOWORK of the caller must not leak into it.
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if log != nil {
			fmt.Fprintf(log, "building %s (%s) in %s\n", p.name, p.pkg, mod)
		}
		err := cmd.Run()
		if log != nil {
			log.Write(buf.Bytes())
		}
		if err != nil {
			msg := buf.String()
			if networkFailure(msg) {
				return b, fmt.Errorf("%w: go build %s: %s", ErrNoNetwork, p.pkg, lastLines(msg, 5))
			}
			return b, fmt.Errorf("go build %s in %s: %v\n%s", p.pkg, mod, err, lastLines(msg, 20))
		}
		if err := os.Rename(tmp, out); err != nil {
			return b, err
		}
	}
	return b, nil
}

// networkFailure tells a download failure from a compile error by the
// messages the go command prints when the module proxy is unreachable.
func networkFailure(out string) bool {
	for _, s := range []string{"dial tcp", "no such host", "i/o timeout", "connection refused", "proxy.golang.org", "TLS handshake", "network is unreachable"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

func newestMod(mod string) (t0 time.Time, err error) {
	for _, f := range []string{"go.mod", "go.sum"} {
		st, err := os.Stat(filepath.Join(mod, f))
		if err != nil {
			return t0, fmt.Errorf("tools module: %w", err)
		}
		if st.ModTime().After(t0) {
			t0 = st.ModTime()
		}
	}
	return t0, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// RepoRoot finds the gwdiag repository root (the directory holding the
// tools module) from the working directory upwards, so tests of any
// package and `make` targets find the same .bin.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, toolsModule, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no %s/go.mod above the working directory; set $%s to a directory holding kube-apiserver and etcd", toolsModule, EnvBinDir)
		}
		dir = parent
	}
}
