package conformance

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
	"github.com/gwdiag/gwdiag/steps"
)

// newReplayCommand is `gwdiag conformance replay BUNDLE`: a failed
// scenario run again from its failure bundle, and what differs.
func newReplayCommand() *cobra.Command {
	var (
		configPath string
		flags      optionFlags
	)
	cmd := &cobra.Command{
		Use:   "replay BUNDLE [target flags]",
		Short: "Run a failed scenario again from its failure bundle, and show what differs",
		Long: `Replay reads a failure bundle ('conformance run --bundle-dir' writes one per
failed scenario), runs that one scenario again from the feature file the bundle
holds, on the target the flags name (the reference proxy in process by
default; every flag of 'conformance run' applies), and shows what differs: the
verdict then and now, and for each trace of the bundle a trace diff against
the replay's (normalised as golden traces are: times, ids, ports and
addresses do not count). Run against the reference, it answers "is it my
proxy or the suite?": a scenario that passes there failed for the proxy.

It exits 0 when the replay passed, 1 when it failed, 3 when the replay's
environment kept it from running, 2 on a usage error. A replay that fails
writes a bundle of its own when --bundle-dir is given.`,
		Example: `  # The reference proxy, in process: is it the proxy or the suite?
  gwdiag conformance replay bundles/trace-order/a-forwarded-request-traces-every-required-event-in-order

  # The proxy under test again, after a fix
  gwdiag conformance replay BUNDLE --target process --proxy-cmd 'myproxy -c {config}'`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return exitcode.Usagef("replay needs one bundle folder, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if st, err := os.Stat(args[0]); err != nil || !st.IsDir() {
				return exitcode.Usagef("replay: %s is not a bundle folder", args[0])
			}
			o, err := runOptions(cmd, configPath, &flags)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			var progress strings.Builder
			o.Output = &progress
			r, err := steps.Replay(cmd.Context(), args[0], o)
			if err != nil {
				io.WriteString(out, progress.String())
				return err
			}
			printReplay(out, args[0], r)
			switch {
			case r.Report.Interrupted != nil:
				return fmt.Errorf("replay %s", r.Report.Interrupted.Signal)
			case r.Scenario.Result == steps.Failed:
				return failedError{"the replay failed"}
			case r.Scenario.Result == steps.NotRun:
				return incompleteError{"the replay did not run: " + r.Scenario.Message}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&configPath, "config", "c", "", "options file (YAML, the fields of steps.Options; docs/options.md); flags override it")
	flags.add(f)
	return cmd
}

// printReplay says what was, what is, and how the traces differ.
func printReplay(w io.Writer, dir string, r *steps.Replayed) {
	m := r.Bundle.Meta
	fmt.Fprintf(w, "bundle:   %s\nscenario: %s (feature %s, %s)\n", dir, m.Scenario, m.Feature, m.FeatureFile)
	fmt.Fprintf(w, "was:      %s on %s", m.Result, m.Target)
	if m.Implementation != "" {
		fmt.Fprintf(w, " (%s)", m.Implementation)
	}
	if m.FailedStep != "" {
		fmt.Fprintf(w, ", at step %q", m.FailedStep)
	}
	fmt.Fprintf(w, "\n          %s\n", indent(m.Message))
	fmt.Fprintf(w, "now:      %s on %s (%s)", r.Scenario.Result, r.Report.Target, r.Report.Implementation.Name)
	if r.Scenario.Step != "" {
		fmt.Fprintf(w, ", at step %q", r.Scenario.Step)
	}
	fmt.Fprintln(w)
	if r.Scenario.Message != "" {
		fmt.Fprintf(w, "          %s\n", indent(r.Scenario.Message))
	}
	if r.Scenario.Bundle != "" {
		fmt.Fprintf(w, "          evidence: %s\n", r.Scenario.Bundle)
	}
	switch {
	case r.Same():
		fmt.Fprintf(w, "verdict:  the same (%s)\n", m.Result)
	case r.Scenario.Result == steps.Passed:
		fmt.Fprintf(w, "verdict:  differs: the scenario passes on %s; the failure was the proxy's, not the suite's\n", r.Report.Target)
	default:
		fmt.Fprintf(w, "verdict:  differs: %s, then %s\n", m.Result, r.Scenario.Result)
	}
	for i, p := range r.Traces {
		name := p.Name
		if name == "" {
			name = "(none in the bundle)"
		}
		switch {
		case p.Replayed == nil:
			fmt.Fprintf(w, "trace %d:  %s: the replay took no trace of this rank\n", i+1, name)
		case p.Diff == "":
			fmt.Fprintf(w, "trace %d:  %s: the same (normalised)\n", i+1, name)
		default:
			fmt.Fprintf(w, "trace %d:  %s: differs (- the bundle, + the replay)\n%s", i+1, name, p.Diff)
		}
	}
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n          ") }
