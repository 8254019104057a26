// Package conformance provides the `gwdiag conformance` command: run the suite
// against a target (`run`) and check recorded traces (`check`).
//
// SKELETON: replaced by the conformance suite work (issue 4).
package conformance

import (
	"errors"

	"github.com/spf13/cobra"
)

// NewCommand returns `gwdiag conformance` with its subcommands.
func NewCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "conformance",
		Short: "Run the conformance suite against a proxy, or check recorded traces",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("conformance: not implemented yet")
		},
	}
}
