package conformance

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
	"github.com/gwdiag/gwdiag/features"
	"github.com/gwdiag/gwdiag/steps/bundle"
)

// replayScenario has a golden trace (golden/traces) and passes on the
// reference.
const replayScenario = "A forwarded request traces every required event in order"

// writeBundle writes a failure bundle of replayScenario whose trace is the
// golden one, as the SSE stream a proxy sends, with events 4 and 5 swapped
// when reordered: what a proxy that traces policySelection before
// routeSelection leaves.
func writeBundle(t *testing.T, reordered bool) string {
	t.Helper()
	feature, err := fs.ReadFile(features.FS, "trace_order.feature")
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile("../../../golden/traces/a-forwarded-request-traces-every-required-event-in-order.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(golden)), "\n")
	if reordered {
		lines[3], lines[4] = lines[4], lines[3]
	}
	var stream bytes.Buffer
	stream.WriteString(": ready\n\n")
	for _, l := range lines {
		stream.WriteString("data: " + l + "\n\n")
	}
	dir := bundle.Dir(t.TempDir(), "trace-order", replayScenario, 0, 0)
	b := &bundle.Bundle{Feature: feature, Meta: bundle.Meta{Scenario: replayScenario, Feature: "trace-order", FeatureFile: "trace_order.feature",
		Result: "failed", FailedStep: "the trace events follow the order of the spec", Message: "order: event 4: policySelection out of order", Target: "process"},
		Exchanges: []bundle.Exchange{{Method: "POST", URL: "http://127.0.0.1:15000/debug/trace", Status: 200, ResponseBody: stream.Bytes()}}}
	if err := bundle.Write(dir, b, noRedaction{}); err != nil {
		t.Fatal(err)
	}
	return dir
}

type noRedaction struct{}

func (noRedaction) Header(_, v string) string { return v }
func (noRedaction) Text(s string) string      { return s }
func (noRedaction) Capture(b []byte) []byte   { return b }
func (noRedaction) Config(b []byte) []byte    { return b }

// TestReplayCommand: `conformance replay BUNDLE` runs the bundle's
// scenario on the reference in process and says the failure was the
// proxy's, showing the trace diff where the bundled trace strays; a bundle
// whose trace is the reference's shows the same trace.
func TestReplayCommand(t *testing.T) {
	out, err := run(t, "replay", writeBundle(t, true))
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	for _, want := range []string{"scenario: " + replayScenario, "was:      failed on process", "now:      passed on inprocess",
		"verdict:  differs: the scenario passes on inprocess; the failure was the proxy's, not the suite's",
		"trace 1:  traces/01-trace.sse: differs", "routeSelection"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, err = run(t, "replay", writeBundle(t, false))
	if err != nil || !strings.Contains(out, "trace 1:  traces/01-trace.sse: the same (normalised)") {
		t.Errorf("replay of a bundle holding the reference's trace: %v, want the same trace:\n%s", err, out)
	}
}

// TestReplayUsage: no bundle, two, or a folder that is none: usage errors
// (exit 2) that say what is wrong.
func TestReplayUsage(t *testing.T) {
	empty := t.TempDir()
	for _, args := range [][]string{{"replay"}, {"replay", "a", "b"}, {"replay", filepath.Join(empty, "nope")}} {
		_, err := run(t, args...)
		if exitcode.Code(err) != 2 {
			t.Errorf("%v: exit %d (%v), want 2", args, exitcode.Code(err), err)
		}
	}
	_, err := run(t, "replay", empty)
	if err == nil || !strings.Contains(err.Error(), "not a gwdiag failure bundle") {
		t.Errorf("replay of an empty folder: %v, want it named no bundle", err)
	}
}
