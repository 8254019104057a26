package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
	"github.com/gwdiag/gwdiag/cli/internal/versioncmd"
	"github.com/gwdiag/gwdiag/features"
	"github.com/gwdiag/gwdiag/steps"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// realTraces, relative to testdata, holds traces the real proxy and its
// docs produced; its README names their sources.
const realTraces = "../../../../golden/trace/sse/testdata/agentgateway/"

// TestCheckStdin: `check -` reads the trace from stdin, JSON Lines or SSE.
func TestCheckStdin(t *testing.T) {
	capture, err := os.ReadFile(filepath.Join("testdata", realTraces, "k8s-latest.DERIVED-sse-framing.sse"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetIn(bytes.NewReader(capture))
	cmd.SetArgs([]string{"check", "-"})
	if err := cmd.Execute(); err != nil || !strings.Contains(out.String(), "1 passed, 0 failed") {
		t.Errorf("check - with an SSE capture on stdin: %v\n%s", err, out.String())
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name     string
		files    []string
		wantFail bool
		wantOut  []string
	}{
		{"1.2 standalone trace without middle snapshots", []string{"v1.2-standalone.jsonl"}, false, []string{"1 passed, 0 failed"}},
		{"1.2 cluster trace with all twelve events", []string{"v1.2-cluster-12-events.jsonl"}, false, []string{"1 passed, 0 failed"}},
		{"1.3 trace: phases, bodySnapshot, raw response, ipv6", []string{"v1.3-phases.jsonl"}, false, []string{"1 passed, 0 failed"}},
		{"gateway-phase policySelection after routeSelection", []string{"bad-gateway-phase-after-route.jsonl"}, true,
			[]string{"FAIL  testdata/bad-gateway-phase-after-route.jsonl", "policySelection (phase gateway) out of order"}},
		{"missing requestFinished", []string{"bad-no-finished.jsonl"}, true, []string{"missing requestFinished"}},
		{"one good, one bad", []string{"v1.3-phases.jsonl", "bad-no-finished.jsonl"}, true, []string{"1 passed, 1 failed"}},
		{"unreadable file", []string{"does-not-exist.jsonl"}, true, []string{"does-not-exist.jsonl"}},
		{"the real proxy's SSE capture (curl -N -X POST .../debug/trace)", []string{realTraces + "k8s-latest.DERIVED-sse-framing.sse"}, false, []string{"1 passed, 0 failed"}},
		{"the docs' trace with elided lines names them", []string{realTraces + "standalone-12x.docs.jsonl"}, true,
			[]string{"3 lines are not trace events", "standalone-12x.docs.jsonl:2: not a JSON trace event", "standalone-12x.docs.jsonl:7:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"check"}
			for _, f := range tt.files {
				args = append(args, filepath.Join("testdata", f))
			}
			out, err := run(t, args...)
			if (err != nil) != tt.wantFail {
				t.Fatalf("check %v: got error %v, want failure %v; output:\n%s", tt.files, err, tt.wantFail, out)
			}
			if err != nil {
				if ec, ok := err.(interface{ ExitCode() int }); !ok || ec.ExitCode() != 1 {
					t.Errorf("check failure: got %T %v, want exit code 1", err, err)
				}
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q; got:\n%s", w, out)
				}
			}
		})
	}
}

func TestCheckWritesReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.yaml")
	if _, err := run(t, "check", "--report", path, "--implementation", "agentgateway 1.3", "testdata/bad-no-finished.jsonl"); err == nil {
		t.Fatal("check of a bad trace: got success, want failure")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep steps.ConformanceReport
	if err := yaml.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.APIVersion != steps.ReportAPIVersion || rep.Kind != steps.ReportKind || rep.Implementation.Name != "agentgateway 1.3" {
		t.Errorf("report header: got %s %s %q", rep.APIVersion, rep.Kind, rep.Implementation.Name)
	}
	if rep.Summary.Failed != 1 || len(rep.Features) != 1 || !strings.Contains(rep.Features[0].Scenarios[0].Message, "missing requestFinished") {
		t.Errorf("report body: got %+v, want one failed trace saying why", rep)
	}
}

func TestCheckNeedsFiles(t *testing.T) {
	if _, err := run(t, "check"); err == nil || !strings.Contains(err.Error(), "at least one trace file") {
		t.Errorf("check with no files: got %v, want an error asking for a file", err)
	}
}

func TestRunProcessNeedsCommand(t *testing.T) {
	if _, err := run(t, "run", "--target", "process"); err == nil || !strings.Contains(err.Error(), "--proxy-cmd") {
		t.Errorf("run --target process without --proxy-cmd: got %v, want an error naming --proxy-cmd", err)
	}
}

func TestRunUnknownTarget(t *testing.T) {
	if _, err := run(t, "run", "--target", "spaceship"); err == nil || !strings.Contains(err.Error(), `unknown target "spaceship"`) {
		t.Errorf("run --target spaceship: got %v, want an unknown-target error", err)
	}
}

func TestRunOptionsFileAndFlags(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "options.yaml")
	report := filepath.Join(dir, "report.yaml")
	os.WriteFile(cfg, []byte("target: inprocess\ntags: '@admin'\nrunScenario: GET /logging tells the current level\nimplementation: {name: file-name}\n"), 0o644)
	out, err := run(t, "run", "--config", cfg, "--implementation", "flag-name", "--report", report)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(report)
	var rep steps.ConformanceReport
	if err := yaml.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Implementation.Name != "flag-name" {
		t.Errorf("implementation: got %q, want the flag to override the file", rep.Implementation.Name)
	}
	if rep.Summary.Passed != 1 {
		t.Errorf("passed: got %d, want only the one scenario asked for; report %+v", rep.Summary.Passed, rep.Summary)
	}
	if _, err := run(t, "run", "--tags", "@admin", "--run-scenario", "No such scenario"); err == nil || !strings.Contains(err.Error(), `--run-scenario "No such scenario": no scenario has this name`) || exitcode.Code(err) != 2 {
		t.Errorf("run of an unknown scenario: got %v (exit %d), want a usage error naming it", err, exitcode.Code(err))
	}
	// A tag no scenario has ran nothing and passed; now it is a usage
	// error, and no report claims a run.
	typo := filepath.Join(dir, "typo.yaml")
	if _, err := run(t, "run", "--tags", "@token-overag", "--report", typo); err == nil || !strings.Contains(err.Error(), "did you mean @token-overage?") || exitcode.Code(err) != 2 {
		t.Errorf("run of a tag no scenario has: got %v (exit %d), want a usage error with the tag it may mean", err, exitcode.Code(err))
	}
	if _, err := os.Stat(typo); err == nil {
		t.Errorf("a run refused before it started wrote a report")
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("targett: inprocess\n"), 0o644)
	if _, err := run(t, "run", "--config", bad); err == nil || !strings.Contains(err.Error(), "bad.yaml") {
		t.Errorf("run with an unknown option: got %v, want an error naming the file", err)
	}
}

func TestRunClusterFlags(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-kubeconfig")
	_, err := run(t, "run", "--target", "cluster", "--kubeconfig", missing)
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("run --target cluster --kubeconfig %s: got %v, want an error naming the kubeconfig", missing, err)
	}
	// The local node packs its images before it starts anything: a
	// refproxy that is not there stops the run at once, naming the option
	// it came from (flag or options file).
	noProxy := filepath.Join(dir, "no-refproxy")
	file := filepath.Join(dir, "local-node.yaml")
	os.WriteFile(file, []byte("target: cluster\ncluster:\n  localNode: true\n  refproxyBinary: "+noProxy+"\n"), 0o644)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"--cluster local-node", []string{"run", "--target", "cluster", "--cluster", "local-node", "--refproxy-binary", noProxy}, "cluster.refproxyBinary: stat " + noProxy},
		{"cluster.localNode in the options file", []string{"run", "-c", file}, "cluster.refproxyBinary: stat " + noProxy},
		{"unknown mode", []string{"run", "--target", "cluster", "--cluster", "minikube"}, `--cluster "minikube": want local, local-node, kind, kubeconfig`},
		{"dataPlane without a mock image", []string{"run", "--target", "cluster", "--kubeconfig", missing, "--data-plane"}, "cluster.dataPlane needs cluster.mockImage"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := run(t, tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%v: got %v, want an error with %q", tt.args, err, tt.want)
			}
		})
	}
}

// TestSelfNodeBinaries: --cluster local-node packs the mocks from this
// executable and the proxy from the refproxy beside it, unless set.
func TestSelfNodeBinaries(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	var o steps.Options
	selfNodeBinaries(&o)
	if o.Cluster.MockBinary != exe || strings.Join(o.Cluster.MockArgs, " ") != "conformance mockbackend" {
		t.Errorf("mock binary: got %q %v, want %q [conformance mockbackend]", o.Cluster.MockBinary, o.Cluster.MockArgs, exe)
	}
	beside := filepath.Join(filepath.Dir(exe), "refproxy")
	if want := map[bool]string{true: beside, false: ""}[fileExists(beside)]; o.Cluster.RefproxyBinary != want {
		t.Errorf("refproxy binary: got %q, want %q", o.Cluster.RefproxyBinary, want)
	}
	o = steps.Options{}
	o.Cluster.MockBinary, o.Cluster.RefproxyBinary = "/mine/mocks", "/mine/refproxy"
	selfNodeBinaries(&o)
	if o.Cluster.MockBinary != "/mine/mocks" || o.Cluster.RefproxyBinary != "/mine/refproxy" || o.Cluster.MockArgs != nil {
		t.Errorf("set binaries were overridden: %+v", o.Cluster)
	}
}

// TestRunFeatureFlags: --all-features and --supported-features reach the
// report's claims, --profiles narrows the run, and an unknown name is an
// error that says which.
func TestRunFeatureFlags(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, "report.yaml")
	out, err := run(t, "run", "--tags", "@admin", "--run-scenario", "GET /logging tells the current level",
		"--profiles", "standalone", "--all-features", "--exempt-features", "admin-error-status", "--report", report)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(report)
	var rep steps.ConformanceReport
	if err := yaml.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Claims.AllFeatures || len(rep.Claims.ExemptFeatures) != 1 || rep.Claims.ExemptFeatures[0] != steps.FeatureAdminErrorStatus {
		t.Errorf("claims: got %+v, want allFeatures and admin-error-status exempt", rep.Claims)
	}
	// One scenario ran; the rest of core was skipped by the filter, so the
	// run does not show core conformance: partial, not passed.
	if len(rep.Profiles) != 1 || rep.Profiles[0].Name != steps.ProfileStandalone || rep.Profiles[0].Core.Result != steps.Partial || rep.Profiles[0].Core.Passed != 1 {
		t.Errorf("profiles: got %+v, want standalone with core partial (1 passed, the rest skipped)", rep.Profiles)
	}
	// The report says what produced it and with which options.
	if p := rep.Producer; p.Version != versioncmd.Version || p.FeatureSet != features.Version || p.FeatureDigest != features.Digest() || len(p.FeatureDigest) != 12 {
		t.Errorf("producer: got %+v, want version %s, feature set %s, digest %s", p, versioncmd.Version, features.Version, features.Digest())
	}
	if o := rep.Options; o.Target != "inprocess" || o.Tags != "@admin" || o.RunScenario != "GET /logging tells the current level" ||
		len(o.Profiles) != 1 || o.Concurrency != 4 || o.RequestTimeout != "10s" || o.TraceTimeout != "5s" {
		t.Errorf("options: got %+v", o)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--supported-features", "trace-severty"}, `unknown feature "trace-severty"`},
		{[]string{"--profiles", "mesh"}, `unknown profile "mesh"`},
		{[]string{"--ratelimit-service", "localhost"}, `--ratelimit-service "localhost": want the gRPC host:port`},
		{[]string{"--target", "process", "--proxy-cmd", "p {config}", "--config-style", "yaml"}, `--config-style "yaml": want binds or gateways`},
		{[]string{"--config-style", "gateways"}, `--config-style gateways: the inprocess target writes no config file; the process and container targets do`},
	} {
		if _, err := run(t, append([]string{"run"}, tt.args...)...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("run %v: got %v, want an error with %q", tt.args, err, tt.want)
		}
	}
}

// TestCheckCaptureOfManyTraces: a capture of several traces without request
// ids (what `>>` appends) is split into its traces; each is checked, and a
// failing one is named by its index and lines.
func TestCheckCaptureOfManyTraces(t *testing.T) {
	tests := []struct {
		name     string
		capture  []byte
		wantFail bool
		wantOut  []string
	}{
		{"valid traces check clean", captureOf(t, "v1.2-standalone.jsonl", "v1.3-phases.jsonl", "v1.2-cluster-12-events.jsonl"), false,
			[]string{"3 traces in 1 file: 3 passed, 0 failed"}},
		{"one bad trace among good ones", captureOf(t, "v1.2-standalone.jsonl", "v1.3-phases.jsonl", "bad-gateway-phase-after-route.jsonl", "v1.2-standalone.jsonl"), true, []string{
			"4 traces in 1 file: 3 passed, 1 failed",
			"trace 3 (lines 24-38)",
			"policySelection (phase gateway) out of order",
			"(line ",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "capture.jsonl")
			if err := os.WriteFile(path, tt.capture, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := run(t, "check", path)
			if (err != nil) != tt.wantFail {
				t.Fatalf("got error %v, want failure %v; output:\n%s", err, tt.wantFail, out)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q; got:\n%s", w, out)
				}
			}
		})
	}
}

// captureOf is the testdata files named, one after the other.
func captureOf(t *testing.T, files ...string) []byte {
	t.Helper()
	var out []byte
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// TestRunList: --list prints the scenarios a run would run, one a line,
// with the Examples rows an outline's --run-example takes, and refuses a
// selection run would refuse; no target starts (the process target's
// command does not exist).
func TestRunList(t *testing.T) {
	out, err := run(t, "run", "--list", "--target", "process", "--proxy-cmd", "no-such-proxy -f {config}", "--tags", "@trace-order && ~@extended")
	if err != nil {
		t.Fatalf("--list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if last := lines[len(lines)-1]; last != fmt.Sprintf("%d scenarios", len(lines)-1) {
		t.Errorf("last line: got %q, want the count of the %d lines above", last, len(lines)-1)
	}
	for _, want := range []string{
		"trace-order                        core     A forwarded request traces every required event in order\n",
		"The trace reports the status the backend answered and the client received [--run-example 52]\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("--list lacks %q:\n%s", want, out)
		}
	}
	js, err := run(t, "run", "--list=json", "--run-scenario", "The trace reports the status the backend answered and the client received")
	var listed []steps.ListedScenario
	if err != nil || json.Unmarshal([]byte(js), &listed) != nil || len(listed) != 3 || listed[1].Example == 0 || listed[1].File != "trace_order.feature" || listed[1].Profile != steps.ProfileStandalone {
		t.Errorf("--list=json of an outline: got %v, %+v\n%s", err, listed, js)
	}
	if _, err := run(t, "run", "--list=yaml"); err == nil || exitcode.Code(err) != 2 {
		t.Errorf("--list=yaml: got %v, want a usage error", err)
	}
	if _, err := run(t, "run", "--list", "--tags", "@trace-ordr"); err == nil || !strings.Contains(err.Error(), "did you mean @trace-order?") || exitcode.Code(err) != 2 {
		t.Errorf("--list of a tag no scenario has: got %v (exit %d), want run's usage error", err, exitcode.Code(err))
	}
}
