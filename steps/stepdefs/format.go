package stepdefs

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/steps/tracecheck"
)

// The wording the steps share: how a step names events, values and
// violations in its errors, and small conversions of step arguments.

func keys(m map[string]any) []string {
	var k []string
	for x := range m {
		k = append(k, x)
	}
	return k
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func last(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

func trim(b []byte) string {
	s := string(b)
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// unitOf maps a step's "second", "minute" or "hour" to the limit's unit.
func unitOf(unit string) time.Duration {
	switch unit {
	case "second":
		return time.Second
	case "minute":
		return time.Minute
	default:
		return time.Hour
	}
}

// describe renders a JSON field for a message: absent, or its value.
func describe(v any, present bool) string {
	if !present {
		return "no field"
	}
	return string(mustJSON(v))
}

// names lists a trace's events by name, then says which request the
// trace is of and the status it ended with, where its snapshots say: a
// trace of another request than the step's (another client's, that
// reached the proxy first) reads so at once.
func names(events []trace.Event) string {
	var n []string
	for _, e := range events {
		n = append(n, tracecheck.Name(e))
	}
	return "[" + strings.Join(n, ", ") + "]" + requestOf(events)
}

// requestOf is ", the trace of GET /get, answered 429" from the initial
// request snapshot and the final response snapshot ("" without the first).
func requestOf(events []trace.Event) string {
	e, ok := tracecheck.Find(events, "requestSnapshot ("+trace.StageInitialRequest+")")
	if !ok {
		return ""
	}
	method, _ := tracecheck.Lookup(tracecheck.State(e), "request.method")
	path, _ := tracecheck.Lookup(tracecheck.State(e), "request.path")
	m, _ := method.(string)
	p, _ := path.(string)
	if m == "" && p == "" {
		return ""
	}
	out := fmt.Sprintf(", the trace of %s %s", m, p)
	if e, ok := tracecheck.Find(events, "responseSnapshot ("+trace.StageFinalResponse+")"); ok {
		if code, ok := tracecheck.Lookup(tracecheck.State(e), "response.code"); ok {
			out += fmt.Sprintf(", answered %v", code)
		}
	}
	return out
}

func violations(v []tracecheck.Violation, events []trace.Event) error {
	if len(v) == 0 {
		return nil
	}
	var lines []string
	for _, x := range v {
		lines = append(lines, x.String())
	}
	return fmt.Errorf("%s\ngot events %s", strings.Join(lines, "\n"), names(events))
}
