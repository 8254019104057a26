package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/gwdiag/gwdiag/clusters/toolbin"
	"github.com/gwdiag/gwdiag/steps/targets/container"
)

// mainPackage is gwdiag's main package, what a static copy is built from.
const mainPackage = "github.com/gwdiag/gwdiag/cli/cmd/gwdiag"

// staticSelf returns a statically linked gwdiag for the images built FROM
// scratch (the container target's mocks, the local node's): this very
// executable when it is static, else one built with the user's Go
// toolchain (toolbin.StaticFlags, CGO_ENABLED=0) into the user's cache,
// once per executable.
// A gwdiag from `go build` or `go install` with cgo on (the default where
// a C compiler exists) is dynamically linked and cannot run FROM scratch.
// The copy is built from the release this gwdiag is (go install
// ...@version), or from the checkout it was built in.
func staticSelf(ctx context.Context, exe string, progress io.Writer) (string, error) {
	if container.CheckStatic(exe) == nil {
		return exe, nil
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for a static gwdiag: %w", err)
	}
	dir := filepath.Join(cache, "gwdiag", "static", hex.EncodeToString(sum[:])[:16])
	out := filepath.Join(dir, "gwdiag")
	if container.CheckStatic(out) == nil {
		return out, nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", errors.New("no go command on PATH to build it with")
	}
	cmd, from, err := staticBuildCommand(ctx, goBin, dir)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "this gwdiag is dynamically linked (cgo); building a static one for the images FROM scratch, from %s, into %s\n", from, dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cmd.Env = append(os.Environ(), toolbin.StaticEnv, "GOBIN="+dir)
	if o, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, o)
	}
	if err := container.CheckStatic(out); err != nil {
		return "", fmt.Errorf("the gwdiag built into %s: %w", dir, err)
	}
	return out, nil
}

// staticBuildCommand is the build of a static gwdiag: go install of the
// release this one is, or go build in the checkout this one was built in
// (found from this file's path, which builds without -trimpath record).
func staticBuildCommand(ctx context.Context, goBin, dir string) (*exec.Cmd, string, error) {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		cmd := exec.CommandContext(ctx, goBin, append(append([]string{"install"}, toolbin.StaticFlags...), mainPackage+"@"+bi.Main.Version)...)
		cmd.Dir = os.TempDir() // outside any module: the release's own go.mod rules
		return cmd, mainPackage + "@" + bi.Main.Version, nil
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return nil, "", errors.New("it was built with -trimpath from a checkout gwdiag cannot find")
	}
	root, err := moduleRoot(filepath.Dir(file))
	if err != nil {
		return nil, "", err
	}
	cmd := exec.CommandContext(ctx, goBin, append(append([]string{"build"}, toolbin.StaticFlags...), "-o", filepath.Join(dir, "gwdiag"), "./cli/cmd/gwdiag")...)
	cmd.Dir = root
	return cmd, "the checkout " + root, nil
}

// moduleRoot is the folder of gwdiag's go.mod at or above dir: the root
// of the checkout a file in dir was built in, however deep the file's
// package is.
func moduleRoot(dir string) (string, error) {
	for d := dir; ; {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/gwdiag/gwdiag\n") {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("the checkout it was built in (%s) is gone", dir)
		}
		d = parent
	}
}
