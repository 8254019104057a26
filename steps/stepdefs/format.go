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

func names(events []trace.Event) string {
	var n []string
	for _, e := range events {
		n = append(n, tracecheck.Name(e))
	}
	return "[" + strings.Join(n, ", ") + "]"
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
