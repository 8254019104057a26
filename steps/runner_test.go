package steps

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"sigs.k8s.io/yaml"
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

func TestRunnerSkipsExemptAndClusterScenarios(t *testing.T) {
	fs := featureFS(map[string]string{"skip.feature": `@admin
Feature: skipping
  Scenario: exempt one
    Given an echo backend "httpbin"

  @cluster
  Scenario: cluster one
    Given an echo backend "httpbin"
`})
	tests := []struct {
		name     string
		exempt   []FeatureName
		scenario string
		want     string
	}{
		{"exempt feature", []FeatureName{FeatureAdmin}, "exempt one", "feature admin is exempt"},
		{"cluster scenario on inprocess", nil, "cluster one", "needs a cluster target"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := Run(context.Background(), Options{Features: fs, ExemptFeatures: tt.exempt, Output: &strings.Builder{}})
			if err != nil {
				t.Fatal(err)
			}
			got := rep.Scenario(tt.scenario)
			if len(got) != 1 || got[0].Result != Skipped || !strings.Contains(got[0].Message, tt.want) {
				t.Errorf("scenario %q: got %+v, want skipped with %q", tt.scenario, got, tt.want)
			}
			if rep.Failed() {
				t.Errorf("skipped scenarios made the run fail: %+v", rep.Summary)
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
	if o.Target != "process" || o.ProxyCommand != "refproxy -f {config}" || !o.supports(FeatureTraceReadyComment) ||
		o.Timeouts.Trace.Seconds() != 2 || o.Timeouts.Request.Milliseconds() != 1500 || o.Timeouts.ReadyGrace.Milliseconds() != 300 {
		t.Errorf("got %+v", o)
	}
	os.WriteFile(path, []byte("timeouts: {trace: soon}\n"), 0o644)
	if _, err := LoadOptions(path); err == nil || !strings.Contains(err.Error(), `duration "soon"`) {
		t.Errorf("bad duration: got %v, want an error naming the value", err)
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
