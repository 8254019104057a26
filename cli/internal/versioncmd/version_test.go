package versioncmd

import (
	"runtime/debug"
	"testing"
)

// TestRelease: a version set at link time wins; a `go install ...@v1.2.3`
// build (no link-time version) reports its module version; a build from a
// checkout, "dev".
func TestRelease(t *testing.T) {
	installed := &debug.BuildInfo{Main: debug.Module{Path: "github.com/gwdiag/gwdiag", Version: "v0.3.1"}}
	checkout := &debug.BuildInfo{Main: debug.Module{Path: "github.com/gwdiag/gwdiag", Version: "(devel)"}}
	for _, tt := range []struct {
		name, linked string
		info         *debug.BuildInfo
		want         string
	}{
		{"linked", "v1.2.3", installed, "v1.2.3"},
		{"go install @version", "dev", installed, "v0.3.1"},
		{"checkout", "dev", checkout, "dev"},
		{"no build info", "dev", nil, "dev"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := release(tt.linked, tt.info); got != tt.want {
				t.Errorf("release(%q): got %q, want %q", tt.linked, got, tt.want)
			}
		})
	}
}
