package stepdefs

import (
	"bytes"
	"context"
	"errors"
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
