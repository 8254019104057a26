// Package conformance provides the `gwdiag conformance` command: run the suite
// against a target (`run`) and check recorded traces (`check`).
package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
	"github.com/gwdiag/gwdiag/cli/internal/versioncmd"
	"github.com/gwdiag/gwdiag/golden/trace/explain"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/steps"
	"github.com/gwdiag/gwdiag/steps/interrupt"
	"github.com/gwdiag/gwdiag/steps/mock"
	"github.com/gwdiag/gwdiag/steps/reportview"
	"github.com/gwdiag/gwdiag/steps/targets/container"
)

// NewCommand returns `gwdiag conformance` with its subcommands.
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "conformance",
		Short: "Run the conformance suite against a proxy, or check recorded traces",
		Long: `The conformance suite tells whether a proxy's diagnostics (trace stream,
admin endpoints, local rate limiting) conform to the specification. Its
features are built into this binary, so it runs outside the repository.`,
	}
	cmd.AddCommand(newRunCommand(), newReplayCommand(), newBaselineCommand(), newCheckCommand(), newReportCommand(), newMockBackendCommand())
	return cmd
}

// mockBackendArgs run gwdiag as the mock backends (mock.Command): the
// entrypoint of the mock image the container target builds from gwdiag.
var mockBackendArgs = []string{"conformance", "mockbackend"}

// newMockBackendCommand is the hidden command the container target's mock
// image runs.
func newMockBackendCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "mockbackend [--echo-addr ADDR]... [--llm-addr ADDR]...",
		Short: "Serve the suite's mock backends (the container target's mock image runs this)",
		Example: `  # two echo backends and one mock LLM, as the container target's mock image runs them
  gwdiag conformance mockbackend --echo-addr :8000 --echo-addr :8001 --llm-addr :8002`,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := mock.Command(cmd.Context(), "gwdiag conformance mockbackend", args, cmd.OutOrStdout()); err != nil {
				return exitcode.Usage(err)
			}
			return nil
		},
	}
}

// selfMockBuild is the mock image build from this very executable, or from
// a static copy of it (staticSelf).
func selfMockBuild(cmd *cobra.Command) (container.MockBuild, error) {
	exe, err := os.Executable()
	if err != nil {
		return container.MockBuild{}, nil
	}
	if exe, err = staticSelf(cmd.Context(), exe, cmd.OutOrStdout()); err != nil {
		return container.MockBuild{}, fmt.Errorf("container target: the mock backends run in an image FROM scratch built from a static gwdiag, and %w; give --mock-image, or build gwdiag with CGO_ENABLED=0", err)
	}
	return container.MockBuild{Binary: exe, Args: mockBackendArgs}, nil
}

// selfNodeBinaries fills what the local node packs its images from, when
// not set: the mocks from this very executable, the proxy from the refproxy
// beside it (make build puts both in .bin).
func selfNodeBinaries(o *steps.Options) {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	if o.Cluster.MockBinary == "" {
		o.Cluster.MockBinary, o.Cluster.MockArgs = exe, mockBackendArgs
	}
	if o.Cluster.RefproxyBinary == "" {
		if p := filepath.Join(filepath.Dir(exe), "refproxy"); fileExists(p) {
			o.Cluster.RefproxyBinary = p
		}
	}
}

// refproxyFound reports whether the local node will find its refproxy.
func refproxyFound(p string) bool {
	if p == "" {
		_, err := exec.LookPath("refproxy")
		return err == nil
	}
	return fileExists(p)
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// failedError makes the process exit 1 when scenarios failed.
type failedError struct{ msg string }

func (e failedError) Error() string { return e.msg }

// ExitCode implements cli/internal/exitcode's coder.
func (failedError) ExitCode() int { return 1 }

// incompleteError makes the process exit 3 when the suite's own
// environment kept scenarios from running and none failed: the gate does
// not pass, and CI tells it from a failing proxy (1) and from a usage
// error (2).
type incompleteError struct{ msg string }

func (e incompleteError) Error() string { return e.msg }

// ExitCode implements cli/internal/exitcode's coder.
func (incompleteError) ExitCode() int { return exitIncomplete }

// exitIncomplete is the exit status of a run the suite's environment kept
// from completing, with no scenario failed.
const exitIncomplete = 3

func newRunCommand() *cobra.Command {
	var (
		configPath string
		flags      optionFlags
		list       string
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the conformance suite against a proxy",
		Example: `  # The reference proxy, in process (what make conformance runs)
  gwdiag conformance run --target inprocess --report conformance-report.yaml

  # Any standalone proxy binary; {config} is the config file the suite writes
  gwdiag conformance run --target process --proxy-cmd 'refproxy -f {config}'

  # The same with the config laid out as the reference's current docs write it
  gwdiag conformance run --target process --proxy-cmd 'refproxy -f {config}' --config-style gateways

  # A proxy shipped as an image (make image builds gwdiag/refproxy:dev)
  gwdiag conformance run --target container --image gwdiag/refproxy:dev --pull never

  # The cluster profile on a single-node cluster this machine starts (root): the reference
  # controller deploys refproxy (.bin/refproxy beside gwdiag) in pods, traffic goes through port-forwards
  gwdiag conformance run --target cluster --cluster local-node

  # The same on a kind cluster (Docker and a pullable kind node image; cluster.kind in -c for
  # its name, node image, config and keep): the images are loaded with kind load image-archive
  gwdiag conformance run --target cluster --cluster kind

  # Condition status only, on a local API server with the reference controller
  gwdiag conformance run --target cluster --cluster local

  # Condition status on a cluster (any kubeconfig; the implementation's GatewayClass)
  gwdiag conformance run --target cluster --kubeconfig ~/.kube/config --gateway-class agentgateway

  # Global limits against a rate-limit service of your own (domain gwdiag-conformance)
  gwdiag conformance run --target process --proxy-cmd 'myproxy -c {config}' --ratelimit-service 10.0.0.5:8081

  # One feature, one scenario
  gwdiag conformance run --tags @request-limits --run-scenario 'The window resets with no manual action'

  # The scenarios a selection picks, by name, without starting the target
  gwdiag conformance run --list --tags @request-limits`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if list != "" {
				return listScenarios(cmd, configPath, &flags, list)
			}
			o, err := runOptions(cmd, configPath, &flags)
			if err != nil {
				return err
			}
			if o.ReportDir != "" {
				// Made first: the JUnit and Cucumber files may go in it.
				if err := os.MkdirAll(o.ReportDir, 0o755); err != nil {
					return fmt.Errorf("--report-dir: %w", err)
				}
			}
			rep, err := steps.Run(cmd.Context(), o)
			if rep != nil && o.ReportDir != "" {
				// Written whatever ended the run, an interruption included.
				path, werr := reportview.WriteSubmission(o.ReportDir, rep, commandLine(cmd.CommandPath(), cmd.Flags()))
				if werr != nil {
					return errors.Join(err, werr)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "report: %s (and README.md beside it)\n", path)
			}
			if err != nil {
				return err
			}
			if rep.Interrupted != nil {
				// Exit 130 or 143, as shells do: CI tells a cancel from a
				// failure. The progress output has said what ran.
				if sig, ok := interrupt.Of(cmd.Context()); ok {
					return sig
				}
				return fmt.Errorf("run %s", rep.Interrupted.Signal)
			}
			if rep.Failed() {
				c := rep.Summary
				msg := fmt.Sprintf("%d of %d scenarios failed", c.Failed, c.Passed+c.Failed+c.Skipped+c.Unsupported+c.NotRun+c.ExpectedFailures+c.Flaky+c.Stale)
				if c.Flaky > 0 {
					msg += fmt.Sprintf(", %d flaky", c.Flaky)
				}
				if c.Stale > 0 {
					msg += fmt.Sprintf(", %d passed against the baseline (stale)", c.Stale)
				}
				return failedError{msg}
			}
			if rep.Incomplete != nil {
				msg := fmt.Sprintf("run incomplete: %d scenarios not run for want of something of this machine; none failed", rep.Incomplete.NotRun)
				for _, m := range rep.Incomplete.Missing {
					msg += "\n  " + m.Reason
				}
				return incompleteError{msg}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&configPath, "config", "c", "", "options file (YAML, the fields of steps.Options; docs/options.md); flags override it")
	f.StringVar(&list, "list", "", "print the scenarios the run would run (by --tags, --run-scenario, --skip-scenario and the target's profiles), one a line, or as a JSON array with --list=json, and exit without starting the target")
	f.Lookup("list").NoOptDefVal = "text"
	flags.add(f)
	return cmd
}

// listScenarios prints the scenarios a run's selection picks, one a line
// (feature, core or extended, name, the Examples row of an outline), or
// as JSON, as steps.List gives them: the names --run-scenario takes.
func listScenarios(cmd *cobra.Command, configPath string, flags *optionFlags, format string) error {
	if format != "text" && format != "json" {
		return exitcode.Usagef("--list=%s: want text or json", format)
	}
	o, err := loadOptions(cmd, configPath, flags)
	if err != nil {
		return err
	}
	scenarios, err := steps.List(o)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(scenarios)
	}
	for _, s := range scenarios {
		level := "core"
		if s.Extended {
			level = "extended"
		}
		name := s.Name
		if s.Example > 0 {
			name += fmt.Sprintf(" [--run-example %d]", s.Example)
		}
		fmt.Fprintf(w, "%-34s %-8s %s\n", s.Feature, level, name)
	}
	fmt.Fprintf(w, "%d %s\n", len(scenarios), explain.Plural(len(scenarios), "scenario", "scenarios"))
	return nil
}

// loadOptions are the options file, then the flags set.
func loadOptions(cmd *cobra.Command, configPath string, flags *optionFlags) (steps.Options, error) {
	var o steps.Options
	if configPath != "" {
		var err error
		if o, err = steps.LoadOptions(configPath); err != nil {
			return o, err
		}
	}
	if err := flags.apply(&o, cmd.Flags()); err != nil {
		return o, exitcode.Usage(err)
	}
	return o, nil
}

// runOptions are the options of a run: the options file, then the flags
// set, then what this gwdiag supplies itself (the mock image built from
// it, the local node's binaries beside it), validated.
func runOptions(cmd *cobra.Command, configPath string, flags *optionFlags) (steps.Options, error) {
	o, err := loadOptions(cmd, configPath, flags)
	if err != nil {
		return o, err
	}
	if o.Target == "container" && o.Container.MockImage == "" {
		if o.Container.MockBuild, err = selfMockBuild(cmd); err != nil {
			return o, err
		}
	}
	if o.Cluster.LocalNode || o.Cluster.Kind != nil {
		selfNodeBinaries(&o)
		// Only once the proxy's binary is there: a missing one stops
		// the run at once, with no build first.
		if exe, err := os.Executable(); err == nil && o.Cluster.MockBinary == exe && refproxyFound(o.Cluster.RefproxyBinary) {
			if o.Cluster.MockBinary, err = staticSelf(cmd.Context(), exe, cmd.OutOrStdout()); err != nil {
				return o, fmt.Errorf("cluster target: the node's mock image is built FROM scratch from a static gwdiag, and %w; build gwdiag with CGO_ENABLED=0", err)
			}
		}
	}
	if err := o.Validate(); err != nil {
		return o, exitcode.Usage(err)
	}
	o.Output = cmd.OutOrStdout()
	o.CommandLine = commandLine(cmd.CommandPath(), cmd.Flags())
	o.Producer = steps.Producer{Version: versioncmd.Release(), Revision: versioncmd.Revision()}
	return o, nil
}

func newCheckCommand() *cobra.Command {
	var report, impl string
	cmd := &cobra.Command{
		Use:   "check TRACE.jsonl|TRACE.sse|-...",
		Short: "Check recorded traces with the suite's trace checks",
		Long: `Check runs the trace checks of the conformance suite (event order, required
events, eventEnd and eventStart rules, one request per trace, field shapes) on
traces recorded from a proxy: JSON Lines, for example from
'gwdiag trace --raw > trace.jsonl', or SSE captures of /debug/trace, for
example from 'curl -N -X POST .../debug/trace > trace.sse'; - reads stdin.
Conformance without running the proxy. A file may hold many traces (what
'gwdiag trace --follow --raw' and '>>' produce): they are split by requestId,
else at each requestStarted and after each requestFinished, and checked one
at a time as they are read, so a capture of any length checks in bounded
memory. Each failing trace is named by its index, request id and lines. A
file with lines that are not trace events fails, naming each such line. Unknown event types and fields of newer proxies are
accepted. Exits 1 when a trace fails.`,
		Example: `  gwdiag conformance check captured/*.jsonl --report check-report.yaml
  curl -sN -X POST http://127.0.0.1:15000/debug/trace | gwdiag conformance check -`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return exitcode.Usagef("check needs at least one trace file (JSON Lines)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			check := steps.NewRecordedCheck(steps.Implementation{Name: impl})
			traces := 0
			for _, path := range args {
				traces += checkFile(w, check, path, cmd.InOrStdin())
			}
			rep := check.Report()
			files := "1 file"
			if len(args) > 1 {
				files = fmt.Sprintf("%d files", len(args))
			}
			fmt.Fprintf(w, "%d traces in %s: %d passed, %d failed\n", traces, files, rep.Summary.Passed, rep.Summary.Failed)
			if report != "" {
				if err := rep.WriteFile(report); err != nil {
					return err
				}
			}
			if rep.Failed() {
				return failedError{fmt.Sprintf("%d of %d traces failed the checks", rep.Summary.Failed, rep.Summary.Passed+rep.Summary.Failed)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&report, "report", "", "write the ConformanceReport YAML here")
	cmd.Flags().StringVar(&impl, "implementation", "", "name of the proxy the traces come from, for the report")
	return cmd
}

// checkFile checks the traces of one capture ("-" is stdin) as they are
// read, printing each failing one at once, and returns how many it read. A
// capture that cannot be read, or has bad lines, fails as a whole besides.
func checkFile(w io.Writer, check *steps.RecordedCheck, path string, stdin io.Reader) int {
	name := sse.InputName(path)
	n := 0
	err := sse.ReadTracesFile(path, stdin, func(t sse.CapturedTrace) error {
		n++
		first, last := t.Lines()
		where := fmt.Sprintf("lines %d-%d", first, last)
		if t.ID != "" {
			where = "request " + t.ID + ", " + where
		}
		lines := make([]int, len(t.Events))
		for i, c := range t.Events {
			lines[i] = c.Line
		}
		printFailure(w, check.Add(steps.RecordedTrace{Name: fmt.Sprintf("%s trace %d (%s)", name, t.Index, where), Events: t.TraceEvents(), Lines: lines}))
		return nil
	})
	if err != nil {
		printFailure(w, check.Add(steps.RecordedTrace{Name: name, Err: err}))
	}
	return n
}

// printFailure prints a failing trace's report; nil prints nothing.
func printFailure(w io.Writer, s *steps.ScenarioReport) {
	if s == nil {
		return
	}
	fmt.Fprintf(w, "FAIL  %s\n", s.Name)
	for _, line := range strings.Split(s.Message, "\n") {
		fmt.Fprintf(w, "      %s\n", line)
	}
}
