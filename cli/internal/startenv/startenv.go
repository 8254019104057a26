// Package startenv keeps two libraries linked into gwdiag from acting on
// the user's machine while the program initialises, before main runs:
//
//   - godog (the conformance suite's runner) runs `go env GOTOOLDIR` in a
//     package variable's initialiser (internal/builder, for its deprecated
//     Build) and discards the answer when the command succeeds. On a
//     machine with Go, every gwdiag command paid for a go process and its
//     telemetry child (which writes ~/.config/go/telemetry after gwdiag
//     has exited), and inside a module that asks for a newer Go it
//     downloaded that toolchain first: `gwdiag version` took 5.8 s there.
//   - controller-runtime's envtest (the local API server of
//     `conformance run --cluster local`) makes a kubebuilder-envtest
//     folder under the user's cache folder, else the temporary one, and
//     panics when it can make neither: gwdiag crashed at start on a
//     read-only file system.
//
// Go initialises packages in the order of their import paths, each once
// all it imports is initialised. This package imports only os, so it is
// initialised before any package it sorts before that imports more: godog's
// builder needs os/exec and envtest's port manager needs sigs.k8s.io
// packages, and both sort after it. Its initialiser empties PATH, so
// godog's go command is not found, and gives envtest a temporary folder it
// can make when neither of its own can be made (or says why gwdiag cannot
// start, instead of envtest's panic); Restore, which main calls first,
// puts the environment back as it was.
package startenv

import "os"

// saved is the environment this package changes, as the process got it.
var saved = map[string]*string{"PATH": nil, "TMPDIR": nil}

// envtestDir is the folder envtest's port manager makes at initialisation.
const envtestDir = "kubebuilder-envtest"

func init() {
	for k := range saved {
		if v, ok := os.LookupEnv(k); ok {
			saved[k] = &v
		}
	}
	os.Setenv("PATH", "")
	if err := envtestCanStart("/dev/shm"); err != nil {
		// envtest would panic as soon as this returns: say why instead.
		os.Stderr.WriteString("Error: " + err.Error() + "\n")
		os.Exit(1)
	}
}

// envtestCanStart makes sure envtest's port manager can make its folder:
// under the user's cache folder or the temporary one, as it tries, else
// under shm (/dev/shm: a memory file system, writable in most containers
// whose root is read-only), which it then takes for the temporary folder.
func envtestCanStart(shm string) error {
	if dir, err := os.UserCacheDir(); err == nil && os.MkdirAll(dir+"/"+envtestDir, 0o750) == nil {
		return nil
	}
	tmpErr := os.MkdirAll(os.TempDir()+"/"+envtestDir, 0o750)
	if tmpErr == nil {
		return nil
	}
	if os.MkdirAll(shm+"/"+envtestDir, 0o750) == nil {
		os.Setenv("TMPDIR", shm)
		return nil
	}
	return &startError{tmpErr}
}

// startError says why no folder envtest can make was found.
type startError struct{ err error }

func (e *startError) Error() string {
	return "no folder to write: neither the user's cache folder ($XDG_CACHE_HOME, else $HOME/.cache) nor the temporary one ($TMPDIR, else /tmp) can be written, and gwdiag's local API server (envtest) needs one at start (" + e.err.Error() + "); set TMPDIR to a writable folder"
}

// Restore puts back the environment the process started with, once the
// libraries have initialised: the commands gwdiag runs (curl, go, docker)
// find what the user's PATH names.
func Restore() {
	for k, v := range saved {
		if v == nil {
			os.Unsetenv(k)
		} else {
			os.Setenv(k, *v)
		}
	}
}
