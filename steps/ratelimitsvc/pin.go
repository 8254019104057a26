package ratelimitsvc

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
)

// The pin of the service has one source of truth: the tools module
// steps/ratelimitsvc/tools, which `go get -tool` and `go mod tidy` edit and
// a checkout builds from. tools.mod and tools.sum beside this file are
// copies of its go.mod and go.sum, made by go generate, because embed
// cannot reach into another module (and a file named go.mod here would make
// this folder a module of its own). A gwdiag with no checkout (go install)
// builds from the copies it embeds; TestPinCopiesTheToolsModule fails when
// they differ from the module by a byte.

//go:generate cp tools/go.mod tools.mod
//go:generate cp tools/go.sum tools.sum

var (
	//go:embed tools.mod
	pinnedMod []byte
	//go:embed tools.sum
	pinnedSum []byte
)

// pinHash names the cache directory of the embedded pin.
func pinHash() string {
	h := sha256.New()
	h.Write(pinnedMod)
	h.Write([]byte{0})
	h.Write(pinnedSum)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// cacheRoot writes the embedded tools module into the user's cache
// ($XDG_CACHE_HOME or ~/.cache)/gwdiag/ratelimit-<hash>/tools, unless it
// is there already, and returns the directory, where the service is built.
// The files are written only when missing or different: a rewrite would
// make the binary stale (toolbin's rule).
func cacheRoot() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", &envError{msg: fmt.Sprintf("no cache directory to build the global rate-limit service in (%v): set $XDG_CACHE_HOME or $%s", err, EnvBin)}
	}
	root := filepath.Join(cache, "gwdiag", "ratelimit-"+pinHash())
	mod := filepath.Join(root, cacheModule)
	if err := os.MkdirAll(mod, 0o755); err != nil {
		return "", err
	}
	for name, b := range map[string][]byte{"go.mod": pinnedMod, "go.sum": pinnedSum} {
		if err := writeIfChanged(filepath.Join(mod, name), b); err != nil {
			return "", err
		}
	}
	return root, nil
}

// writeIfChanged writes b to path, whole (a parallel gwdiag may read it),
// unless path holds b already.
func writeIfChanged(path string, b []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		return nil
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
