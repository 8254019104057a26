package tracecmd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/cli/exitcode"
	"github.com/gwdiag/gwdiag/golden"
)

// ErrDiffer is returned by `gwdiag trace diff` when the traces differ: exit 1.
var ErrDiffer = exitError{code: 1, err: errors.New("traces differ")}

func newDiffCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "diff A.jsonl B.jsonl",
		Short: "Compare two saved traces after normalising volatile fields",
		Long: `Diff reads two JSON Lines traces, replaces volatile values (times, ports,
addresses, dates, pod names) with stable placeholders, and prints an
event-by-event, field-level difference. It exits 0 when they are equal, 1 when
they differ and 2 when a trace cannot be read.`,
		Example: `  # Compare a fresh trace with a golden one
  gwdiag trace --local --raw --port 3000 -- http://example.com/ > got.jsonl
  gwdiag trace diff golden/traces/basic.jsonl got.jsonl`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return exitcode.Usage(fmt.Errorf("diff takes two trace files, received %d", len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := golden.ReadJSONL(args[0])
			if err != nil {
				return exitError{code: 2, err: fmt.Errorf("reading %s: %w", args[0], err)}
			}
			b, err := golden.ReadJSONL(args[1])
			if err != nil {
				return exitError{code: 2, err: fmt.Errorf("reading %s: %w", args[1], err)}
			}
			d := golden.Diff(golden.Normalize(a), golden.Normalize(b))
			if d == "" {
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout(), d)
			return ErrDiffer
		},
	}
}

// exitError carries an exit status for the root command.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// ExitCode returns the process exit status.
func (e exitError) ExitCode() int { return e.code }
