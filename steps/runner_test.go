package steps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/steps/interrupt"
	"github.com/gwdiag/gwdiag/steps/targets"
	"github.com/gwdiag/gwdiag/steps/targets/container"
)

func featureFS(files map[string]string) fstest.MapFS {
	fs := fstest.MapFS{}
	for name, body := range files {
		fs[name] = &fstest.MapFile{Data: []byte(body)}
	}
	return fs
}

func TestRunnerIsStrict(t *testing.T) {
	fs := featureFS(map[string]string{"strict.feature": `@admin
Feature: strictness
  @spec-4
  Scenario: a step nobody defined
    Given an echo backend "httpbin"
    And the moon is made of cheese
`})
	dir := t.TempDir()
	rep, err := Run(context.Background(), Options{Features: fs, Output: &strings.Builder{},
		Report: filepath.Join(dir, "r.yaml"), JUnit: filepath.Join(dir, "j.xml"), CucumberJSON: filepath.Join(dir, "c.json")})
	if err != nil {
		t.Fatal(err)
	}
	got := rep.Scenario("a step nobody defined")
	if len(got) != 1 || got[0].Result != Failed || !strings.Contains(got[0].Message, "undefined") || got[0].Step != "the moon is made of cheese" {
		t.Fatalf("undefined step: got %+v, want one failed scenario naming the undefined step", got)
	}
	// The written outputs say the same.
	var written ConformanceReport
	b, _ := os.ReadFile(filepath.Join(dir, "r.yaml"))
	if err := yaml.Unmarshal(b, &written); err != nil {
		t.Fatal(err)
	}
	if written.APIVersion != ReportAPIVersion || written.Kind != ReportKind || written.Summary.Failed != 1 ||
		written.Features[0].Name != FeatureAdmin || written.Features[0].Result != Failed {
		t.Errorf("report file: got %+v", written)
	}
	if j, _ := os.ReadFile(filepath.Join(dir, "j.xml")); !strings.Contains(string(j), "<failure") && !strings.Contains(string(j), "<error") {
		t.Errorf("JUnit output has no failure:\n%s", j)
	}
	if c, _ := os.ReadFile(filepath.Join(dir, "c.json")); !strings.Contains(string(c), `"status": "undefined"`) {
		t.Errorf("Cucumber JSON has no undefined step:\n%s", c)
	}
}

func TestRunnerSkipsExemptFeatures(t *testing.T) {
	fs := featureFS(map[string]string{"skip.feature": `@admin
Feature: skipping
  @spec-4
  Scenario: exempt one
    Given an echo backend "httpbin"
`})
	rep, err := Run(context.Background(), Options{Features: fs, ExemptFeatures: []FeatureName{FeatureAdmin}, Output: &strings.Builder{}})
	if err != nil {
		t.Fatal(err)
	}
	got := rep.Scenario("exempt one")
	if len(got) != 1 || got[0].Result != Skipped || !strings.Contains(got[0].Message, "feature admin is exempt") {
		t.Errorf("got %+v, want skipped as exempt", got)
	}
	if rep.Failed() {
		t.Errorf("skipped scenarios made the run fail: %+v", rep.Summary)
	}
}

// TestRunnerCoversTheTargetsProfiles: a run covers the profiles its target
// hosts, or those asked for; features of other profiles are not run or
// listed at all.
func TestRunnerCoversTheTargetsProfiles(t *testing.T) {
	fs := featureFS(map[string]string{"p.feature": `@admin
Feature: standalone
  @spec-4
  Scenario: standalone one
    Given an echo backend "httpbin"
`, "c.feature": `@condition-status
Feature: cluster
  @spec-3
  Scenario: cluster one
    Given an echo backend "httpbin"
`})
	rep, err := Run(context.Background(), Options{Features: fs, Output: &strings.Builder{}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Profiles) != 1 || rep.Profiles[0].Name != ProfileStandalone || rep.Profiles[0].Core.Passed != 1 {
		t.Errorf("profiles of an inprocess run: got %+v, want standalone with 1 core pass", rep.Profiles)
	}
	for _, f := range rep.Features {
		if f.Name == FeatureConditionStatus {
			t.Errorf("a cluster feature is listed in a standalone run: %+v", f)
		}
	}
	if _, err := Run(context.Background(), Options{Features: fs, Profiles: []ConformanceProfileName{ProfileCluster}, Output: &strings.Builder{}}); err == nil ||
		!strings.Contains(err.Error(), "hosts none of the profiles") {
		t.Errorf("cluster profile on the inprocess target: got %v, want an error", err)
	}
}

// TestRunnerRefusesUnknownFeatures: a typo in a claim is an error naming it.
func TestRunnerRefusesUnknownFeatures(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"unknown claim", Options{SupportedFeatures: []FeatureName{"trace-severty"}}, `supportedFeatures: unknown feature "trace-severty"`},
		{"core claim", Options{SupportedFeatures: []FeatureName{FeatureTraceOrder}}, `"trace-order" is a core feature`},
		{"unknown exemption", Options{ExemptFeatures: []FeatureName{"nope"}}, `exemptFeatures: unknown feature "nope"`},
		{"unknown profile", Options{Profiles: []ConformanceProfileName{"mesh"}}, `unknown profile "mesh"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.Output = &strings.Builder{}
			if _, err := Run(context.Background(), tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func TestLoadOptions(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "o.yaml")
	os.WriteFile(path, []byte(`target: process
proxyCommand: refproxy -f {config}
supportedFeatures: [trace-ready-comment]
timeouts: {trace: 2s, request: 1500ms}
`), 0o644)
	o, err := LoadOptions(path)
	if err != nil {
		t.Fatal(err)
	}
	o = o.withDefaults()
	if o.Target != "process" || o.ProxyCommand != "refproxy -f {config}" || !o.claims(FeatureTraceReadyComment) ||
		o.Timeouts.Trace != Duration(2*time.Second) || o.Timeouts.Request != Duration(1500*time.Millisecond) || o.Timeouts.ReadyGrace != Duration(300*time.Millisecond) {
		t.Errorf("got %+v", o)
	}
	// The bounds on what is read from the proxy: set ones kept, the rest
	// the defaults.
	os.WriteFile(path, []byte("limits: {eventBytes: 65536, frameTime: 2s}\n"), 0o644)
	if o, err = LoadOptions(path); err != nil {
		t.Fatal(err)
	}
	want := sse.DefaultLimits()
	want.EventBytes, want.FrameTime = 65536, Duration(2*time.Second)
	if got := o.withDefaults().Limits; got != want {
		t.Errorf("limits: got %+v, want %+v", got, want)
	}
	os.WriteFile(path, []byte("limits: {eventSize: 1}\n"), 0o644)
	if _, err := LoadOptions(path); err == nil || !strings.Contains(err.Error(), "eventSize") {
		t.Errorf("misspelt limit: got %v, want an error naming the field", err)
	}
	os.WriteFile(path, []byte("timeouts: {trace: soon}\n"), 0o644)
	if _, err := LoadOptions(path); err == nil || !strings.Contains(err.Error(), `duration "soon"`) {
		t.Errorf("bad duration: got %v, want an error naming the value", err)
	}
	// A bound below zero would be none: an HTTP client without a
	// timeout, a concurrency godog reads as one.
	for body, want := range map[string]string{
		"timeouts: {request: -1s}\n": "timeouts.request (--request-timeout) -1s: want a positive bound",
		"concurrency: -3\n":          "concurrency (--concurrency) -3: want a positive bound",
	} {
		os.WriteFile(path, []byte(body), 0o644)
		if o, err = LoadOptions(path); err != nil {
			t.Fatal(err)
		}
		if err := o.Validate(); err == nil || err.Error() != want {
			t.Errorf("%q: got %v, want %q", body, err, want)
		}
	}
}

// TestLoadContainerOptions: the container target's options load from the
// options file, with the example the docs point at.
func TestLoadContainerOptions(t *testing.T) {
	o, err := LoadOptions("testdata/container-options.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := o.Container
	if o.Target != "container" || c.Image != "gwdiag/refproxy:dev" || c.ConfigPath != "/etc/proxy/config.yaml" || c.AdminPort != 15000 ||
		c.Env["RUST_LOG"] != "info" || c.Pull != container.PullNever || c.StartupTimeout != Duration(45*time.Second) {
		t.Errorf("got %+v", c)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	o.Container.Pull = "always"
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), `--pull "always"`) {
		t.Errorf("Validate with pull always: got %v, want an error naming it", err)
	}
}

// BenchmarkInProcessSuite measures a whole in-process run of every feature
// (target: under 15 s on 2 cores).
func BenchmarkInProcessSuite(b *testing.B) {
	for b.Loop() {
		rep, err := Run(context.Background(), Options{Output: &strings.Builder{}})
		if err != nil || rep.Failed() {
			b.Fatalf("run: %v, %+v", err, rep.Summary)
		}
	}
}

// interruptedStart is a target whose start a signal interrupts (a local
// node takes a minute to start): Start cancels the run's context as
// gwdiag's main does on SIGTERM, then fails as a cancelled start does.
type interruptedStart struct {
	cancel  context.CancelCauseFunc
	stopped bool
}

func (*interruptedStart) Name() string { return "slow" }
func (t *interruptedStart) Start(ctx context.Context) error {
	t.cancel(interrupt.Signal{Sig: syscall.SIGTERM})
	<-ctx.Done()
	return fmt.Errorf("slow target: start: %w", ctx.Err())
}
func (t *interruptedStart) Stop(context.Context) error { t.stopped = true; return nil }
func (*interruptedStart) Configure(context.Context, targets.Setup) (targets.Deployment, error) {
	return nil, errors.New("configured after a failed start")
}
func (*interruptedStart) Capabilities() []string {
	return []string{targets.CapabilityStandalone, targets.CapabilityDataPlane}
}

// TestRunInterruptedWhileStarting: a run interrupted before its target
// started runs no scenario and still reports, every scenario not started,
// the core interrupted, none failed; the output ends saying so.
func TestRunInterruptedWhileStarting(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	tgt := &interruptedStart{cancel: cancel}
	var out strings.Builder
	rep, err := Run(ctx, Options{TargetImpl: tgt, Output: &out})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	s, in := rep.Summary, rep.Interrupted
	if in == nil || in.Signal != "SIGTERM" || in.Ran != 0 || in.CutShort != 0 || s.NotRun == 0 || in.NotStarted != s.NotRun || s.Failed+s.Passed+s.Unsupported != 0 {
		t.Errorf("report: interrupted %+v, summary %+v; want SIGTERM, none ran, every scenario not started", in, s)
	}
	if c := rep.Profiles[0].Core.Result; c != Interrupted {
		t.Errorf("core result: got %q, want %q", c, Interrupted)
	}
	if tgt.stopped {
		t.Error("Stop was called on a target whose Start failed")
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if want := "run interrupted by SIGTERM after 0 scenarios"; !strings.HasPrefix(lines[len(lines)-1], want) {
		t.Errorf("last line: got %q, want it to start with %q", lines[len(lines)-1], want)
	}
}
