// Package versioncmd provides `gwdiag version`.
package versioncmd

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version is the release version, set at link time with
// -ldflags "-X github.com/gwdiag/gwdiag/cli/internal/versioncmd.Version=v1.2.3".
var Version = "dev"

// revision is the VCS revision when set at link time (make build does:
// -X github.com/gwdiag/gwdiag/cli/internal/versioncmd.revision=...), for builds made
// with -buildvcs=false.
var revision string

// Revision is the VCS revision the binary was built from (12 hex digits,
// "+dirty" when the tree had changes), or "" when the build has none
// (go run, go test).
func Revision() string {
	if revision != "" {
		return revision
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision" && len(s.Value) >= 12:
			rev = s.Value[:12]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "+dirty"
		}
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}

// Release is the version this gwdiag is: Version when set at link time,
// else the module version of a `go install .../cli/cmd/gwdiag@v1.2.3`
// build, else "dev".
func Release() string {
	info, _ := debug.ReadBuildInfo()
	return release(Version, info)
}

func release(linked string, info *debug.BuildInfo) string {
	if linked != "dev" && linked != "" {
		return linked
	}
	if info != nil && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "dev"
}

// versionString returns the one-line version text printed by `gwdiag version`.
func versionString() string {
	rev := ""
	if r := Revision(); r != "" {
		rev = " (" + r + ")"
	}
	return fmt.Sprintf("gwdiag %s%s %s %s/%s", Release(), rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// NewCommand returns `gwdiag version`.
func NewCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the gwdiag version",
		Example: "  gwdiag version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionString())
			return err
		},
	}
}
