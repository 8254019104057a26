// Package features holds the Gherkin features of the conformance suite,
// embedded so that the gwdiag binary runs them outside the repository.
//
// Every scenario carries the tag of its feature (@trace-order, ...). Scenarios
// of optional behaviour also carry @extended: a proxy that lacks it is
// reported as not supporting the feature rather than as failing.
package features

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"sort"
	"sync"
)

// Version names the feature set: it changes when scenarios are added,
// removed, or moved between core and extended, so two reports of the same
// version ran the same checks.
const Version = "v0.5.0"

// Digest is the first 12 hex digits of the SHA-256 of the embedded feature
// files (names and contents, in name order): it tells two builds' feature
// sets apart even where Version was not changed.
var Digest = sync.OnceValue(func() string { return digestOf(FS) })

func digestOf(fsys fs.FS) string {
	h := sha256.New()
	names, _ := fs.Glob(fsys, "*.feature")
	sort.Strings(names)
	for _, n := range names {
		b, _ := fs.ReadFile(fsys, n)
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write(b)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// FS holds every .feature file of this folder.
//
//go:embed *.feature
var FS embed.FS
