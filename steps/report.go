package steps

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"time"

	"gopkg.in/yaml.v3"
)

// ReportAPIVersion and ReportKind identify a ConformanceReport document.
const (
	ReportAPIVersion = "gwdiag.dev/v1alpha1"
	ReportKind       = "ConformanceReport"
)

// Result of one scenario or feature.
type Result string

// Results. A feature is failed when any scenario failed, unsupported when
// every scenario run was unsupported, skipped when none ran.
const (
	Passed      Result = "passed"
	Failed      Result = "failed"
	Skipped     Result = "skipped"
	Unsupported Result = "unsupported"
)

// ConformanceReport is the versioned result of a conformance run.
type ConformanceReport struct {
	APIVersion     string          `json:"apiVersion" yaml:"apiVersion"`
	Kind           string          `json:"kind" yaml:"kind"`
	Implementation Implementation  `json:"implementation" yaml:"implementation"`
	Target         string          `json:"target" yaml:"target"`
	Date           time.Time       `json:"date" yaml:"date"`
	Duration       string          `json:"duration,omitempty" yaml:"duration,omitempty"`
	Summary        Counts          `json:"summary" yaml:"summary"`
	Features       []FeatureReport `json:"features" yaml:"features"`
}

// Counts of scenarios by result.
type Counts struct {
	Passed      int `json:"passed" yaml:"passed"`
	Failed      int `json:"failed" yaml:"failed"`
	Skipped     int `json:"skipped" yaml:"skipped"`
	Unsupported int `json:"unsupported" yaml:"unsupported"`
}

func (c *Counts) add(r Result) {
	switch r {
	case Passed:
		c.Passed++
	case Failed:
		c.Failed++
	case Skipped:
		c.Skipped++
	case Unsupported:
		c.Unsupported++
	}
}

// FeatureReport is the result of one feature.
type FeatureReport struct {
	Name     FeatureName `json:"name" yaml:"name"`
	Extended bool        `json:"extended,omitempty" yaml:"extended,omitempty"`
	Result   Result      `json:"result" yaml:"result"`
	Counts   `json:",inline" yaml:",inline"`
	// Scenarios lists the scenarios that did not pass, with why.
	Scenarios []ScenarioReport `json:"scenarios,omitempty" yaml:"scenarios,omitempty"`
}

// ScenarioReport is one scenario that failed, was skipped or unsupported.
type ScenarioReport struct {
	Name   string `json:"name" yaml:"name"`
	File   string `json:"file,omitempty" yaml:"file,omitempty"`
	Result Result `json:"result" yaml:"result"`
	// Step is the step that failed.
	Step string `json:"step,omitempty" yaml:"step,omitempty"`
	// Message says what was got and what was wanted.
	Message string `json:"message,omitempty" yaml:"message,omitempty"`
}

// Failed reports whether any scenario failed.
func (r *ConformanceReport) Failed() bool { return r.Summary.Failed > 0 }

// Scenario returns the report of the named scenarios that did not pass.
func (r *ConformanceReport) Scenario(name string) []ScenarioReport {
	var out []ScenarioReport
	for _, f := range r.Features {
		for _, s := range f.Scenarios {
			if s.Name == name {
				out = append(out, s)
			}
		}
	}
	return out
}

// scenarioResult is what the runner records per scenario.
type scenarioResult struct {
	feature  FeatureName
	extended bool
	ScenarioReport
}

func buildReport(impl Implementation, target string, start time.Time, results []scenarioResult) *ConformanceReport {
	r := &ConformanceReport{APIVersion: ReportAPIVersion, Kind: ReportKind, Implementation: impl, Target: target,
		Date: start.UTC().Truncate(time.Second), Duration: time.Since(start).Round(time.Millisecond).String()}
	byName := map[FeatureName]*FeatureReport{}
	var order []FeatureName
	for _, s := range results {
		f := byName[s.feature]
		if f == nil {
			f = &FeatureReport{Name: s.feature, Extended: s.extended}
			byName[s.feature] = f
			order = append(order, s.feature)
		}
		f.add(s.Result)
		r.Summary.add(s.Result)
		if s.Result != Passed {
			f.Scenarios = append(f.Scenarios, s.ScenarioReport)
		}
	}
	sort.Slice(order, func(i, j int) bool { return order[i] < order[j] })
	for _, n := range order {
		f := byName[n]
		switch {
		case f.Failed > 0:
			f.Result = Failed
		case f.Passed > 0:
			f.Result = Passed
		case f.Unsupported > 0:
			f.Result = Unsupported
		default:
			f.Result = Skipped
		}
		sort.SliceStable(f.Scenarios, func(i, j int) bool { return f.Scenarios[i].Name < f.Scenarios[j].Name })
		r.Features = append(r.Features, *f)
	}
	return r
}

// WriteFile writes the report as YAML.
func (r *ConformanceReport) WriteFile(path string) error {
	// yaml.v3 keeps the field order, so apiVersion and kind come first.
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(r); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}
