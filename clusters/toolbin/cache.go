package toolbin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// envCache names the directory where built programs are kept for every
// checkout of the repository on the machine: a clean clone takes them from
// there instead of linking them again (kube-apiserver, kubelet and the rest
// take minutes to link even from a warm Go build cache). "off" turns it
// off; unset, it is <user cache dir>/gwdiag/toolbin ($XDG_CACHE_HOME or
// ~/.cache on Linux).
const envCache = "GWDIAG_TOOLBIN_CACHE"

// sharedCache returns the cache directory, "" when it is off or there is
// no user cache directory.
func sharedCache() string {
	switch v := os.Getenv(envCache); v {
	case "off":
		return ""
	case "":
		d, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		return filepath.Join(d, "gwdiag", "toolbin")
	default:
		return v
	}
}

// cacheKey names one build of p from the tools module mod: the module's
// go.mod and go.sum, the package, the build's flags, the environment it
// adds, and goEnv, the go command's version and target in mod (goEnvOf).
// Anything else that changes the binary changes one of these.
func cacheKey(mod string, p Program, env []string, goEnv []byte) (string, error) {
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(mod, f))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	fmt.Fprintf(h, "pkg %s\nflags %s\nldflags %s\nenv %s\ngo %s", p.Pkg, strings.Join(StaticFlags, " "), p.LDFlags, strings.Join(env, " "), goEnv)
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// goEnvOf is what `go env` says in mod of the version and target the
// build takes (the module's toolchain line included).
func goEnvOf(mod string, env []string) ([]byte, error) {
	cmd := exec.Command("go", "env", "GOVERSION", "GOOS", "GOARCH", "GOAMD64", "CGO_ENABLED", "GOEXPERIMENT")
	cmd.Dir = mod
	cmd.Env = buildEnv(env)
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go env in %s: %w", mod, err)
	}
	return out, nil
}

// buildEnv is the environment of the go commands run in a tools module:
// its own go.mod, whatever GOFLAGS=-mod=vendor or GOWORK the caller has.
func buildEnv(env []string) []string {
	return append(append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod"), env...)
}

// place puts a copy of src at dst whole (a hard link where both are on
// one file system, else a copy written beside dst and renamed).
func place(src, dst string) error {
	tmp := fmt.Sprintf("%s.%d.tmp", dst, os.Getpid())
	os.Remove(tmp)
	if err := os.Link(src, tmp); err != nil {
		if err := copyFile(src, tmp); err != nil {
			os.Remove(tmp)
			return err
		}
	}
	// A link keeps src's time: a binary taken from the cache must count as
	// newer than the module it was built from (fresh), as a new build is.
	if err := os.Chtimes(tmp, time.Now(), time.Now()); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, dst)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
