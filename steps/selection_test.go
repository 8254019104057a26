package steps

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cucumber/godog"

	"github.com/gwdiag/gwdiag/features"
	"github.com/gwdiag/gwdiag/steps/targets"
)

// unstartable is a target that must not start: a selection error is found
// before it would.
type unstartable struct {
	t    *testing.T
	caps []string
}

func (unstartable) Name() string { return "unstartable" }
func (u unstartable) Start(context.Context) error {
	u.t.Error("the target started: the selection must be refused before")
	return errors.New("not started")
}
func (u unstartable) Configure(context.Context, targets.Setup) (targets.Deployment, error) {
	u.t.Error("a scenario was configured")
	return nil, errors.New("not configured")
}
func (unstartable) Stop(context.Context) error { return nil }
func (u unstartable) Capabilities() []string   { return u.caps }

// TestUsageRefusedBeforeTheTargetStarts: a selection that names nothing
// of the feature set or leaves nothing to run, profiles the target does
// not host, and outputs that cannot be written are usage errors (exit 2)
// said before the target starts, with what the features have instead.
// Before, a tag no scenario has ran nothing and passed, and a report in a
// missing folder failed only once every scenario had run.
func TestUsageRefusedBeforeTheTargetStarts(t *testing.T) {
	standalone := []string{targets.CapabilityStandalone, targets.CapabilityDataPlane}
	dir := t.TempDir()
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		o    Options
		want []string
	}{
		{"a tag no scenario has", Options{Tags: "@token-limits"},
			[]string{`--tags "@token-limits" selects no scenario: no scenario has the tag @token-limits; the features' tags are @admin `, " @token-overage ", "@spec-<part>"}},
		{"a tag one letter off", Options{Tags: "@token-overag && ~@extended"},
			[]string{`no scenario has the tag @token-overag (did you mean @token-overage?)`}},
		{"tags no scenario has together", Options{Tags: "@admin && @token-overage"},
			[]string{`--tags "@admin && @token-overage" selects no scenario: every tag it names is on some scenario, but no scenario has the combination`}},
		{"tags of another profile", Options{Tags: "@condition-status"},
			[]string{`--tags "@condition-status" selects 5 scenarios, all in the cluster profile; this run covers standalone`}},
		{"a scenario name cut short", Options{RunScenario: "The window resets with no manual actio"},
			[]string{`--run-scenario "The window resets with no manual actio": no scenario has this name (did you mean "The window resets with no manual action"?)`}},
		{"a part of one scenario's name", Options{RunScenario: "window RESETS"},
			[]string{`(did you mean "The window resets with no manual action"?)`}},
		{"a name like none", Options{RunScenario: "Something else entirely"},
			[]string{`--run-scenario "Something else entirely": no scenario has this name; gwdiag conformance run --list [--tags ...] shows the scenarios by name`}},
		{"a scenario the tags leave out", Options{Tags: "@admin", RunScenario: resetScenario},
			[]string{`--run-scenario "The window resets with no manual action": --tags "@admin" leaves it out (its tags: @request-limits @spec-3)`}},
		{"a scenario of another profile", Options{RunScenario: "Gateway and HTTPRoute report healthy conditions"},
			[]string{`--run-scenario "Gateway and HTTPRoute report healthy conditions" is in the cluster profile (condition_status.feature); this run covers standalone`}},
		{"a scenario run and skipped", Options{RunScenario: resetScenario, SkipScenarios: []string{resetScenario}},
			[]string{`--run-scenario "The window resets with no manual action" is also a --skip-scenario: nothing would run`}},
		{"an example line that is no row", Options{RunScenario: outlineScenario, RunExample: 50},
			[]string{`--run-example 50: scenario "` + outlineScenario + `" has no Examples row at that line; its rows are at lines 51, 52, 53`}},
		{"an example of a plain scenario", Options{RunScenario: resetScenario, RunExample: 3},
			[]string{`--run-example 3: scenario "The window resets with no manual action" has no Examples rows (it is not a Scenario Outline)`}},
		{"an example line without its scenario", Options{RunExample: 52},
			[]string{`--run-example 52 goes with --run-scenario`}},
		{"profiles the target does not host", Options{Profiles: []ConformanceProfileName{ProfileCluster}},
			[]string{`--profiles cluster: the unstartable target hosts none of the profiles asked for; it hosts standalone`}},
		{"a report in a folder that does not exist", Options{Report: filepath.Join(dir, "missing", "r.yaml")},
			[]string{`--report ` + filepath.Join(dir, "missing", "r.yaml") + `: the folder ` + filepath.Join(dir, "missing") + ` does not exist`}},
		{"JUnit to a folder", Options{JUnit: dir},
			[]string{`--junit ` + dir + ` is a folder: name the file to write`}},
		{"Cucumber JSON under a file", Options{CucumberJSON: filepath.Join(file, "c.json")},
			[]string{`--cucumber-json ` + filepath.Join(file, "c.json") + `: ` + file + ` is not a folder`}},
		{"bundles under a file", Options{BundleDir: filepath.Join(file, "bundles", "x")},
			[]string{`--bundle-dir ` + filepath.Join(file, "bundles", "x") + `: ` + file + ` is not a folder`}},
		{"a scenario to skip that does not exist", Options{SkipScenarios: []string{resetScenario, "The window resets without manual action"}},
			[]string{`--skip-scenario "The window resets without manual action": no scenario has this name (did you mean "The window resets with no manual action"?)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.o
			o.TargetImpl, o.Output, o.AllFeatures = unstartable{t, standalone}, io.Discard, true
			rep, err := Run(context.Background(), o)
			var sel *usageError
			if !errors.As(err, &sel) {
				t.Fatalf("got %v, want a selection error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q, want it to say %q", err, w)
				}
			}
			var coder interface{ ExitCode() int }
			if !errors.As(err, &coder) || coder.ExitCode() != 2 {
				t.Errorf("exit code: want 2, a usage error")
			}
			if rep != nil {
				t.Errorf("a report of a run that did not start: %+v", rep.Summary)
			}
		})
	}
}

// TestSelectionAcceptsWhatRuns: selections that pick scenarios, and
// outputs that can be written, pass the checks as they are.
func TestSelectionAcceptsWhatRuns(t *testing.T) {
	all, err := featurePickles(features.FS)
	if err != nil || len(all) < 100 {
		t.Fatalf("features: %d scenarios, %v", len(all), err)
	}
	for _, o := range []Options{
		{},
		{Tags: "@admin"},
		{Tags: "~@extended"},
		{Tags: "@request-limits,@token-overage && ~@extended"},
		{Tags: "@spec-3 && @request-limits"},
		{RunScenario: resetScenario},
		{Tags: "@request-limits", RunScenario: resetScenario},
		{RunScenario: outlineScenario, RunExample: 52},
		{SkipScenarios: []string{resetScenario}},
	} {
		if err := checkSelection(all, o, []ConformanceProfileName{ProfileStandalone}); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	dir := t.TempDir()
	o := Options{Report: filepath.Join(dir, "r.yaml"), JUnit: filepath.Join(dir, "j.xml"), CucumberJSON: filepath.Join(dir, "c.json"), BundleDir: filepath.Join(dir, "not", "yet")}
	if err := checkOutputs(o); err != nil {
		t.Errorf("outputs in a fresh folder: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("the check left %v in the folder", left)
	}
}

// TestTagsMatchIsGodogs: the check selects exactly the scenarios godog
// runs for the same tags, so it refuses only what would run nothing.
func TestTagsMatchIsGodogs(t *testing.T) {
	all, err := featurePickles(features.FS)
	if err != nil {
		t.Fatal(err)
	}
	for _, expr := range []string{
		"@admin",
		"~@extended",
		"@request-limits,@token-overage && ~@extended",
		"@spec-3 && @request-limits",
		"~@admin,~@extended && @spec-2.1",
		"@token-limits",
		tagsFor("", []ConformanceProfileName{ProfileStandalone}),
	} {
		var want []string
		for _, s := range all {
			if tagsMatch(expr, s.tagNames()) {
				want = append(want, fmt.Sprintf("%s %s", s.Uri, s.Name))
			}
		}
		var (
			mu  sync.Mutex
			got []string
		)
		godog.TestSuite{
			ScenarioInitializer: func(sc *godog.ScenarioContext) {
				sc.Before(func(ctx context.Context, p *godog.Scenario) (context.Context, error) {
					mu.Lock()
					got = append(got, fmt.Sprintf("%s %s", p.Uri, p.Name))
					mu.Unlock()
					return ctx, godog.ErrSkip
				})
			},
			Options: &godog.Options{Format: "progress", Output: io.Discard, Tags: expr, FS: features.FS, Paths: []string{"."}},
		}.Run()
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("tags %q: godog ran %d scenarios, the check selects %d\ngodog: %q\ncheck: %q", expr, len(got), len(want), got, want)
		}
	}
}

// TestOneScenarioAskedForIsOneLine: the scenarios --run-scenario leaves
// out are in the report and the summary's count, not a SKIP line each.
func TestOneScenarioAskedForIsOneLine(t *testing.T) {
	var out strings.Builder
	const name = "GET /logging tells the current level"
	rep, err := Run(context.Background(), Options{Target: "inprocess", RunScenario: name, Output: &out})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "PASS") || strings.HasPrefix(l, "SKIP") || strings.HasPrefix(l, "FAIL") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], name) {
		t.Errorf("progress lines: got %q, want the one scenario asked for", lines)
	}
	if rep.Summary.Passed != 1 || rep.Summary.Skipped == 0 || !strings.Contains(out.String(), fmt.Sprintf("1 passed, 0 failed, %d skipped", rep.Summary.Skipped)) {
		t.Errorf("summary: got %+v\n%s", rep.Summary, out.String())
	}
}

// TestFeaturesOfNothingToRun: a library run whose own features hold no
// scenario, or only scenarios of a profile the target does not host, is
// refused before the target starts rather than passing a run of nothing.
func TestFeaturesOfNothingToRun(t *testing.T) {
	for files, want := range map[string]string{
		"": "the features hold no scenario",
		"@condition-status\nFeature: cluster\n  @spec-3\n  Scenario: cluster one\n    Given an echo backend \"httpbin\"\n": "the features hold 1 scenario, all in the cluster profile; this run covers standalone",
	} {
		fs := featureFS(map[string]string{"notes.txt": "not a feature"})
		if files != "" {
			fs = featureFS(map[string]string{"c.feature": files})
		}
		_, err := Run(context.Background(), Options{Features: fs, TargetImpl: unstartable{t, []string{targets.CapabilityStandalone}}, Output: io.Discard})
		if err == nil || err.Error() != want {
			t.Errorf("got %v, want %q", err, want)
		}
	}
}

// TestBrokenFeatureNamedBeforeTheTargetStarts: a feature file that does
// not parse is named with its line before the target starts, not left to
// godog's "failed with no failed scenario".
func TestBrokenFeatureNamedBeforeTheTargetStarts(t *testing.T) {
	fs := featureFS(map[string]string{"broken.feature": "@admin\nFeature: broken\n  Scenario: one\n    Given an echo backend \"httpbin\"\n    this is not a step\n"})
	_, err := Run(context.Background(), Options{Features: fs, TargetImpl: unstartable{t, []string{targets.CapabilityStandalone}}, Output: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "reading the features: broken.feature: ") || !strings.Contains(err.Error(), "(5:") {
		t.Errorf("got %v, want the file and line named", err)
	}
}

// TestListIsWhatRunRuns: List names, without starting the target, the
// scenarios Run runs for the same selection; a selection Run refuses, it
// refuses the same way.
func TestListIsWhatRunRuns(t *testing.T) {
	standalone := unstartable{t, []string{targets.CapabilityStandalone, targets.CapabilityDataPlane}}
	listed, err := List(Options{TargetImpl: standalone, Tags: "@admin,@trace-order"})
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	var want []string
	for _, s := range listed {
		if s.Name == outlineScenario && s.Example > 0 && s.Profile == ProfileStandalone && !s.Extended {
			rows++
		}
		name := s.Name
		if s.Example > 0 {
			name += fmt.Sprintf(" [example at line %d]", s.Example)
		}
		want = append(want, fmt.Sprintf("%-30s %s", s.Feature, name))
	}
	if rows != 3 {
		t.Errorf("the outline's rows: got %d, want 3 listed, each with its line: %q", rows, want)
	}
	// What ran is the progress view's lines: "PASS        <feature> <name> (took)".
	var out strings.Builder
	if _, err := Run(context.Background(), Options{Target: "inprocess", Tags: "@admin,@trace-order", AllFeatures: true, Output: &out}); err != nil {
		t.Fatal(err)
	}
	var ran []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "PASS ") || strings.HasPrefix(l, "FAIL ") {
			l = strings.TrimSpace(l[len("PASS        "):])
			ran = append(ran, l[:strings.LastIndex(l, " (")])
		}
	}
	slices.Sort(want)
	slices.Sort(ran)
	if !slices.Equal(want, ran) {
		t.Errorf("listed %d, ran %d:\nlisted %q\nran    %q", len(want), len(ran), want, ran)
	}
	one, err := List(Options{TargetImpl: standalone, RunScenario: outlineScenario, RunExample: 52})
	if err != nil || len(one) != 1 || one[0].Example != 52 || one[0].File != "trace_order.feature" {
		t.Errorf("one example: got %+v, %v", one, err)
	}
	cluster, err := List(Options{TargetImpl: unstartable{t, []string{targets.CapabilityCluster}}, Tags: "@condition-status"})
	if err != nil || len(cluster) != 5 || cluster[0].Profile != ProfileCluster {
		t.Errorf("cluster profile: got %+v, %v", cluster, err)
	}
	var usage *usageError
	if _, err := List(Options{TargetImpl: standalone, Tags: "@token-overag"}); !errors.As(err, &usage) {
		t.Errorf("a tag no scenario has: got %v, want Run's usage error", err)
	}
}

// TestReplayOfAnotherProfileSaysWhichTarget: the bundle of a cluster
// scenario, replayed on the in-process default, is a usage error that
// names the target the bundle ran on, before anything starts.
func TestReplayOfAnotherProfileSaysWhichTarget(t *testing.T) {
	dir := t.TempDir()
	src, err := fs.ReadFile(features.FS, "condition_status.feature")
	if err != nil {
		t.Fatal(err)
	}
	meta := "scenario: Gateway and HTTPRoute report healthy conditions\nfeature: condition-status\nfeatureFile: condition_status.feature\nresult: failed\nmessage: x\ntarget: cluster\n"
	if err := os.WriteFile(filepath.Join(dir, "scenario.yaml"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "condition_status.feature"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Replay(context.Background(), dir, Options{TargetImpl: unstartable{t, []string{targets.CapabilityStandalone}}, Output: io.Discard})
	want := `replay: "Gateway and HTTPRoute report healthy conditions" is a scenario of condition-status, a feature of the cluster profile, which the unstartable target does not host; the bundle's run was on the cluster target: replay it with --target cluster and that target's flags`
	var usage *usageError
	if !errors.As(err, &usage) || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

// TestScenarioAskedForAndSkippedSaysWhy: a scenario asked for by name that
// the run then skips says why, not that its name may be wrong (it was
// checked before the start).
func TestScenarioAskedForAndSkippedSaysWhy(t *testing.T) {
	const name = "GET /logging tells the current level"
	_, err := Run(context.Background(), Options{Target: "inprocess", RunScenario: name, ExemptFeatures: []FeatureName{FeatureAdmin}, Output: io.Discard})
	if want := `scenario "` + name + `" did not run: feature admin is exempt`; err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}
