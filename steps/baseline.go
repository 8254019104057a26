package steps

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// BaselineKind identifies a ConformanceBaseline document.
const BaselineKind = "ConformanceBaseline"

// Baseline lists the scenarios a proxy is known to fail, so that a vendor
// adopts the suite on day one and tightens it as it fixes: a listed
// scenario that fails is an expected failure, which does not fail the
// run; one that passes fails it as a stale baseline, naming it.
type Baseline struct {
	APIVersion     string         `yaml:"apiVersion"`
	Kind           string         `yaml:"kind"`
	Implementation Implementation `yaml:"implementation,omitempty"`
	// From says which report the baseline was written from.
	From             string            `yaml:"from,omitempty"`
	ExpectedFailures []ExpectedFailing `yaml:"expectedFailures"`
}

// ExpectedFailing is one scenario of a baseline.
type ExpectedFailing struct {
	Feature  FeatureName `yaml:"feature"`
	Scenario string      `yaml:"scenario"`
	// Example is the line of the Examples row of the outline's example
	// that fails; 0 (left out) names every example of the scenario.
	Example int `yaml:"example,omitempty"`
	// Reason is why it fails, as the report said (for the reader; it is
	// not compared).
	Reason string `yaml:"reason,omitempty"`
}

// LoadBaseline reads a baseline file.
func LoadBaseline(path string) (*Baseline, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--baseline: %w", err)
	}
	var b Baseline
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("--baseline %s: %w", path, err)
	}
	if b.Kind != BaselineKind {
		return nil, fmt.Errorf("--baseline %s: kind %q, want %s (gwdiag conformance baseline REPORT writes one)", path, b.Kind, BaselineKind)
	}
	for i, e := range b.ExpectedFailures {
		if e.Feature == "" || e.Scenario == "" {
			return nil, fmt.Errorf("--baseline %s: expectedFailures[%d]: want a feature and a scenario", path, i)
		}
	}
	return &b, nil
}

// BaselineOf is the baseline of a report: every scenario that failed in it
// (or failed as expected, or was flaky), sorted by feature and name.
func BaselineOf(r *ConformanceReport, from string) *Baseline {
	b := &Baseline{APIVersion: ReportAPIVersion, Kind: BaselineKind, Implementation: r.Implementation, From: from, ExpectedFailures: []ExpectedFailing{}}
	for _, f := range r.Features {
		for _, s := range f.Scenarios {
			if s.Result == Failed || s.Result == ExpectedFailure || s.Result == Flaky {
				reason, _, _ := strings.Cut(s.Message, "\n")
				b.ExpectedFailures = append(b.ExpectedFailures, ExpectedFailing{Feature: f.Name, Scenario: s.Name, Example: s.Example, Reason: reason})
			}
		}
	}
	slices.SortFunc(b.ExpectedFailures, func(x, y ExpectedFailing) int {
		if c := strings.Compare(string(x.Feature)+"\x00"+x.Scenario, string(y.Feature)+"\x00"+y.Scenario); c != 0 {
			return c
		}
		return x.Example - y.Example
	})
	return b
}

// Encode writes the baseline as YAML to w.
func (b *Baseline) Encode(w io.Writer) error {
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(b); err != nil {
		return err
	}
	return enc.Close()
}

// Write writes the baseline as YAML to the file path.
func (b *Baseline) Write(path string) error {
	var buf bytes.Buffer
	if err := b.Encode(&buf); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// lists reports whether the baseline lists the scenario.
func (b *Baseline) lists(feature FeatureName, scenario string, example int) bool {
	return b != nil && slices.ContainsFunc(b.ExpectedFailures, func(e ExpectedFailing) bool {
		return e.Feature == feature && e.Scenario == scenario && (e.Example == 0 || e.Example == example)
	})
}

// applyBaseline turns the results of the scenarios b lists: a failure is
// expected, a pass is a stale baseline.
func applyBaseline(b *Baseline, path string, results []scenarioResult) {
	for i := range results {
		s := &results[i]
		if !b.lists(s.feature, s.Name, s.Example) {
			continue
		}
		switch s.Result {
		case Failed:
			s.Result = ExpectedFailure
		case Passed:
			s.Result, s.Message = StaleBaseline, fmt.Sprintf("the baseline %s lists it as failing, and it passed: remove it from the baseline", path)
		}
	}
}

// mergeAttempts folds the attempts of a --repeat run into one result per
// scenario: passed or failed in every attempt stays so, passed in some and
// failed in others is flaky, with a failing attempt's step, message and
// bundle; otherwise the first attempt's result stands.
func mergeAttempts(results []scenarioResult) []scenarioResult {
	type key struct {
		feature FeatureName
		name    string
		example int
	}
	byKey := map[key][]scenarioResult{}
	var order []key
	for _, s := range results {
		k := key{s.feature, s.Name, s.Example}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], s)
	}
	out := make([]scenarioResult, 0, len(order))
	for _, k := range order {
		all := byKey[k]
		passed, failed := 0, -1
		for i, s := range all {
			switch {
			case s.Result == Passed:
				passed++
			case s.Result == Failed && failed < 0:
				failed = i
			}
		}
		// An inconclusive attempt says nothing: the first with a verdict
		// stands for the rest.
		m := all[0]
		for _, s := range all {
			if s.inconclusive == "" {
				m = s
				break
			}
		}
		switch {
		case failed >= 0 && passed > 0:
			m = all[failed]
			m.Result = Flaky
			m.Message = fmt.Sprintf("flaky: passed %d of %d attempts; attempt %d failed: %s", passed, len(all), m.attempt, m.Message)
		case failed >= 0:
			m = all[failed]
			if n := countResult(all, Failed); n == len(all) {
				m.Message = fmt.Sprintf("failed in all %d attempts; attempt %d: %s", n, m.attempt, m.Message)
			}
		}
		out = append(out, m)
	}
	return out
}

func countResult(rs []scenarioResult, r Result) int {
	n := 0
	for _, s := range rs {
		if s.Result == r {
			n++
		}
	}
	return n
}
