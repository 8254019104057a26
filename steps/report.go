package steps

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"sort"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gwdiag/gwdiag/features"
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
	// Partial is the extended result of a profile where some features are
	// supported and some are not, and the core result of one where none
	// failed but some core scenarios were skipped.
	Partial Result = "partial"
	// NotRun is a scenario a signal (or a cancelled context) kept from
	// running to its end: cut short, or never started. It says nothing of
	// the proxy, so it is never failed.
	NotRun Result = "not run"
	// Interrupted is the result of a feature or profile part with scenarios
	// not run because the run was interrupted, and none failed.
	Interrupted Result = "interrupted"
	// ExpectedFailure is a scenario that failed as the run's baseline
	// said it would (--baseline), and a feature or profile part whose only
	// failures are such: it does not fail the run.
	ExpectedFailure Result = "expected failure"
	// StaleBaseline is a scenario the baseline lists that passed: the
	// baseline is out of date, which fails the run.
	StaleBaseline Result = "stale baseline"
	// Flaky is a scenario that passed in some attempts of a --repeat run
	// and failed in others, and a feature or profile part with one: it
	// fails the run.
	Flaky Result = "flaky"
	// Incomplete is the result of a profile part with scenarios the suite's
	// own environment kept from running (no Docker, no Redis, ...), and
	// none failed: the run shows neither conformance nor its absence.
	Incomplete Result = "incomplete"
)

// ConformanceReport is the versioned result of a conformance run.
type ConformanceReport struct {
	APIVersion     string         `json:"apiVersion" yaml:"apiVersion"`
	Kind           string         `json:"kind" yaml:"kind"`
	Implementation Implementation `json:"implementation" yaml:"implementation"`
	Target         string         `json:"target" yaml:"target"`
	Date           time.Time      `json:"date" yaml:"date"`
	Duration       string         `json:"duration,omitempty" yaml:"duration,omitempty"`
	// Producer is what produced the report: gwdiag's version and revision
	// and the feature set it ran.
	Producer Producer `json:"producer" yaml:"producer"`
	// Options are the settings of the run that decide what ran and how.
	Options RunOptions `json:"options" yaml:"options"`
	// Claims is what the run was told about the proxy's extended features.
	Claims Claims `json:"claims" yaml:"claims"`
	// Interrupted is set when a signal stopped the run before its end.
	Interrupted *Interruption `json:"interrupted,omitempty" yaml:"interrupted,omitempty"`
	// StoppedEarly is set when --fail-fast stopped the run at a failure.
	StoppedEarly *EarlyStop `json:"stoppedEarly,omitempty" yaml:"stoppedEarly,omitempty"`
	// Incomplete is set when the suite's own environment kept scenarios
	// from running: what was missing, how to fix it, and how many.
	Incomplete *Incompleteness `json:"incomplete,omitempty" yaml:"incomplete,omitempty"`
	Summary    Counts          `json:"summary" yaml:"summary"`
	// Profiles is the result per profile run: core, then extended.
	Profiles []ProfileReport `json:"profiles" yaml:"profiles"`
	Features []FeatureReport `json:"features" yaml:"features"`
}

// Producer says what produced a report.
type Producer struct {
	// Version and Revision are gwdiag's release and VCS revision (set by
	// the CLI; empty for a library run without them).
	Version  string `json:"version,omitempty" yaml:"version,omitempty"`
	Revision string `json:"revision,omitempty" yaml:"revision,omitempty"`
	// FeatureSet and FeatureDigest name the features that ran
	// (features.Version, features.Digest).
	FeatureSet    string `json:"featureSet" yaml:"featureSet"`
	FeatureDigest string `json:"featureDigest" yaml:"featureDigest"`
}

// RunOptions are the options of a run that decide what ran and how.
type RunOptions struct {
	Target       string                   `json:"target" yaml:"target"`
	ProxyCommand string                   `json:"proxyCommand,omitempty" yaml:"proxyCommand,omitempty"`
	ConfigStyle  string                   `json:"configStyle,omitempty" yaml:"configStyle,omitempty"`
	GatewayClass string                   `json:"gatewayClass,omitempty" yaml:"gatewayClass,omitempty"`
	Profiles     []ConformanceProfileName `json:"profiles" yaml:"profiles"`
	Tags         string                   `json:"tags,omitempty" yaml:"tags,omitempty"`
	RunScenario  string                   `json:"runScenario,omitempty" yaml:"runScenario,omitempty"`
	RunExample   int                      `json:"runExample,omitempty" yaml:"runExample,omitempty"`
	Skipped      []string                 `json:"skipScenarios,omitempty" yaml:"skipScenarios,omitempty"`
	Concurrency  int                      `json:"concurrency" yaml:"concurrency"`
	FailFast     bool                     `json:"failFast,omitempty" yaml:"failFast,omitempty"`
	Baseline     string                   `json:"baseline,omitempty" yaml:"baseline,omitempty"`
	Repeat       int                      `json:"repeat,omitempty" yaml:"repeat,omitempty"`
	// Timeouts are the request and trace bounds, as Go durations.
	RequestTimeout string `json:"requestTimeout" yaml:"requestTimeout"`
	TraceTimeout   string `json:"traceTimeout" yaml:"traceTimeout"`
}

// Interruption says what stopped a run and how far it got.
type Interruption struct {
	// Signal names the signal (SIGINT, SIGTERM), or the context's error
	// when the run's context was cancelled otherwise.
	Signal string `json:"signal" yaml:"signal"`
	// Ran is how many scenarios ran to their end (passed, failed or
	// unsupported) before it.
	Ran int `json:"ran" yaml:"ran"`
	// CutShort is how many were running and stopped; NotStarted how many
	// never began. Both are counted as not run.
	CutShort   int `json:"cutShort" yaml:"cutShort"`
	NotStarted int `json:"notStarted" yaml:"notStarted"`
}

// line is the last line of an interrupted run's progress output.
func (i *Interruption) line() string {
	return fmt.Sprintf("run interrupted by %s after %d scenarios: %d not run (%d cut short, %d not started), none counted as failed",
		i.Signal, i.Ran, i.CutShort+i.NotStarted, i.CutShort, i.NotStarted)
}

// EarlyStop says where --fail-fast stopped a run: no scenario started
// after the first failure; those running went to their end.
type EarlyStop struct {
	// AfterFailureOf names the first scenario that failed.
	AfterFailureOf string `json:"afterFailureOf" yaml:"afterFailureOf"`
	// NotStarted is how many scenarios were left not run.
	NotStarted int `json:"notStarted" yaml:"notStarted"`
}

// line is the last line of a stopped run's progress output.
func (e *EarlyStop) line() string {
	return fmt.Sprintf("run stopped early (--fail-fast) after the failure of %q: %d scenarios not run", e.AfterFailureOf, e.NotStarted)
}

// Incompleteness says what of the suite's own environment was missing.
type Incompleteness struct {
	// NotRun is how many scenarios it kept from running.
	NotRun int `json:"notRun" yaml:"notRun"`
	// Missing lists each thing missing, in the order first met.
	Missing []MissingPart `json:"missing" yaml:"missing"`
}

// MissingPart is one thing the suite's environment lacked.
type MissingPart struct {
	// Reason is the error, with what is missing and the fix.
	Reason    string `json:"reason" yaml:"reason"`
	Scenarios int    `json:"scenarios" yaml:"scenarios"`
}

// line is the last line of an incomplete run's progress output.
func (i *Incompleteness) line() string {
	s := fmt.Sprintf("run incomplete: %d scenarios not run because the suite's environment lacks something (none counted as failed):", i.NotRun)
	for _, m := range i.Missing {
		s += fmt.Sprintf("\n  %d: %s", m.Scenarios, m.Reason)
	}
	return s
}

// Claims are the feature options of the run.
type Claims struct {
	SupportedFeatures []FeatureName `json:"supportedFeatures,omitempty" yaml:"supportedFeatures,omitempty"`
	AllFeatures       bool          `json:"allFeatures,omitempty" yaml:"allFeatures,omitempty"`
	ExemptFeatures    []FeatureName `json:"exemptFeatures,omitempty" yaml:"exemptFeatures,omitempty"`
	// InferredFrom says where SupportedFeatures came from when the run
	// claimed nothing: the GatewayClass's status.supportedFeatures.
	InferredFrom string `json:"inferredFrom,omitempty" yaml:"inferredFrom,omitempty"`
}

// ProfileReport is the result of one profile. A core failure fails the
// run; an extended feature the proxy lacks and does not claim is listed as
// unsupported, one it claims and fails as failed.
type ProfileReport struct {
	Name     ConformanceProfileName `json:"name" yaml:"name"`
	Core     CoreResult             `json:"core" yaml:"core"`
	Extended ExtendedResult         `json:"extended" yaml:"extended"`
}

// CoreResult is the result of a profile's core features.
type CoreResult struct {
	Result Result `json:"result" yaml:"result"`
	Counts `json:",inline" yaml:",inline"`
}

// ExtendedResult is the result of a profile's extended features, by feature.
type ExtendedResult struct {
	// Result is passed when every extended feature run passed, partial when
	// some are unsupported, failed when a claimed one failed, interrupted
	// when none failed and some were not run to their end, skipped when
	// none ran.
	Result              Result        `json:"result" yaml:"result"`
	SupportedFeatures   []FeatureName `json:"supportedFeatures,omitempty" yaml:"supportedFeatures,omitempty"`
	UnsupportedFeatures []FeatureName `json:"unsupportedFeatures,omitempty" yaml:"unsupportedFeatures,omitempty"`
	FailedFeatures      []FeatureName `json:"failedFeatures,omitempty" yaml:"failedFeatures,omitempty"`
	SkippedFeatures     []FeatureName `json:"skippedFeatures,omitempty" yaml:"skippedFeatures,omitempty"`
	// InterruptedFeatures had scenarios not run when the run was interrupted.
	InterruptedFeatures []FeatureName `json:"interruptedFeatures,omitempty" yaml:"interruptedFeatures,omitempty"`
	// NotRunFeatures had scenarios the suite's environment (or --fail-fast)
	// kept from running.
	NotRunFeatures []FeatureName `json:"notRunFeatures,omitempty" yaml:"notRunFeatures,omitempty"`
	// ExpectedFailureFeatures failed only as the baseline said they would.
	ExpectedFailureFeatures []FeatureName `json:"expectedFailureFeatures,omitempty" yaml:"expectedFailureFeatures,omitempty"`
}

// Counts of scenarios by result.
type Counts struct {
	Passed      int `json:"passed" yaml:"passed"`
	Failed      int `json:"failed" yaml:"failed"`
	Skipped     int `json:"skipped" yaml:"skipped"`
	Unsupported int `json:"unsupported" yaml:"unsupported"`
	// NotRun counts the scenarios an interruption kept from their end.
	NotRun int `json:"notRun,omitempty" yaml:"notRun,omitempty"`
	// ExpectedFailures, Stale and Flaky count the scenarios of those
	// results (--baseline, --repeat).
	ExpectedFailures int `json:"expectedFailures,omitempty" yaml:"expectedFailures,omitempty"`
	Stale            int `json:"staleBaseline,omitempty" yaml:"staleBaseline,omitempty"`
	Flaky            int `json:"flaky,omitempty" yaml:"flaky,omitempty"`
}

// failing counts what fails the run: failed, flaky and stale scenarios.
func (c Counts) failing() int { return c.Failed + c.Flaky + c.Stale }

// plus adds o's counts to c.
func (c *Counts) plus(o Counts) {
	c.Passed += o.Passed
	c.Failed += o.Failed
	c.Skipped += o.Skipped
	c.Unsupported += o.Unsupported
	c.NotRun += o.NotRun
	c.ExpectedFailures += o.ExpectedFailures
	c.Stale += o.Stale
	c.Flaky += o.Flaky
}

func (c *Counts) add(r Result, n int) {
	switch r {
	case Passed:
		c.Passed += n
	case Failed:
		c.Failed += n
	case Skipped:
		c.Skipped += n
	case Unsupported:
		c.Unsupported += n
	case NotRun:
		c.NotRun += n
	case ExpectedFailure:
		c.ExpectedFailures += n
	case StaleBaseline:
		c.Stale += n
	case Flaky:
		c.Flaky += n
	}
}

// FeatureReport is the result of one feature.
type FeatureReport struct {
	Name     FeatureName            `json:"name" yaml:"name"`
	Profile  ConformanceProfileName `json:"profile" yaml:"profile"`
	Extended bool                   `json:"extended,omitempty" yaml:"extended,omitempty"`
	Claimed  bool                   `json:"claimed,omitempty" yaml:"claimed,omitempty"`
	Result   Result                 `json:"result" yaml:"result"`
	Counts   `json:",inline" yaml:",inline"`
	// Scenarios lists the scenarios that did not pass, with why.
	Scenarios []ScenarioReport `json:"scenarios,omitempty" yaml:"scenarios,omitempty"`
}

// ScenarioReport is one scenario that failed, was skipped, unsupported or
// not run.
type ScenarioReport struct {
	Name string `json:"name" yaml:"name"`
	File string `json:"file,omitempty" yaml:"file,omitempty"`
	// Example is, for an example of a Scenario Outline, the line of its
	// Examples row in File: the examples of one outline share its name.
	Example int    `json:"example,omitempty" yaml:"example,omitempty"`
	Result  Result `json:"result" yaml:"result"`
	// Step is the step that failed.
	Step string `json:"step,omitempty" yaml:"step,omitempty"`
	// Message says what was got and what was wanted.
	Message string `json:"message,omitempty" yaml:"message,omitempty"`
	// ProxyLogs is the end of what the proxy wrote while a failed scenario
	// ran, on targets that keep it (process, container).
	ProxyLogs string `json:"proxyLogs,omitempty" yaml:"proxyLogs,omitempty"`
	// Bundle is the folder of the failed scenario's evidence (--bundle-dir).
	Bundle string `json:"bundle,omitempty" yaml:"bundle,omitempty"`
	// Tries is how many times the scenario ran when a try was inconclusive
	// (its requests outlasted a rate-limit window, which says nothing of
	// the proxy) and it was tried again; 0 when it ran once. The result is
	// the last try's.
	Tries int `json:"tries,omitempty" yaml:"tries,omitempty"`
}

// Failed reports whether the run failed: a scenario failed, was flaky, or
// passed against the baseline.
func (r *ConformanceReport) Failed() bool { return r.Summary.failing() > 0 }

// Scenario returns the reports of the scenarios of that name (the
// examples of an outline share it).
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
	profile  ConformanceProfileName
	extended bool
	// cutShort marks a NotRun scenario that had started.
	cutShort bool
	// stoppedBy names, for a NotRun scenario --fail-fast kept from
	// starting, the failed scenario that stopped the run.
	stoppedBy string
	// inconclusive says why a NotRun scenario's try said nothing of the
	// proxy (a rate-limit window ended under its requests).
	inconclusive string
	// earlierTries says why the earlier tries of a scenario tried again
	// were inconclusive.
	earlierTries string
	// missing is set for a NotRun scenario the suite's own environment kept
	// from running: the EnvironmentError, in one line.
	missing string
	// attempt is the attempt of a --repeat run (1 to Repeat; 0 without).
	attempt int
	// count is how many scenarios of this result the entry stands for
	// (recorded checks count passing traces without keeping each); 0 is one.
	count int
	ScenarioReport
}

// buildReport builds the report of a run's results. interrupted says what
// ended the run's context ("" when nothing did); the run counts as
// interrupted when some scenario did not run to its end.
func buildReport(o Options, targetName string, profiles []ConformanceProfileName, start time.Time, results []scenarioResult, interrupted string) *ConformanceReport {
	r := &ConformanceReport{APIVersion: ReportAPIVersion, Kind: ReportKind, Implementation: o.Implementation, Target: targetName,
		Date: start.UTC().Truncate(time.Second), Duration: time.Since(start).Round(time.Millisecond).String(),
		Producer: Producer{Version: o.Producer.Version, Revision: o.Producer.Revision, FeatureSet: features.Version, FeatureDigest: features.Digest()},
		Options:  RunOptions{Profiles: profiles},
		Claims:   Claims{SupportedFeatures: o.SupportedFeatures, AllFeatures: o.AllFeatures, ExemptFeatures: o.ExemptFeatures}}
	recordOptions(o, &r.Options)
	if o.Target == "cluster" {
		r.Options.GatewayClass = o.Cluster.GatewayClassName
	}
	byName := map[FeatureName]*FeatureReport{}
	var order []FeatureName
	for _, s := range results {
		f := byName[s.feature]
		if f == nil {
			f = &FeatureReport{Name: s.feature, Profile: s.profile, Extended: s.extended, Claimed: s.extended && o.claims(s.feature)}
			byName[s.feature] = f
			order = append(order, s.feature)
		}
		n := max(s.count, 1)
		f.add(s.Result, n)
		r.Summary.add(s.Result, n)
		if s.Result != Passed || s.Tries > 1 {
			// A scenario that passed at a later try is listed: its
			// message says why the earlier said nothing.
			f.Scenarios = append(f.Scenarios, s.ScenarioReport)
		}
	}
	for _, s := range results {
		if s.Result == NotRun && s.stoppedBy != "" {
			if r.StoppedEarly == nil {
				r.StoppedEarly = &EarlyStop{AfterFailureOf: s.stoppedBy}
			}
			r.StoppedEarly.NotStarted++
		}
	}
	for _, s := range results {
		if s.Result != NotRun || s.missing == "" {
			continue
		}
		if r.Incomplete == nil {
			r.Incomplete = &Incompleteness{}
		}
		r.Incomplete.NotRun++
		i := slices.IndexFunc(r.Incomplete.Missing, func(m MissingPart) bool { return m.Reason == s.missing })
		if i < 0 {
			r.Incomplete.Missing = append(r.Incomplete.Missing, MissingPart{Reason: s.missing})
			i = len(r.Incomplete.Missing) - 1
		}
		r.Incomplete.Missing[i].Scenarios++
	}
	notRun := r.Summary.NotRun
	if r.StoppedEarly != nil {
		notRun -= r.StoppedEarly.NotStarted
	}
	if r.Incomplete != nil {
		notRun -= r.Incomplete.NotRun
	}
	if notRun > 0 {
		r.Interrupted = &Interruption{Signal: interrupted, Ran: r.Summary.Passed + r.Summary.failing() + r.Summary.ExpectedFailures + r.Summary.Unsupported}
		for _, s := range results {
			switch {
			case s.Result != NotRun, s.stoppedBy != "", s.missing != "":
			case s.cutShort:
				r.Interrupted.CutShort++
			default:
				r.Interrupted.NotStarted++
			}
		}
	}
	sort.Slice(order, func(i, j int) bool { return order[i] < order[j] })
	for _, n := range order {
		f := byName[n]
		switch {
		case f.Failed > 0 || f.Stale > 0:
			f.Result = Failed
		case f.Flaky > 0:
			f.Result = Flaky
		case f.NotRun > 0 && r.Interrupted == nil:
			// Only --fail-fast or the suite's environment left scenarios
			// of it not run.
			f.Result = NotRun
		case f.NotRun > 0:
			f.Result = Interrupted
		case f.ExpectedFailures > 0:
			f.Result = ExpectedFailure
		case f.Unsupported > 0:
			f.Result = Unsupported
		case f.Passed > 0:
			f.Result = Passed
		default:
			f.Result = Skipped
		}
		sort.SliceStable(f.Scenarios, func(i, j int) bool { return f.Scenarios[i].Name < f.Scenarios[j].Name })
		r.Features = append(r.Features, *f)
	}
	for _, p := range profiles {
		r.Profiles = append(r.Profiles, profileReport(p, r.Features, r.Interrupted != nil))
	}
	return r
}

// profileReport sums the features of one profile; interrupted says the run
// was interrupted, so that scenarios not run are counted as interrupted
// rather than as the environment's incompleteness.
func profileReport(name ConformanceProfileName, features []FeatureReport, interrupted bool) ProfileReport {
	p := ProfileReport{Name: name}
	for _, f := range features {
		if f.Profile != name {
			continue
		}
		if !f.Extended {
			p.Core.Counts.plus(f.Counts)
			continue
		}
		e := &p.Extended
		switch f.Result {
		case Passed:
			e.SupportedFeatures = append(e.SupportedFeatures, f.Name)
		case Unsupported:
			e.UnsupportedFeatures = append(e.UnsupportedFeatures, f.Name)
		case Failed, Flaky:
			e.FailedFeatures = append(e.FailedFeatures, f.Name)
		case ExpectedFailure:
			e.ExpectedFailureFeatures = append(e.ExpectedFailureFeatures, f.Name)
		case Interrupted:
			e.InterruptedFeatures = append(e.InterruptedFeatures, f.Name)
		case NotRun:
			e.NotRunFeatures = append(e.NotRunFeatures, f.Name)
		default:
			e.SkippedFeatures = append(e.SkippedFeatures, f.Name)
		}
	}
	switch c := p.Core; {
	case c.Failed > 0 || c.Stale > 0:
		// A failure seen before an interruption is still a failure.
		p.Core.Result = Failed
	case c.Flaky > 0:
		p.Core.Result = Flaky
	case c.NotRun > 0 && interrupted:
		// Not run is not failed: a cancelled run says nothing of the
		// scenarios it did not finish.
		p.Core.Result = Interrupted
	case c.NotRun > 0:
		// Nor does a run whose environment lacked what they need.
		p.Core.Result = Incomplete
	case c.ExpectedFailures > 0:
		p.Core.Result = ExpectedFailure
	case c.Passed > 0 && c.Skipped > 0:
		// Some core scenarios did not run (a capability the target lacks,
		// or skipped by the user): the run does not show core conformance.
		p.Core.Result = Partial
	case c.Passed > 0:
		p.Core.Result = Passed
	default:
		p.Core.Result = Skipped
	}
	switch e := p.Extended; {
	case len(e.FailedFeatures) > 0:
		p.Extended.Result = Failed
	case len(e.InterruptedFeatures) > 0:
		p.Extended.Result = Interrupted
	case len(e.NotRunFeatures) > 0:
		p.Extended.Result = Incomplete
	case len(e.ExpectedFailureFeatures) > 0:
		p.Extended.Result = ExpectedFailure
	case len(e.UnsupportedFeatures) > 0 && len(e.SupportedFeatures) > 0:
		p.Extended.Result = Partial
	case len(e.UnsupportedFeatures) > 0:
		p.Extended.Result = Unsupported
	case len(e.SupportedFeatures) > 0:
		p.Extended.Result = Passed
	default:
		p.Extended.Result = Skipped
	}
	return p
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
