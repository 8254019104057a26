package conformance

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
	"github.com/gwdiag/gwdiag/steps"
	"github.com/gwdiag/gwdiag/steps/reportview"
)

// newBaselineCommand is `gwdiag conformance baseline REPORT`: the
// baseline of a report's failures, for --baseline.
func newBaselineCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "baseline REPORT [-o FILE]",
		Short: "Write a baseline of a report's failed scenarios, for run --baseline",
		Long: `Baseline reads a ConformanceReport and writes a ConformanceBaseline listing
every scenario that failed in it (by feature and name, with why). A run given
it with --baseline reports those scenarios, when they fail, as 'expected
failure', which does not fail the run; a listed scenario that passes fails the
run as a stale baseline, naming it, so that the baseline only ever shrinks.
A vendor adopts the suite on day one and tightens it as it fixes.`,
		Example: `  gwdiag conformance run --target process --proxy-cmd 'myproxy -c {config}' --report today.yaml
  gwdiag conformance baseline today.yaml -o gwdiag-baseline.yaml
  gwdiag conformance run --target process --proxy-cmd 'myproxy -c {config}' --baseline gwdiag-baseline.yaml`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return exitcode.Usagef("baseline needs one report file, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := reportview.Read(args[0])
			if err != nil {
				return err
			}
			b := steps.BaselineOf(r, args[0])
			if out == "" || out == "-" {
				return b.Encode(cmd.OutOrStdout())
			}
			if err := b.Write(out); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d expected failures\n", out, len(b.ExpectedFailures))
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the baseline here (default: stdout)")
	return cmd
}
