// Package versioncmd provides `gwdiag version`.
package versioncmd

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version is the release version, set at link time with
// -ldflags "-X github.com/gwdiag/gwdiag/cli/versioncmd.Version=v1.2.3".
var Version = "dev"

// String returns the one-line version text printed by `gwdiag version`.
func String() string {
	rev := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " (" + s.Value[:12] + ")"
			}
		}
	}
	return fmt.Sprintf("gwdiag %s%s %s %s/%s", Version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// NewCommand returns `gwdiag version`.
func NewCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the gwdiag version",
		Example: "  gwdiag version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), String())
			return err
		},
	}
}
