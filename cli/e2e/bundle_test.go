package e2e

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestBundleThenReplay is issue 44's workflow as a vendor meets it, with
// the binaries only: a run against a proxy whose trace is wrong (the
// hostile proxy's "restart" case traces two requests in one) points from
// the failure to its bundle and the command that replays it; the bundle
// holds the evidence; replayed on the reference (the default) the scenario
// passes, exit 0, and the trace diff shows what the reference traces;
// replayed on the same proxy it fails the same way, exit 1.
func TestBundleThenReplay(t *testing.T) {
	t.Parallel()
	bin, err := hostileBin()
	if err != nil {
		t.Fatal(err)
	}
	const scenario = "A forwarded request traces every required event in order"
	dir := t.TempDir()
	bundles := filepath.Join(dir, "bundles")
	proxy := []string{"--target", "process", "--proxy-cmd", bin + " -case restart -f {config}"}
	r := gwdiagWithin(t, 2*time.Minute, nil, nil, append([]string{"conformance", "run", "--tags", "@trace-order", "--run-scenario", scenario,
		"--bundle-dir", bundles, "--report", filepath.Join(dir, "report.yaml")}, proxy...)...)
	b := filepath.Join(bundles, "trace-order", "a-forwarded-request-traces-every-required-event-in-order")
	if r.code != 1 || !strings.Contains(r.stdout, "evidence: "+b+" (gwdiag conformance replay "+b+")") {
		t.Fatalf("run: exit %d, want 1 and the evidence line for %s\nstdout:\n%s\nstderr:\n%s", r.code, b, r.stdout, r.stderr)
	}
	var files []string
	err = filepath.WalkDir(b, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(b, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	want := []string{"config_dump.json", "exchanges.har", "proxy-config.yaml", "proxy.log", "scenario.yaml", "trace_order.feature", "traces/01-trace.sse"}
	if err != nil || !slices.Equal(files, want) {
		t.Errorf("bundle files %q (%v), want %q", files, err, want)
	}

	good := gwdiagWithin(t, 2*time.Minute, nil, nil, "conformance", "replay", b)
	for _, line := range []string{
		"was:      failed on process (unnamed), at step \"the trace has the events requestStarted, routeSelection, policySelection, backendCallStart, backendCallResult, requestFinished\"",
		"          trace lacks policySelection, backendCallStart, backendCallResult; got [requestStarted, routeSelection, requestStarted, routeSelection, requestFinished]",
		"now:      passed on inprocess",
		"verdict:  differs: the scenario passes on inprocess; the failure was the proxy's, not the suite's",
		"trace 1:  traces/01-trace.sse: differs (- the bundle, + the replay)",
		"+ event 8 backendCallStart: unexpected",
		"- event 3 requestStarted: missing",
	} {
		if !strings.Contains(good.stdout, line) {
			t.Errorf("replay on the reference lacks %q", line)
		}
	}
	if good.code != 0 || t.Failed() {
		t.Fatalf("replay on the reference: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", good.code, good.stdout, good.stderr)
	}

	bad := gwdiagWithin(t, 2*time.Minute, nil, nil, append([]string{"conformance", "replay", b}, proxy...)...)
	for _, line := range []string{"now:      failed on process (unnamed)", "verdict:  the same (failed)", "trace 1:  traces/01-trace.sse: the same (normalised)"} {
		if !strings.Contains(bad.stdout, line) {
			t.Errorf("replay on the faulty proxy lacks %q", line)
		}
	}
	if bad.code != 1 || t.Failed() {
		t.Fatalf("replay on the faulty proxy: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", bad.code, bad.stdout, bad.stderr)
	}
}
