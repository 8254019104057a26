package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace/redact"
	"github.com/gwdiag/gwdiag/steps/bundle"
	"github.com/gwdiag/gwdiag/steps/stepdefs"
	"github.com/gwdiag/gwdiag/steps/targets/inprocess"
	"gopkg.in/yaml.v3"
)

// bundledScenario fails under the "reordered trace events" fault.
const bundledScenario = "A forwarded request traces every required event in order"

// TestFailureBundle: a scenario failed by a faulty proxy (its trace events
// out of order) leaves, under --bundle-dir, the evidence to fix it: its
// steps with the one that failed and why, the feature file, the config the
// suite wrote, the config dump at the failure, the proxy's output, every
// trace stream as it came and every HTTP exchange as HAR, with the
// credentials the run planted in every request redacted (Run fails if any
// file of the bundle holds one).
func TestFailureBundle(t *testing.T) {
	t.Parallel()
	o := Options{TargetImpl: &faultyTarget{inner: inprocess.New(), fault: faults["reordered trace events"]}, Output: &strings.Builder{},
		AllFeatures: true, Tags: "@trace-order", RunScenario: bundledScenario, CommandLine: "gwdiag conformance run --bundle-dir b"}
	plantCredentials(t, &o)
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	sc := rep.Scenario(bundledScenario)
	if len(sc) != 1 || sc[0].Result != Failed || sc[0].Bundle == "" {
		t.Fatalf("scenario report %+v: want it failed with a bundle", sc)
	}
	dir := sc[0].Bundle
	if want := filepath.Join(o.BundleDir, "trace-order", "a-forwarded-request-traces-every-required-event-in-order"); dir != want {
		t.Errorf("bundle at %s, want %s (feature, then the scenario's name)", dir, want)
	}
	b, traces, err := bundle.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := b.Meta
	if m.Scenario != bundledScenario || m.Feature != "trace-order" || m.Result != "failed" || !strings.Contains(m.Message, "routeSelection out of order") ||
		m.FailedStep == "" || !strings.HasSuffix(m.Target, "inprocess") || m.CommandLine == "" || m.FeatureSet == "" {
		t.Errorf("meta %+v: want the scenario, its failure, the target, the command line and the feature set", m)
	}
	statuses := map[string]int{}
	for _, s := range m.Steps {
		statuses[s.Status]++
	}
	if statuses["failed"] != 1 || statuses["passed"] == 0 || !slices.ContainsFunc(m.Steps, func(s bundle.Step) bool { return s.Text == m.FailedStep && s.Status == "failed" }) {
		t.Errorf("steps %+v: want the passed steps and the failed one, %q", m.Steps, m.FailedStep)
	}
	if !strings.Contains(string(b.Feature), "Scenario: "+bundledScenario) {
		t.Errorf("feature file %s lacks the scenario", m.FeatureFile)
	}
	if !strings.Contains(string(b.ProxyConfig), "binds") {
		t.Errorf("proxy config %q: want the standalone config the suite wrote", b.ProxyConfig)
	}
	var dump map[string]any
	if raw, err := os.ReadFile(filepath.Join(dir, bundle.ConfigDumpFile)); err != nil || json.Unmarshal(raw, &dump) != nil || len(dump) == 0 || m.ConfigDumpError != "" {
		t.Errorf("config dump: %v, %d keys, error %q: want the proxy's dump at the failure", err, len(dump), m.ConfigDumpError)
	}
	if len(traces) == 0 || !strings.Contains(string(traces[0].Data), "routeSelection") || !strings.Contains(string(traces[0].Data), "data: ") {
		t.Errorf("traces %d: want the trace stream as it came (SSE, with routeSelection)", len(traces))
	}
	har, err := readHAR(dir)
	if err != nil || har.Log.Version != "1.2" || len(har.Log.Entries) < 2 {
		t.Fatalf("HAR: %v, version %q, %d entries: want HAR 1.2 with the trace stream and the request", err, har.Log.Version, len(har.Log.Entries))
	}
	sawTrace, sawRequest, redacted := false, false, 0
	for _, e := range har.Log.Entries {
		sawTrace = sawTrace || strings.Contains(e.Request.URL, "/debug/trace")
		sawRequest = sawRequest || !strings.Contains(e.Request.URL, "/debug/trace") && e.Response.Status == 200
		for _, h := range e.Request.Headers {
			if strings.EqualFold(h.Name, "authorization") {
				if !redact.IsMarker(strings.TrimPrefix(h.Value, "Bearer ")) && !redact.HasMarker(h.Value) {
					t.Errorf("HAR: authorization %q is not redacted", h.Value)
				}
				redacted++
			}
		}
	}
	if !sawTrace || !sawRequest || redacted == 0 {
		t.Errorf("HAR: trace stream %v, data-plane request %v, redacted credentials %d: want all", sawTrace, sawRequest, redacted)
	}
	if _, err := os.Stat(filepath.Join(dir, bundle.ProxyLogFile)); err != nil {
		t.Errorf("proxy log: %v", err)
	}
}

// TestReplay: a failure bundle replayed against the faithful proxy passes,
// and its trace differs from the bundle's where the fault lies; replayed
// against the faulty proxy, it fails the same way, with the same trace.
func TestReplay(t *testing.T) {
	t.Parallel()
	faulty := func() *faultyTarget {
		return &faultyTarget{inner: inprocess.New(), fault: faults["reordered trace events"]}
	}
	o := Options{TargetImpl: faulty(), Output: &strings.Builder{}, AllFeatures: true, Tags: "@trace-order", RunScenario: bundledScenario}
	plantCredentials(t, &o)
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	dir := rep.Scenario(bundledScenario)[0].Bundle

	// Both plant credentials, as the bundled run did: the traces show
	// them redacted in both, each run with its own fingerprints.
	ro := Options{Output: &strings.Builder{}}
	plantCredentials(t, &ro)
	good, err := Replay(context.Background(), dir, ro)
	if err != nil {
		t.Fatal(err)
	}
	if good.Scenario.Result != Passed || good.Same() || good.Report.Target != "inprocess" {
		t.Errorf("replay on the reference: %s on %s, same %v; want passed, differing from the bundle", good.Scenario.Result, good.Report.Target, good.Same())
	}
	if len(good.Traces) != 1 || good.Traces[0].Diff == "" || !strings.Contains(good.Traces[0].Diff, "routeSelection") {
		t.Errorf("replay on the reference: traces %+v: want one, differing at routeSelection", good.Traces)
	}

	ro = Options{TargetImpl: faulty(), Output: &strings.Builder{}}
	plantCredentials(t, &ro)
	bad, err := Replay(context.Background(), dir, ro)
	if err != nil {
		t.Fatal(err)
	}
	if !bad.Same() || !strings.Contains(bad.Scenario.Message, "routeSelection out of order") || bad.Scenario.Bundle == "" {
		t.Errorf("replay on the faulty proxy: %s %q, bundle %q; want it failed the same way, with a bundle of its own", bad.Scenario.Result, bad.Scenario.Message, bad.Scenario.Bundle)
	}
	if len(bad.Traces) != 1 || bad.Traces[0].Diff != "" {
		t.Errorf("replay on the faulty proxy: want the same trace, got %+v", bad.Traces)
	}
	// What replay prints (the traces, their diff, the messages) holds no
	// credential either run planted.
	for _, r := range []*Replayed{good, bad} {
		if shown := fmt.Sprintf("%+v %+v %+v", r.Traces, r.Scenario, r.Bundle.Meta); strings.Contains(shown, stepdefs.PlantedPrefix) {
			t.Errorf("replay shows a planted credential: ...%s", shown[max(0, strings.Index(shown, stepdefs.PlantedPrefix)-80):][:160])
		}
	}
}

// TestJUnitCarriesTheBundle: the JUnit test case of a failed scenario
// carries its bundle's path, and as an attachment for CI pages.
func TestJUnitCarriesTheBundle(t *testing.T) {
	t.Parallel()
	o := Options{TargetImpl: &faultyTarget{inner: inprocess.New(), fault: faults["reordered trace events"]}, Output: &strings.Builder{},
		AllFeatures: true, Tags: "@trace-order", RunScenario: bundledScenario}
	plantCredentials(t, &o)
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	dir := rep.Scenario(bundledScenario)[0].Bundle
	junit, err := os.ReadFile(o.JUnit)
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	for _, want := range []string{"<failure", "<system-out>gwdiag failure bundle: " + dir, "[[ATTACHMENT|" + abs + "]]"} {
		if !strings.Contains(string(junit), want) {
			t.Errorf("JUnit lacks %q:\n%s", want, junit)
		}
	}
}

// checkReplays checks the bundle of every failed scenario of rep
// (checkBundle; proxyLog, when set, is text the proxy's output must hold)
// and replays the first (by name, then example line): on the faithful
// reference in process it passes, and on the faulty proxy (faulty, or the
// reference in process with the fault) it fails at the same step.
func checkReplays(t *testing.T, rep *ConformanceReport, f fault, proxyLog string, faulty func() *faultyTarget) {
	t.Helper()
	var first *ScenarioReport
	var b *bundle.Bundle
	dirs := map[string]string{}
	for _, ft := range rep.Features {
		for i, s := range ft.Scenarios {
			if s.Result != Failed {
				continue
			}
			// Every failed scenario, each example of an outline too,
			// leaves a bundle of its own.
			if s.Bundle == "" {
				t.Fatalf("%s: failed with no bundle", s.Name)
			}
			if other, ok := dirs[s.Bundle]; ok {
				t.Fatalf("%s and %s: one bundle folder %s", other, s.Name, s.Bundle)
			}
			dirs[s.Bundle] = s.Name
			sb := checkBundle(t, s, proxyLog)
			if sb != nil && (first == nil || s.Name < first.Name || s.Name == first.Name && sb.Meta.Example < b.Meta.Example) {
				first, b = &ft.Scenarios[i], sb
			}
		}
	}
	if first == nil {
		return
	}
	replay := func(tgt *faultyTarget) *Replayed {
		o := Options{Output: &strings.Builder{}, Timeouts: Timeouts{Request: Duration(3 * time.Second)}}
		if tgt != nil {
			o.TargetImpl = tgt
		}
		plantCredentials(t, &o)
		r, err := Replay(context.Background(), first.Bundle, o)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if good := replay(nil); good.Scenario.Result != Passed {
		t.Errorf("%s: replayed on the faithful reference: %s %q, want passed", first.Name, good.Scenario.Result, good.Scenario.Message)
	}
	if faulty == nil {
		faulty = func() *faultyTarget { return &faultyTarget{inner: inprocess.New(f.proxyOptions...), fault: f} }
	}
	bad := replay(faulty())
	if !bad.Same() || bad.Scenario.Step != b.Meta.FailedStep {
		t.Errorf("%s: replayed on the faulty proxy: %s at %q, want failed at %q as bundled", first.Name, bad.Scenario.Result, bad.Scenario.Step, b.Meta.FailedStep)
	}
}

// checkBundle reports, as errors of t, what the bundle of the failed
// scenario s lacks (bundleGaps), and returns the bundle (nil when it
// could not be read).
func checkBundle(t *testing.T, s ScenarioReport, proxyLog string) *bundle.Bundle {
	t.Helper()
	b, gaps := bundleGaps(s, proxyLog)
	for _, g := range gaps {
		t.Errorf("%s: %s", s.Name, g)
	}
	return b
}

// bundleGaps returns the bundle of the failed scenario s and what it lacks
// of the evidence issue 44 lists: the scenario, its steps with the one
// that failed, wanted and got (as the report says them); the run (target,
// gwdiag's version (catalogueProducer), the options, the feature set);
// the feature file; the config the suite wrote; the config dump at the
// failure, or why there is none; the proxy's output (holding proxyLog
// when set); every HTTP exchange as HAR 1.2, and a file for each trace
// stream among them.
func bundleGaps(s ScenarioReport, proxyLog string) (*bundle.Bundle, []string) {
	b, traces, err := bundle.Read(s.Bundle)
	if err != nil {
		return nil, []string{err.Error()}
	}
	var gaps []string
	gap := func(format string, a ...any) { gaps = append(gaps, fmt.Sprintf(format, a...)) }
	m := b.Meta
	if m.Scenario != s.Name || m.FailedStep != s.Step || m.Message != s.Message || m.Result != string(Failed) || m.Example != s.Example {
		gap("bundle says %q (example %d) %s at %q: %q; the report %s at %q: %q", m.Scenario, m.Example, m.Result, m.FailedStep, m.Message, s.Result, s.Step, s.Message)
	}
	if m.Target == "" || m.Gwdiag != catalogueProducer || m.Options == nil || m.FeatureSet == "" || m.Started.IsZero() || m.Duration == "" {
		gap("bundle's run: target %q, gwdiag %q, options %v, feature set %q, started %v, duration %q: want all", m.Target, m.Gwdiag, m.Options != nil, m.FeatureSet, m.Started, m.Duration)
	}
	failed := slices.IndexFunc(m.Steps, func(st bundle.Step) bool { return st.Status == "failed" })
	if failed < 0 || m.Steps[failed].Text != m.FailedStep || slices.ContainsFunc(m.Steps[failed+1:], func(st bundle.Step) bool { return st.Status != "skipped" }) {
		gap("bundle's steps %+v: want those before %q, it failed, the rest skipped", m.Steps, m.FailedStep)
	}
	if !strings.Contains(string(b.Feature), ": "+s.Name+"\n") {
		gap("bundle's feature file %q lacks the scenario", m.FeatureFile)
	}
	if len(b.ProxyConfig) == 0 {
		gap("bundle's proxy config %q is empty or missing", m.ProxyConfig)
	}
	var dump map[string]any
	if raw, err := os.ReadFile(filepath.Join(s.Bundle, bundle.ConfigDumpFile)); m.ConfigDumpError == "" && (err != nil || json.Unmarshal(raw, &dump) != nil || len(dump) == 0) {
		gap("bundle's config dump: %v, %d keys, and no error said: want the dump at the failure or why there is none", err, len(dump))
	}
	if log, err := os.ReadFile(filepath.Join(s.Bundle, bundle.ProxyLogFile)); err != nil || len(log) == 0 || !strings.Contains(string(log), proxyLog) {
		gap("bundle's proxy log: %v, %d bytes, want the proxy's output (with %q)", err, len(log), proxyLog)
	}
	if !strings.Contains(s.ProxyLogs, proxyLog) {
		gap("the report's proxyLogs %q lack %q", s.ProxyLogs, proxyLog)
	}
	har, err := readHAR(s.Bundle)
	if err != nil || har.Log.Version != "1.2" || len(har.Log.Entries) == 0 {
		gap("bundle's HAR: %v, version %q, %d entries: want HAR 1.2 with the scenario's exchanges", err, har.Log.Version, len(har.Log.Entries))
	}
	streams := 0
	for _, e := range har.Log.Entries {
		if strings.Contains(e.Request.URL, "/debug/trace") {
			streams++
		}
	}
	if len(traces) != streams {
		gap("bundle holds %d trace files for %d trace streams in its HAR", len(traces), streams)
	}
	return b, gaps
}

// harFile is what the bundles' tests read of exchanges.har.
type harFile struct {
	Log struct {
		Version string
		Entries []struct {
			Request struct {
				Method, URL string
				Headers     []struct{ Name, Value string }
			}
			Response struct {
				Status  int
				Content struct{ Text string }
			}
		}
	}
}

// readHAR reads the HAR of the bundle in dir: empty, never nil, with
// the error of a missing or malformed file.
func readHAR(dir string) (*harFile, error) {
	har := &harFile{}
	raw, err := os.ReadFile(filepath.Join(dir, bundle.ExchangesFile))
	if err != nil {
		return har, err
	}
	return har, json.Unmarshal(raw, har)
}

// TestBundleGapsFound: checkBundle, which the fault catalogue runs on
// every failed scenario of every target, finds a bundle that lacks any of
// the evidence: a complete bundle has no gap, and each copy of it with one
// piece taken out or changed has the gap that names it.
func TestBundleGapsFound(t *testing.T) {
	t.Parallel()
	o := Options{TargetImpl: &faultyTarget{inner: inprocess.New(), fault: faults["reordered trace events"]}, Output: &strings.Builder{},
		AllFeatures: true, Tags: "@trace-order", RunScenario: bundledScenario, Producer: Producer{Version: catalogueProducer}}
	plantCredentials(t, &o)
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	sc := rep.Scenario(bundledScenario)
	if len(sc) != 1 || sc[0].Bundle == "" {
		t.Fatalf("want one failed scenario with a bundle, got %+v", sc)
	}
	s := sc[0]
	if _, gaps := bundleGaps(s, ""); len(gaps) > 0 {
		t.Fatalf("the complete bundle has gaps: %q", gaps)
	}
	b, traces, err := bundle.Read(s.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, data string) func(dir string) error {
		return func(dir string) error { return os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644) }
	}
	writeMeta := func(change func(*bundle.Meta)) func(dir string) error {
		m := b.Meta
		m.Steps = slices.Clone(m.Steps)
		change(&m)
		raw, err := yaml.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return write(bundle.MetaFile, string(raw))
	}
	remove := func(name string) func(dir string) error {
		return func(dir string) error { return os.Remove(filepath.Join(dir, name)) }
	}
	for _, tc := range []struct {
		what   string
		change func(dir string) error
		want   string
	}{
		{"another message", writeMeta(func(m *bundle.Meta) { m.Message = "something else" }), "bundle says"},
		{"no gwdiag version", writeMeta(func(m *bundle.Meta) { m.Gwdiag = "" }), "bundle's run"},
		{"no failed step", writeMeta(func(m *bundle.Meta) { m.Steps = m.Steps[:len(m.Steps)-1] }), "bundle's steps"},
		{"another feature file", write(filepath.Base(b.Meta.FeatureFile), "Feature: x\n"), "feature file"},
		{"empty proxy config", write(filepath.Base(b.Meta.ProxyConfig), ""), "proxy config"},
		{"no config dump", remove(bundle.ConfigDumpFile), "config dump"},
		{"no proxy log", remove(bundle.ProxyLogFile), "proxy log"},
		{"no HAR", remove(bundle.ExchangesFile), "bundle's HAR"},
		{"HAR 1.1", write(bundle.ExchangesFile, `{"log":{"version":"1.1","entries":[{"request":{"url":"http://x/"}}]}}`), "bundle's HAR"},
		{"a trace stream without its file", write(bundle.ExchangesFile, `{"log":{"version":"1.2","entries":[`+strings.Repeat(`{"request":{"url":"http://x/debug/trace"}},`, len(traces)+1)+`{"request":{"url":"http://x/"}}]}}`), "trace files"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(s.Bundle)); err != nil {
				t.Fatal(err)
			}
			if err := tc.change(dir); err != nil {
				t.Fatal(err)
			}
			c := s
			c.Bundle = dir
			_, gaps := bundleGaps(c, "")
			if !slices.ContainsFunc(gaps, func(g string) bool { return strings.Contains(g, tc.want) }) {
				t.Errorf("gaps %q: want one with %q", gaps, tc.want)
			}
		})
	}
}
