// Package conformance provides the `gwdiag conformance` command: run the suite
// against a target (`run`) and check recorded traces (`check`).
package conformance

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/cli/admin"
	"github.com/gwdiag/gwdiag/cli/exitcode"
	"github.com/gwdiag/gwdiag/cli/versioncmd"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/steps"
	"github.com/gwdiag/gwdiag/steps/interrupt"
	"github.com/gwdiag/gwdiag/steps/mock"
	"github.com/gwdiag/gwdiag/steps/target/cluster"
	"github.com/gwdiag/gwdiag/steps/target/container"
	"github.com/gwdiag/gwdiag/steps/target/local"
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
	cmd.AddCommand(newRunCommand(), newCheckCommand(), newMockBackendCommand())
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

// selfMockBuild is the mock image build from this very executable.
func selfMockBuild() container.MockBuild {
	exe, err := os.Executable()
	if err != nil {
		return container.MockBuild{}
	}
	return container.MockBuild{Binary: exe, Args: mockBackendArgs}
}

// clusterModes are the values of --cluster.
var clusterModes = []string{"local", "local-node", "kind", "kubeconfig"}

// setClusterMode applies --cluster: local (an API server only), local-node
// (a node whose pods run), kind (a kind cluster whose pods run; the options
// file's cluster.kind settings stay), kubeconfig (an existing cluster).
func setClusterMode(o *steps.Options, mode string) error {
	kind := o.Cluster.Kind
	switch mode {
	case "local":
		o.Cluster.Local, o.Cluster.LocalNode, kind = true, false, nil
	case "local-node":
		o.Cluster.Local, o.Cluster.LocalNode, kind = false, true, nil
	case "kind":
		o.Cluster.Local, o.Cluster.LocalNode = false, false
		if kind == nil {
			kind = &cluster.KindOptions{}
		}
	case "kubeconfig":
		o.Cluster.Local, o.Cluster.LocalNode, kind = false, false, nil
	default:
		return exitcode.Usagef("--cluster %q: want %s", mode, strings.Join(clusterModes, ", "))
	}
	o.Cluster.Kind = kind
	return nil
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

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// failedError makes the process exit 1 when scenarios failed.
type failedError struct{ msg string }

func (e failedError) Error() string { return e.msg }

// ExitCode implements exitcode.Coder.
func (failedError) ExitCode() int { return 1 }

func newRunCommand() *cobra.Command {
	var (
		configPath string
		flags      steps.Options
		supported  []string
		exempt     []string
		profiles   []string
		reqTimeout time.Duration
		trTimeout  time.Duration
		limits     admin.LimitFlags
		envs       []string
		pull       string
		startup    time.Duration
		clusterArg string
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
  gwdiag conformance run --tags @request-limits --run-scenario 'The window resets with no manual action'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var o steps.Options
			if configPath != "" {
				var err error
				if o, err = steps.LoadOptions(configPath); err != nil {
					return err
				}
			}
			// Flags override the file only when set.
			set := cmd.Flags().Changed
			if set("target") {
				o.Target = flags.Target
			}
			if set("proxy-cmd") {
				o.ProxyCommand = flags.ProxyCommand
			}
			if set("ratelimit-service") {
				o.RateLimitService = flags.RateLimitService
			}
			if set("config-style") {
				o.ConfigStyle = flags.ConfigStyle
			}
			if set("implementation") {
				o.Implementation.Name = flags.Implementation.Name
			}
			if set("supported-features") {
				o.SupportedFeatures = names(supported)
			}
			if set("exempt-features") {
				o.ExemptFeatures = names(exempt)
			}
			if set("all-features") {
				o.AllFeatures = flags.AllFeatures
			}
			if set("profiles") {
				o.Profiles = nil
				for _, p := range profiles {
					o.Profiles = append(o.Profiles, steps.ConformanceProfileName(p))
				}
			}
			if set("skip-scenario") {
				o.SkipScenarios = flags.SkipScenarios
			}
			if set("run-scenario") {
				o.RunScenario = flags.RunScenario
			}
			if set("tags") {
				o.Tags = flags.Tags
			}
			if set("report") {
				o.Report = flags.Report
			}
			if set("junit") {
				o.JUnit = flags.JUnit
			}
			if set("cucumber-json") {
				o.CucumberJSON = flags.CucumberJSON
			}
			if set("concurrency") {
				o.Concurrency = flags.Concurrency
			}
			if set("request-timeout") {
				o.Timeouts.Request = steps.Duration(reqTimeout)
			}
			if set("trace-timeout") {
				o.Timeouts.Trace = steps.Duration(trTimeout)
			}
			if err := limits.Check(cmd.Flags()); err != nil {
				return exitcode.Usage(err)
			}
			limits.ApplySet(&o.Limits, set)
			if set("image") {
				o.Container.Image = flags.Container.Image
			}
			if set("config-path") {
				o.Container.ConfigPath = flags.Container.ConfigPath
			}
			if set("admin-port") {
				o.Container.AdminPort = flags.Container.AdminPort
			}
			if set("env") {
				o.Container.Env = map[string]string{}
				for _, kv := range envs {
					k, v, ok := strings.Cut(kv, "=")
					if !ok || k == "" {
						return exitcode.Usagef("--env %q: want K=V", kv)
					}
					o.Container.Env[k] = v
				}
			}
			if set("pull") {
				o.Container.Pull = container.PullPolicy(pull)
			}
			if set("mock-image") {
				o.Container.MockImage = flags.Container.MockImage
			}
			if set("startup-timeout") {
				o.Container.StartupTimeout = steps.Duration(startup)
			}
			if o.Container.MockImage == "" {
				o.Container.MockBuild = selfMockBuild()
			}
			if set("kubeconfig") {
				o.Cluster.Kubeconfig = flags.Cluster.Kubeconfig
			}
			if set("local-cluster") {
				o.Cluster.Local = flags.Cluster.Local
			}
			if set("cluster") {
				if err := setClusterMode(&o, clusterArg); err != nil {
					return err
				}
			}
			if set("data-plane") {
				o.Cluster.DataPlane = flags.Cluster.DataPlane
			}
			if set("refproxy-binary") {
				o.Cluster.RefproxyBinary = flags.Cluster.RefproxyBinary
			}
			if o.Cluster.LocalNode || o.Cluster.Kind != nil {
				selfNodeBinaries(&o)
			}
			if set("install-crds") {
				o.Cluster.InstallCRDs = flags.Cluster.InstallCRDs
			}
			if set("gateway-class") {
				o.Cluster.GatewayClassName = flags.Cluster.GatewayClassName
			}
			if err := o.Validate(); err != nil {
				return exitcode.Usage(err)
			}
			o.Output = cmd.OutOrStdout()
			o.Producer = steps.Producer{Version: versioncmd.Version, Revision: versioncmd.Revision()}
			rep, err := steps.Run(cmd.Context(), o)
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
				return failedError{fmt.Sprintf("%d of %d scenarios failed", rep.Summary.Failed,
					rep.Summary.Passed+rep.Summary.Failed+rep.Summary.Skipped+rep.Summary.Unsupported)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&configPath, "config", "c", "", "options file (YAML, the fields of steps.Options); flags override it")
	f.StringVar(&flags.Target, "target", "inprocess", "how the proxy is run: inprocess, process, container or cluster")
	f.StringVar(&flags.ProxyCommand, "proxy-cmd", "", "process target: command template; {config} is the config file, {admin} the admin address")
	f.StringVar((*string)(&flags.ConfigStyle), "config-style", string(local.StyleBinds), "process and container targets: how the config they write is laid out: binds (spec part 2.2) or gateways (gateways and routes, as the reference's current docs write it)")
	f.StringVar(&flags.RateLimitService, "ratelimit-service", "", "global-rate-limit scenarios: host:port of an Envoy-compatible rate-limit service the proxy reaches, with the domain gwdiag-conformance (default: the suite runs one on loopback)")
	f.StringVar(&flags.Implementation.Name, "implementation", "", "name of the proxy under test, for the report")
	f.StringSliceVar(&profiles, "profiles", nil, "profiles to run: standalone, cluster (default: every profile the target hosts)")
	f.StringSliceVar(&supported, "supported-features", nil, "extended features the proxy claims: failing one is a failure, not 'unsupported'")
	f.BoolVar(&flags.AllFeatures, "all-features", false, "claim every extended feature")
	f.StringSliceVar(&exempt, "exempt-features", nil, "features not to run (reported as skipped)")
	f.StringSliceVar(&flags.SkipScenarios, "skip-scenario", nil, "scenario names not to run")
	f.StringVar(&flags.RunScenario, "run-scenario", "", "run only the scenario of this name")
	f.StringVar(&flags.Tags, "tags", "", "godog tag expression, e.g. '@admin && ~@extended'")
	f.StringVar(&flags.Report, "report", "", "write the ConformanceReport YAML here")
	f.StringVar(&flags.JUnit, "junit", "", "write JUnit XML here")
	f.StringVar(&flags.CucumberJSON, "cucumber-json", "", "write Cucumber JSON here")
	f.IntVar(&flags.Concurrency, "concurrency", 4, "scenarios run at once")
	f.StringVar(&flags.Container.Image, "image", "", "container target: the proxy's image")
	f.StringVar(&flags.Container.ConfigPath, "config-path", container.DefaultConfigPath, "container target: where the image reads its standalone config")
	f.IntVar(&flags.Container.AdminPort, "admin-port", container.DefaultAdminPort, "container target: the admin server's port inside the container")
	f.StringArrayVar(&envs, "env", nil, "container target: K=V set in the proxy's container (repeatable)")
	f.StringVar(&pull, "pull", string(container.PullMissing), "container target: pull an image missing from the Docker host (missing) or never")
	f.StringVar(&flags.Container.MockImage, "mock-image", "", "container target: image serving the mock backends (default: built FROM scratch from this gwdiag)")
	f.DurationVar(&startup, "startup-timeout", container.DefaultStartupTimeout, "container target: bound on a scenario's containers getting ready")
	f.StringVar(&flags.Cluster.Kubeconfig, "kubeconfig", "", "cluster target: kubeconfig of an existing cluster (default $KUBECONFIG, then ~/.kube/config)")
	f.BoolVar(&flags.Cluster.Local, "local-cluster", false, "cluster target: start a local API server with the CRDs and the reference controller (the same as --cluster local)")
	f.StringVar(&clusterArg, "cluster", "", "cluster target: local (a local API server with the reference controller; conditions only), local-node (a single-node cluster on this machine, as root, with refproxy in pods: the whole cluster profile), kind (the same on a kind cluster; needs Docker and kind's node image) or kubeconfig (an existing cluster; the default)")
	f.BoolVar(&flags.Cluster.DataPlane, "data-plane", false, "cluster target, existing cluster: its proxy runs in pods the suite reaches through port-forwards (needs cluster.mockImage in the options file)")
	f.StringVar(&flags.Cluster.RefproxyBinary, "refproxy-binary", "", "cluster target, local-node and kind: the static refproxy its proxy image is packed from (default: refproxy beside gwdiag, then $PATH)")
	f.BoolVar(&flags.Cluster.InstallCRDs, "install-crds", false, "cluster target: install the Gateway API and policy CRDs into the existing cluster first")
	f.StringVar(&flags.Cluster.GatewayClassName, "gateway-class", "", "cluster target: GatewayClass of the scenarios' Gateways (default gwdiag)")
	f.DurationVar(&reqTimeout, "request-timeout", 10*time.Second, "bound on one HTTP request")
	f.DurationVar(&trTimeout, "trace-timeout", 5*time.Second, "bound on a trace completing after its request")
	limits.AddSuiteFlags(f)
	return cmd
}

func names(s []string) []steps.FeatureName {
	out := make([]steps.FeatureName, len(s))
	for i, v := range s {
		out[i] = steps.FeatureName(v)
	}
	return out
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
	name := path
	if path == "-" {
		name = "stdin"
	}
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
