package steps

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gwdiag/gwdiag/steps/targets"
	"github.com/gwdiag/gwdiag/steps/targets/inprocess"
)

// TestBaselineRoundTrip: a baseline written from the report of a faulty
// proxy's run turns its failures into expected failures (the run passes
// the gate, JUnit shows no failure); once the fault is fixed, the same
// baseline fails the run as stale, naming each scenario.
func TestBaselineRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := func(tgt targets.Target, baseline string) (*ConformanceReport, string) {
		t.Helper()
		var out strings.Builder
		o := Options{TargetImpl: tgt, Output: &out, AllFeatures: true, Tags: "@admin", Baseline: baseline,
			JUnit: filepath.Join(t.TempDir(), "junit.xml"), CucumberJSON: filepath.Join(dir, "cucumber.json")}
		rep, err := Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		junit, _ := os.ReadFile(o.JUnit)
		return rep, out.String() + "\n" + string(junit)
	}
	faulty := func() targets.Target {
		return &faultyTarget{inner: inprocess.New(), fault: faults["wrong admin answers"]}
	}
	first, _ := run(faulty(), "")
	if first.Summary.Failed < 2 {
		t.Fatalf("the faulty proxy failed %d scenarios, want several", first.Summary.Failed)
	}
	path := filepath.Join(dir, "baseline.yaml")
	if err := BaselineOf(first, "first.yaml").Write(path); err != nil {
		t.Fatal(err)
	}
	b, err := LoadBaseline(path)
	if err != nil || len(b.ExpectedFailures) != first.Summary.Failed {
		t.Fatalf("baseline: %v, %d entries, want %d", err, len(b.ExpectedFailures), first.Summary.Failed)
	}

	again, out := run(faulty(), path)
	if again.Failed() || again.Summary.ExpectedFailures != first.Summary.Failed || again.Summary.Failed != 0 {
		t.Errorf("with the baseline: summary %+v, want %d expected failures and the run not failed\n%s", again.Summary, first.Summary.Failed, out)
	}
	if strings.Contains(out, "<failure") || !strings.Contains(out, "XFAIL") {
		t.Errorf("with the baseline: want XFAIL lines and no JUnit failure:\n%s", out)
	}
	if strings.Contains(out, "warning: --baseline") {
		t.Errorf("a baseline written from a report has entries the features lack:\n%s", out)
	}
	for _, p := range again.Profiles {
		if p.Core.Result != ExpectedFailure {
			t.Errorf("profile %s: core %s, want %s", p.Name, p.Core.Result, ExpectedFailure)
		}
	}

	fixed, out := run(inprocess.New(), path)
	if !fixed.Failed() || fixed.Summary.Stale != first.Summary.Failed {
		t.Errorf("fixed proxy, old baseline: summary %+v, want %d stale and the run failed\n%s", fixed.Summary, first.Summary.Failed, out)
	}
	for _, e := range b.ExpectedFailures {
		if !strings.Contains(out, "STALE BASELINE: \""+e.Scenario+"\"") {
			t.Errorf("the progress output does not name the stale %q", e.Scenario)
		}
		// Cucumber JSON: failed, where godog wrote every step passed.
		steps := cucumberSteps(t, filepath.Join(dir, "cucumber.json"), e.Scenario, e.Example)
		if st := steps[len(steps)-1]; st.Result.Status != "failed" || !strings.Contains(st.Result.Error, "remove it from the baseline") {
			t.Errorf("cucumber: stale %q ends with %+v, want failed with the verdict", e.Scenario, st.Result)
		}
	}
}

// TestLoadBaselineRejects: a baseline that is not one, or has an entry
// without a name, is refused with the file and what is wrong.
func TestLoadBaselineRejects(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"wrong kind":    "apiVersion: gwdiag.dev/v1alpha1\nkind: ConformanceReport\nexpectedFailures: []\n",
		"unknown field": "kind: ConformanceBaseline\nexpectedFailure: []\n",
		"no scenario":   "kind: ConformanceBaseline\nexpectedFailures:\n- feature: admin\n",
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := LoadBaseline(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want an error naming the file", name, err)
		}
	}
}

// everyThird runs the fault on every third deployment, the faithful proxy
// on the others: a proxy that fails one time in three.
type everyThird struct {
	*faultyTarget
	n atomic.Int64
}

func (e *everyThird) Configure(ctx context.Context, s targets.Setup) (targets.Deployment, error) {
	if e.n.Add(1)%3 == 0 {
		return e.faultyTarget.Configure(ctx, s)
	}
	return e.inner.Configure(ctx, s)
}

// TestRepeatNamesFlakes: --repeat 3 on a proxy that fails one time in
// three reports the scenario flaky (passed 2 of 3), which fails the run,
// with the bundle of the failing attempt; nothing is retried silently.
func TestRepeatNamesFlakes(t *testing.T) {
	t.Parallel()
	tgt := &everyThird{faultyTarget: &faultyTarget{inner: inprocess.New(), fault: faults["reordered trace events"]}}
	var out strings.Builder
	o := Options{TargetImpl: tgt, Output: &out, AllFeatures: true, Tags: "@trace-order", RunScenario: bundledScenario, Repeat: 3, Concurrency: 1}
	plantCredentials(t, &o)
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	sc := rep.Scenario(bundledScenario)
	if len(sc) != 1 || sc[0].Result != Flaky || !strings.Contains(sc[0].Message, "passed 2 of 3 attempts; attempt 3 failed") {
		t.Fatalf("scenario %+v: want it flaky, passed 2 of 3\n%s", sc, out.String())
	}
	if !rep.Failed() || rep.Summary.Flaky != 1 || rep.Options.Repeat != 3 {
		t.Errorf("summary %+v, repeat %d: a flaky scenario fails the run", rep.Summary, rep.Options.Repeat)
	}
	if !strings.HasSuffix(sc[0].Bundle, "-attempt-3") {
		t.Errorf("bundle %q: want the failing attempt's", sc[0].Bundle)
	}
	if !strings.Contains(out.String(), "FLAKY: \""+bundledScenario+"\"") {
		t.Errorf("progress output does not name the flaky scenario:\n%s", out.String())
	}
	// Cucumber JSON has the last attempt, which passed: the scenario is
	// failed there with the verdict, and carries the bundle.
	steps := cucumberSteps(t, o.CucumberJSON, bundledScenario, 0)
	failed := slices.IndexFunc(steps, func(s cucumberStep) bool { return s.Result.Status == "failed" })
	if failed < 0 || !strings.Contains(steps[failed].Result.Error, "flaky: passed 2 of 3") ||
		len(steps[failed].Embeddings) != 1 || !strings.Contains(string(steps[failed].Embeddings[0].Data), "-attempt-3") {
		t.Errorf("cucumber steps %+v: want one failed as flaky, with the bundle of attempt 3", steps)
	}
}

type cucumberStep struct {
	Name   string `json:"name"`
	Result struct {
		Status string `json:"status"`
		Error  string `json:"error_message"`
	} `json:"result"`
	Embeddings []struct {
		MimeType string `json:"mime_type"`
		Data     []byte `json:"data"` // base64, as encoding/json decodes []byte
	} `json:"embeddings"`
}

// cucumberSteps returns the steps of the scenario element of that name
// (and line, when not 0) in a Cucumber JSON file.
func cucumberSteps(t *testing.T, path, name string, line int) []cucumberStep {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc []struct {
		Elements []struct {
			Name  string         `json:"name"`
			Line  int            `json:"line"`
			Steps []cucumberStep `json:"steps"`
		} `json:"elements"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, f := range doc {
		for _, e := range f.Elements {
			if e.Name == name && (line == 0 || e.Line == line) {
				return e.Steps
			}
		}
	}
	t.Fatalf("%s: no scenario %q (line %d)", path, name, line)
	return nil
}

// TestBaselineEntriesTheFeaturesLack: an entry no scenario matches (a
// scenario renamed since, a typo, a row that is gone) is said before the
// run, with the name it may mean; the run goes on.
func TestBaselineEntriesTheFeaturesLack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "baseline.yaml")
	b := &Baseline{APIVersion: ReportAPIVersion, Kind: BaselineKind, ExpectedFailures: []ExpectedFailing{
		{Feature: FeatureAdmin, Scenario: "GET /logging tells the current level"},
		{Feature: FeatureAdmin, Scenario: "GET /logging tells the curent level"},
		{Feature: FeatureAdmin, Scenario: "POST /logging sets a level filter", Example: 99},
		{Feature: "admin-extras", Scenario: "anything"},
	}}
	if err := b.Write(path); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep, err := Run(context.Background(), Options{Target: "inprocess", Output: &out, Tags: "@admin", RunScenario: "GET /logging tells the current level", Baseline: path})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"warning: --baseline " + path + `: admin has no scenario "GET /logging tells the curent level"; the entry matches nothing (did you mean "GET /logging tells the current level"?)`,
		"warning: --baseline " + path + `: "POST /logging sets a level filter" of admin has no Examples row at line 99; the entry matches nothing`,
		"warning: --baseline " + path + `: feature admin-extras has no scenario in these features; its entry "anything" matches nothing`,
	} {
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if n := strings.Count(out.String(), "warning: --baseline"); n != 3 {
		t.Errorf("%d warnings, want 3 (the first entry is a scenario):\n%s", n, out.String())
	}
	if rep.Summary.Stale != 1 {
		t.Errorf("the listed scenario passed: want it stale, got %+v", rep.Summary)
	}
}
