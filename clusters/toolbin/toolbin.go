// Package toolbin builds the programs the clusters and the suite run
// beside a proxy from nested tools modules of the repository into
// <repo>/.bin:
// kube-apiserver and etcd for the cluster target (clusters/kube/tools),
// and the Envoy rate-limit service for global limits
// (steps/ratelimitsvc/tools). A tools module pins them with go.mod `tool`
// lines, so the main module never requires what they import. A gwdiag with
// no checkout (go install) writes the module it embeds into the user's
// cache and builds there (ratelimitsvc.EnsureBinary). Every program built
// is also kept in a cache shared by the machine's checkouts (envCache), so
// that a clean clone links nothing that did not change.
package toolbin

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

// ErrNoNetwork is returned (wrapped) when a program is missing and cannot
// be built because the Go module proxy is unreachable. Tests skip on it;
// everything else is a failure.
var ErrNoNetwork = errors.New("the Go module proxy is unreachable")

// Program is one binary: its file name in the output directory and the
// package it is built from.
type Program struct {
	Name, Pkg string
	// LDFlags are passed to go build -ldflags (e.g. -X to stamp a version).
	LDFlags string
}

// Build builds programs into dir from the tools module at root/module
// (root is the repository root, or a directory the module was written
// into), skipping a binary newer than the
// module's go.mod and go.sum. A cold build takes what the go command
// takes, a warm one seconds (Go's build cache), and up-to-date binaries
// are not rebuilt at all. Parallel callers (test packages) serialise on a
// lock in dir; each binary is renamed into place whole. log receives the
// go command's output; nil discards it. env adds to the go command's
// environment (StaticEnv for a static binary). Every program is built
// with StaticFlags: Go's build cache is keyed by content, not by the
// checkout's path, and the packages a program shares with gwdiag's module
// at the same versions compile once for both (the Kubernetes binaries'
// client-go, apimachinery and the rest; docs/ci.md).
func Build(ctx context.Context, root, module, dir string, programs []Program, log io.Writer, env ...string) error {
	mod := filepath.Join(root, module)
	newest, err := newestMod(mod)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	lock := filepath.Base(module)
	if parent := filepath.Base(filepath.Dir(module)); parent != "." {
		lock = parent + "-" + lock
	}
	unlock, err := lockFile(filepath.Join(dir, "."+lock+".lock"))
	if err != nil {
		return err
	}
	defer unlock()
	cache := sharedCache()
	var goEnv []byte // go env in mod, asked once, when a program is not fresh
	for _, p := range programs {
		out := filepath.Join(dir, p.Name)
		if fresh(out, newest) {
			continue
		}
		if cache != "" && goEnv == nil {
			if goEnv, err = goEnvOf(mod, env); err != nil {
				cache = "" // built as without a cache
			}
		}
		var kept string // the program in the shared cache
		if cache != "" {
			if key, err := cacheKey(mod, p, env, goEnv); err == nil {
				kept = filepath.Join(cache, key, p.Name)
			}
		}
		if kept != "" {
			if _, err := os.Stat(kept); err == nil {
				if err := place(kept, out); err != nil {
					return fmt.Errorf("%s from the cache %s: %w", p.Name, kept, err)
				}
				if log != nil {
					fmt.Fprintf(log, "%s: built before, taken from %s\n", p.Name, kept)
				}
				continue
			}
		}
		tmp := out + ".tmp"
		args := append(append([]string{"build"}, StaticFlags...), "-o", tmp)
		if p.LDFlags != "" {
			args = append(args, "-ldflags", p.LDFlags)
		}
		cmd := exec.CommandContext(ctx, "go", append(args, p.Pkg)...)
		cmd.Dir = mod
		// The tools module has its own go.mod; a GOFLAGS=-mod=vendor or a
		// GOWORK of the caller must not leak into it.
		cmd.Env = buildEnv(env)
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if log != nil {
			fmt.Fprintf(log, "building %s (%s) in %s\n", p.Name, p.Pkg, mod)
		}
		err := cmd.Run()
		if log != nil {
			log.Write(buf.Bytes())
		}
		if err != nil {
			msg := buf.String()
			if networkFailure(msg) {
				return fmt.Errorf("cannot build %s: %w: go build %s: %s", p.Name, ErrNoNetwork, p.Pkg, LastLines(msg, 5))
			}
			return fmt.Errorf("go build %s in %s: %v\n%s", p.Pkg, mod, err, LastLines(msg, 20))
		}
		if err := os.Rename(tmp, out); err != nil {
			return err
		}
		if kept != "" {
			// For the next checkout; a cache that cannot be written
			// costs that checkout a build, nothing else.
			if err := os.MkdirAll(filepath.Dir(kept), 0o755); err == nil {
				if err := place(out, kept); err != nil && log != nil {
					fmt.Fprintf(log, "%s: not kept in %s: %v\n", p.Name, kept, err)
				}
			}
		}
	}
	return nil
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

// UpToDate reports whether Build would build nothing: every program's
// binary in dir is newer than the tools module's go.mod and go.sum. It
// takes no lock, so another process may be building them meanwhile.
func UpToDate(root, module, dir string, programs []Program) bool {
	newest, err := newestMod(filepath.Join(root, module))
	if err != nil {
		return false
	}
	for _, p := range programs {
		if !fresh(filepath.Join(dir, p.Name), newest) {
			return false
		}
	}
	return true
}

// fresh reports whether the binary out exists and is newer than newest.
func fresh(out string, newest time.Time) bool {
	st, err := os.Stat(out)
	return err == nil && st.ModTime().After(newest)
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

// LastLines is the last n lines of s, without its final newline.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// RepoRoot finds the gwdiag repository root, the directory holding module
// (a tools module's path relative to it), from the working directory
// upwards, so tests of any package and make targets find the same .bin.
func RepoRoot(module string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, module, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no %s/go.mod above the working directory", module)
		}
		dir = parent
	}
}
