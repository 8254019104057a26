package tracecheck

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/golden/trace"
)

// ev builds an event: "type", "type/stage" or "policySelection@phase",
// with eventEnd end and, when start >= 0, eventStart start.
func ev(spec string, end int64, start int64) trace.Event {
	m := map[string]any{}
	typ, rest, _ := strings.Cut(spec, "/")
	typ, phase, _ := strings.Cut(typ, "@")
	m["type"] = typ
	if rest != "" {
		m["stage"] = rest
		m["requestState"] = map[string]any{}
	}
	if phase != "" {
		m["phase"] = phase
	}
	switch trace.MessageType(typ) {
	case trace.RouteSelection:
		m["selectedRoute"], m["evaluatedRoutes"] = "r", []any{"r"}
	case trace.PolicySelection:
		m["effectivePolicy"] = map[string]any{}
	case trace.BackendCallStart:
		m["target"] = "127.0.0.1:1"
	case trace.BackendCallResult:
		m["status"], m["error"] = float64(200), nil
	}
	e := trace.Event{EventEnd: end, Severity: trace.SeverityInfo, Message: m}
	if start >= 0 {
		e.EventStart = &start
	}
	return e
}

// seq builds a trace of the given specs with increasing eventEnd; the
// backendCallResult gets an eventStart.
func seq(specs ...string) []trace.Event {
	var out []trace.Event
	for i, s := range specs {
		start := int64(-1)
		if s == "backendCallResult" {
			start = int64(i)
		}
		out = append(out, ev(s, int64(i+1), start))
	}
	return out
}

var forwarded = []string{"requestStarted", "requestSnapshot/initial request", "routeSelection", "policySelection",
	"backendCallStart", "backendCallResult", "responseSnapshot/final response", "requestFinished"}

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		events []trace.Event
		want   []string // substrings of the violations, in order; none for a conforming trace
	}{
		{"minimal forwarded trace", seq(forwarded...), nil},
		{"all twelve events", seq("requestStarted", "requestSnapshot/initial request", "requestSnapshot/gateway policies",
			"routeSelection", "policySelection", "requestSnapshot/route policies", "requestSnapshot/final request",
			"backendCallStart", "backendCallResult", "responseSnapshot/backend response ready",
			"responseSnapshot/final response", "requestFinished"), nil},
		{"1.3 phases, unknown events and stages", seq("requestStarted", "policySelection@gateway", "routeSelection",
			"policySelection@route", "cel", "policySelection@backend", "backendCallStart", "backendCallResult",
			"bodySnapshot/initial request", "responseSnapshot/raw response", "responseSnapshot/final response", "requestFinished"), nil},
		{"retried upstream call", seq("requestStarted", "routeSelection", "policySelection", "backendCallStart",
			"backendCallResult", "backendCallStart", "backendCallResult", "responseSnapshot/final response", "requestFinished"), nil},
		{"unmatched route needs no policySelection", func() []trace.Event {
			e := seq("requestStarted", "routeSelection", "responseSnapshot/final response", "requestFinished")
			e[1].Message["selectedRoute"] = nil
			return e
		}(), nil},
		{"policySelection before routeSelection", seq("requestStarted", "policySelection", "routeSelection",
			"responseSnapshot/final response", "requestFinished"), []string{"routeSelection out of order"}},
		{"gateway phase after routeSelection", seq("requestStarted", "routeSelection", "policySelection@gateway",
			"policySelection@route", "responseSnapshot/final response", "requestFinished"),
			[]string{"policySelection (phase gateway) out of order"}},
		{"backend call without its result", seq("requestStarted", "routeSelection", "policySelection", "backendCallStart",
			"responseSnapshot/final response", "requestFinished"), []string{"missing backendCallResult"}},
		{"no final response", seq("requestStarted", "routeSelection", "policySelection", "requestFinished"),
			[]string{"missing responseSnapshot (final response)"}},
		{"two requests", seq("requestStarted", "routeSelection", "policySelection", "responseSnapshot/final response",
			"requestFinished", "requestStarted", "requestFinished"),
			[]string{"more than one request: 2 requestStarted", "more than one request: 2 requestFinished", "requestStarted out of order", "requestFinished out of order"}},
		{"eventEnd decreases", func() []trace.Event {
			e := seq(forwarded...)
			e[3].EventEnd = 1
			return e
		}(), []string{"eventEnd decreases: policySelection has eventEnd 1 after 3"}},
		{"eventStart on a point event", func() []trace.Event {
			e := seq(forwarded...)
			s := int64(0)
			e[2].EventStart = &s
			return e
		}(), []string{"eventStart on a point event: routeSelection"}},
		{"timed event without eventStart", func() []trace.Event {
			e := seq(forwarded...)
			e[5].EventStart = nil
			return e
		}(), []string{"backendCallResult has no eventStart"}},
		{"eventStart after eventEnd", func() []trace.Event {
			e := seq(forwarded...)
			s := int64(99)
			e[5].EventStart = &s
			return e
		}(), []string{"starts at 99, after its end 6"}},
		{"wrong field types", func() []trace.Event {
			e := seq(forwarded...)
			e[2].Message["evaluatedRoutes"] = "r"
			e[4].Message["target"] = 7.0
			e[5].Message["status"] = 200.5
			return e
		}(), []string{"evaluatedRoutes is string, want an array", "backendCallStart has no string target", "status 200.5 is not an integer"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Check(tt.events)
			var lines []string
			for _, v := range got {
				lines = append(lines, v.String())
			}
			if len(tt.want) == 0 && len(got) > 0 {
				t.Fatalf("got violations %q, want none", lines)
			}
			all := strings.Join(lines, "\n")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("violations lack %q; got:\n%s", w, all)
				}
			}
			if len(tt.want) > 0 && len(got) != len(tt.want) {
				t.Errorf("got %d violations %q, want %d", len(got), lines, len(tt.want))
			}
		})
	}
}

func TestLookup(t *testing.T) {
	nested := map[string]any{"request": map[string]any{"method": "GET"}}
	flat := map[string]any{"request.method": "GET"}
	for name, state := range map[string]map[string]any{"nested": nested, "flat": flat} {
		if v, ok := Lookup(state, "request.method"); !ok || v != "GET" {
			t.Errorf("%s: Lookup(request.method) = %v, %v; want GET, true", name, v, ok)
		}
		if _, ok := Lookup(state, "request.path"); ok {
			t.Errorf("%s: Lookup(request.path) found a value; want none", name)
		}
	}
}

func ExampleCheck() {
	events := seq("requestStarted", "policySelection", "routeSelection", "responseSnapshot/final response", "requestFinished")
	for _, v := range Check(events) {
		fmt.Println(v.Rule, v.Event)
	}
	// Output: order 3
}
