package toolbin

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// StaticFlags are the go build flags of every static program built from
// gwdiag's own module: the images' binaries (FROM scratch, the local
// node's), the node's pause, the proxies and backends the tests run, the
// static copy of a cgo gwdiag, and make build. One configuration, so that
// Go's build cache compiles each package once for all of them; and
// -trimpath, so that it does so once for every checkout on the machine (a
// build without it records the checkout's path, which keys the cache).
// -ldflags may follow them (it changes only the link).
var StaticFlags = []string{"-trimpath", "-buildvcs=false"}

// StaticEnv is added to the go command's environment for them.
const StaticEnv = "CGO_ENABLED=0"

// BuildStatic builds pkgs (import paths, or paths relative to dir) of the
// module around dir ("" is the working directory) as static binaries into
// out: a file for one package, a directory ending in "/" for several.
func BuildStatic(ctx context.Context, dir, out string, pkgs ...string) error {
	args := append([]string{"build"}, StaticFlags...)
	args = append(append(args, "-ldflags=-s -w", "-o", out), pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), StaticEnv)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, LastLines(string(b), 20))
	}
	return nil
}
