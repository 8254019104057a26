package steps

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/redact"
	"github.com/gwdiag/gwdiag/steps/tracecheck"
)

// RecordedTrace is one trace read from a capture, for RecordedCheck.
type RecordedTrace struct {
	// Name identifies the trace in the report (its file, and its place in
	// the file when the file holds several).
	Name   string
	Events []trace.Event
	// Lines, when set, are the capture lines of Events, so violations name
	// the line as well as the event.
	Lines []int
	// Err is set when the capture could not be read; the trace then fails.
	Err error
}

// RecordedFeature is the feature recorded traces are reported under: the
// same trace checks as the live trace-order scenarios.
const RecordedFeature = FeatureTraceOrder

// maxReportedFailures is how many failing traces a RecordedCheck report
// describes; it counts the others. A capture of a broken proxy can fail
// every one of its hundreds of thousands of traces, and the first ones say
// what is wrong.
const maxReportedFailures = 1000

// RecordedCheck runs the trace checks (tracecheck.Check, the rules the live
// suite applies) on recorded traces one at a time and reports each trace as
// one scenario: conformance without running the proxy. It keeps the failing
// traces (up to MaxReportedFailures) and counts the passing ones, so its
// memory does not grow with the capture.
type RecordedCheck struct {
	// redact scrubs a failing trace's message of the credentials its own
	// events show (a capture of a proxy that does not redact).
	redact  *redact.Redactor
	impl    Implementation
	start   time.Time
	passed  int
	failed  int
	reports []scenarioResult
}

// NewRecordedCheck starts a check of recorded traces from impl.
func NewRecordedCheck(impl Implementation) *RecordedCheck {
	if impl.Name == "" {
		impl.Name = "recorded traces"
	}
	return &RecordedCheck{impl: impl, start: time.Now(), redact: redact.New(redact.Options{})}
}

// Add checks one trace. It returns the trace's report when the trace
// fails, nil when it passes.
func (c *RecordedCheck) Add(t RecordedTrace) *ScenarioReport {
	res := ScenarioReport{Name: t.Name, File: t.Name, Result: Failed}
	switch {
	case t.Err != nil:
		res.Message = t.Err.Error()
	case len(t.Events) == 0:
		res.Message = "the trace has no events"
	default:
		v := tracecheck.Check(t.Events)
		if len(v) == 0 {
			c.passed++
			return nil
		}
		lines := make([]string, len(v))
		for i, x := range v {
			lines[i] = x.String()
			if x.Event > 0 && x.Event <= len(t.Lines) {
				lines[i] = fmt.Sprintf("%s: event %d (line %d): %s", x.Rule, x.Event, t.Lines[x.Event-1], x.Message)
			}
		}
		res.Message, res.Step = strings.Join(lines, "\n"), "trace checks"
	}
	res.Message = c.scrub(t.Events, res.Message)
	c.failed++
	if len(c.reports) < maxReportedFailures {
		c.reports = append(c.reports, scenarioResult{feature: RecordedFeature, profile: ProfileStandalone, ScenarioReport: res})
	}
	return &res
}

// scrub is msg without the credentials the credential headers of events
// show: a violation may quote a value.
func (c *RecordedCheck) scrub(events []trace.Event, msg string) string {
	var secrets redact.Secrets
	for _, e := range events {
		if b, err := json.Marshal(e.Message); err == nil {
			c.redact.CollectEvent(b, &secrets)
		}
	}
	out, _ := c.redact.Scrub(msg, &secrets)
	return out
}

// Report is the report of the traces added so far.
func (c *RecordedCheck) Report() *ConformanceReport {
	results := c.reports
	if unreported := c.failed - len(c.reports); unreported > 0 {
		results = append(results, scenarioResult{feature: RecordedFeature, profile: ProfileStandalone, count: unreported,
			ScenarioReport: ScenarioReport{Name: fmt.Sprintf("(%d more failing traces, not described)", unreported), Result: Failed}})
	}
	if c.passed > 0 {
		results = append(results, scenarioResult{feature: RecordedFeature, profile: ProfileStandalone, count: c.passed, ScenarioReport: ScenarioReport{Result: Passed}})
	}
	return buildReport(Options{Implementation: c.impl}, "recorded", []ConformanceProfileName{ProfileStandalone}, c.start, results, "")
}
