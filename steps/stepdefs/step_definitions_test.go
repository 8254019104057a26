package stepdefs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cucumber/godog"
)

// TestStepPanicIsAnError: a step whose code panics fails with the panic
// and where it happened, through the same path as a step's error (so that
// an interrupted run reports it not run), and the scenarios after it run.
func TestStepPanicIsAnError(t *testing.T) {
	ran := false
	var out bytes.Buffer
	status := godog.TestSuite{
		ScenarioInitializer: func(sc *godog.ScenarioContext) {
			step(sc, `^a step indexes an empty list$`, func(context.Context) error {
				empty := strings.Fields("")
				return errors.New(empty[0])
			})
			step(sc, `^a step runs$`, func(context.Context) error { ran = true; return nil })
		},
		Options: &godog.Options{Format: "cucumber", Output: &out, Strict: true, FeatureContents: []godog.Feature{{Name: "p.feature", Contents: []byte(
			"Feature: p\n  Scenario: panics\n    When a step indexes an empty list\n  Scenario: after\n    When a step runs\n")}}},
	}.Run()
	if status != 1 {
		t.Errorf("suite status %d, want 1 (a failed step)", status)
	}
	if !ran {
		t.Errorf("the scenario after the panic did not run")
	}
	for _, want := range []string{`"status": "failed"`, "suite defect: step panicked: runtime error: index out of range", "step_definitions_test.go"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("Cucumber JSON lacks %q:\n%.2000s", want, out.String())
		}
	}
}

// BenchmarkRegister is what registering every step costs a scenario:
// godog asks for the steps again for each one (Register), so this is paid
// once per scenario of a run. A suite of scenarios without steps, all
// steps registered for each; ns/scenario is the figure.
func BenchmarkRegister(b *testing.B) {
	const n = 20
	var feature strings.Builder
	feature.WriteString("Feature: r\n")
	for i := range n {
		fmt.Fprintf(&feature, "  Scenario: s%d\n", i)
	}
	for b.Loop() {
		var out bytes.Buffer
		status := godog.TestSuite{
			ScenarioInitializer: Register,
			Options: &godog.Options{Format: "progress", Output: &out,
				FeatureContents: []godog.Feature{{Name: "r.feature", Contents: []byte(feature.String())}}},
		}.Run()
		if status != 0 {
			b.Fatalf("suite status %d:\n%s", status, out.String())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/scenario")
}
