package steps

import (
	"strings"
	"time"

	"github.com/gwdiag/gwdiag/refproxy/trace"
	"github.com/gwdiag/gwdiag/steps/tracecheck"
)

// RecordedTrace is one trace read from a file, for CheckRecorded.
type RecordedTrace struct {
	// Name identifies the trace in the report (usually its file name).
	Name   string
	Events []trace.Event
	// Err is set when the file could not be read; the trace then fails.
	Err error
}

// RecordedFeature is the feature recorded traces are reported under: the
// same trace checks as the live trace-order scenarios.
const RecordedFeature = FeatureTraceOrder

// CheckRecorded runs the trace checks (tracecheck.Check, the rules the live
// suite applies) on recorded traces, and reports each trace as one scenario:
// conformance without running the proxy. A followed capture (events with
// requestIds, from `gwdiag trace --follow --raw`) is split by request id,
// one scenario per request.
func CheckRecorded(impl Implementation, traces []RecordedTrace) *ConformanceReport {
	start := time.Now()
	var results []scenarioResult
	for _, t := range splitFollowed(traces) {
		res := scenarioResult{feature: RecordedFeature, profile: ProfileStandalone, ScenarioReport: ScenarioReport{Name: t.Name, File: t.Name, Result: Passed}}
		switch {
		case t.Err != nil:
			res.Result, res.Message = Failed, t.Err.Error()
		case len(t.Events) == 0:
			res.Result, res.Message = Failed, "the trace has no events"
		default:
			if v := tracecheck.Check(t.Events); len(v) > 0 {
				var lines []string
				for _, x := range v {
					lines = append(lines, x.String())
				}
				res.Result, res.Message = Failed, strings.Join(lines, "\n")
				res.Step = "trace checks"
			}
		}
		results = append(results, res)
	}
	if impl.Name == "" {
		impl.Name = "recorded traces"
	}
	return buildReport(Options{Implementation: impl}, "recorded", []ConformanceProfileName{ProfileStandalone}, start, results, "")
}

// splitFollowed replaces each followed capture by its requests' traces,
// named after the file and the request id.
func splitFollowed(traces []RecordedTrace) []RecordedTrace {
	var out []RecordedTrace
	for _, t := range traces {
		ids, byID := trace.ByRequest(t.Events)
		if t.Err != nil || len(ids) == 0 || len(ids) == 1 && ids[0] == "" {
			out = append(out, t)
			continue
		}
		for _, id := range ids {
			name := t.Name + " request " + id
			if id == "" {
				name = t.Name + " (events without a requestId)"
			}
			out = append(out, RecordedTrace{Name: name, Events: byID[id]})
		}
	}
	return out
}
