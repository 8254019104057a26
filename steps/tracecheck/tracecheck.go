// Package tracecheck holds the conformance checks of one recorded trace
// (spec parts 2.1, 3 and 6), shared by the live suite and by
// `gwdiag conformance check`. The checks are written for proxies of several
// versions: unknown event types, unknown fields, unknown snapshot stages and
// a phase on policySelection never fail a trace; only the events the spec
// names are held to its order.
package tracecheck

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace"
)

// Rule names a check, as reports show it.
type Rule string

// The rules of Check.
const (
	ruleOneRequest Rule = "one-request"
	ruleRequired   Rule = "required-events"
	ruleOrder      Rule = "order"
	ruleEventEnd   Rule = "event-end"
	ruleEventStart Rule = "event-start"
	ruleShape      Rule = "shape"
)

// Violation is one failed check.
type Violation struct {
	Rule Rule
	// Event is the 1-based index of the offending event, 0 for the trace as a whole.
	Event   int
	Message string
}

// String is the violation as reports show it: rule, event, message.
func (v Violation) String() string {
	if v.Event == 0 {
		return fmt.Sprintf("%s: %s", v.Rule, v.Message)
	}
	return fmt.Sprintf("%s: event %d: %s", v.Rule, v.Event, v.Message)
}

// rank is the position of a spec-named event in the fixed order of spec
// part 3, or -1 for events the order does not cover.
func rank(e trace.Event) int {
	switch e.Type() {
	case trace.RequestStarted:
		return 0
	case trace.RequestSnapshot:
		switch e.Stage() {
		case trace.StageInitialRequest:
			return 1
		case trace.StageGatewayPolicies:
			return 2
		case trace.StageRoutePolicies:
			return 5
		case trace.StageFinalRequest:
			return 6
		}
	case trace.RouteSelection:
		return 3
	case trace.PolicySelection:
		if p := Phase(e); p == "" || p == "route" {
			return 4
		}
	case trace.BackendCallStart:
		return 7
	case trace.BackendCallResult:
		return 8
	case trace.ResponseSnapshot:
		switch e.Stage() {
		case trace.StageBackendResponseReady:
			return 9
		case trace.StageFinalResponse:
			return 10
		}
	case trace.RequestFinished:
		return 11
	}
	return -1
}

// Name is a readable name of an event: its type, with the stage or phase.
func Name(e trace.Event) string {
	n := string(e.Type())
	if s := e.Stage(); s != "" {
		n += " (" + s + ")"
	}
	if p := Phase(e); p != "" {
		n += " (phase " + p + ")"
	}
	return n
}

// Phase is message.phase of a policySelection event of newer proxies, or "".
func Phase(e trace.Event) string {
	p, _ := e.Message["phase"].(string)
	return p
}

// timed are the spec-named event types that may carry eventStart.
var timed = map[trace.MessageType]bool{trace.BackendCallResult: true}

var known = map[trace.MessageType]bool{
	trace.RequestStarted: true, trace.RequestSnapshot: true, trace.RouteSelection: true,
	trace.PolicySelection: true, trace.BackendCallStart: true, trace.BackendCallResult: true,
	trace.ResponseSnapshot: true, trace.RequestFinished: true,
}

// Check runs every rule on one trace and returns the violations, none for a
// conforming trace.
func Check(events []trace.Event) []Violation {
	var out []Violation
	out = append(out, CheckOneRequest(events)...)
	out = append(out, CheckRequired(events)...)
	out = append(out, CheckOrder(events)...)
	out = append(out, CheckEventEnd(events)...)
	out = append(out, CheckEventStart(events)...)
	out = append(out, CheckShape(events)...)
	return out
}

// CheckOneRequest: a trace covers exactly one request, so it has exactly one
// requestStarted and one requestFinished.
func CheckOneRequest(events []trace.Event) []Violation {
	var out []Violation
	for _, t := range []trace.MessageType{trace.RequestStarted, trace.RequestFinished} {
		if n := count(events, t); n > 1 {
			out = append(out, Violation{Rule: ruleOneRequest, Message: fmt.Sprintf("more than one request: %d %s events, want 1", n, t)})
		}
	}
	return out
}

// CheckRequired: requestStarted, routeSelection, the policySelection of the
// matched route (when a route was selected), backendCallStart and
// backendCallResult together (when the request was forwarded), the
// final-response snapshot and requestFinished.
func CheckRequired(events []trace.Event) []Violation {
	want := []string{string(trace.RequestStarted), string(trace.RouteSelection)}
	if routeSelected(events) {
		want = append(want, string(trace.PolicySelection))
	}
	if count(events, trace.BackendCallStart) > 0 || count(events, trace.BackendCallResult) > 0 {
		want = append(want, string(trace.BackendCallStart), string(trace.BackendCallResult))
	}
	want = append(want, "responseSnapshot (final response)", string(trace.RequestFinished))
	var out []Violation
	for _, w := range want {
		if !has(events, w) {
			out = append(out, Violation{Rule: ruleRequired, Message: "missing " + w})
		}
	}
	return out
}

func has(events []trace.Event, name string) bool {
	for _, e := range events {
		switch {
		case name == string(trace.PolicySelection) && rank(e) == 4:
			return true
		case name != string(trace.PolicySelection) && (string(e.Type()) == name || Name(e) == name):
			return true
		}
	}
	return false
}

func routeSelected(events []trace.Event) bool {
	for _, e := range events {
		if e.Type() == trace.RouteSelection {
			s, _ := e.Message["selectedRoute"].(string)
			return s != ""
		}
	}
	return false
}

func count(events []trace.Event, t trace.MessageType) int {
	n := 0
	for _, e := range events {
		if e.Type() == t {
			n++
		}
	}
	return n
}

// CheckOrder: the events the spec names follow its fixed order; events it
// does not name are ignored. A retried upstream call may repeat
// backendCallStart/backendCallResult. Newer proxies' gateway-phase
// policySelection must come before routeSelection.
func CheckOrder(events []trace.Event) []Violation {
	var out []Violation
	last, lastName := -1, ""
	routeAt := -1
	for i, e := range events {
		if e.Type() == trace.RouteSelection && routeAt < 0 {
			routeAt = i
		}
		r := rank(e)
		if r < 0 {
			continue
		}
		retry := r == 7 && last == 8
		if !retry && r <= last {
			out = append(out, Violation{Rule: ruleOrder, Event: i + 1,
				Message: fmt.Sprintf("%s out of order: it comes after %s; the spec's order is %s", Name(e), lastName, strings.Join(order, ", "))})
			continue
		}
		last, lastName = r, Name(e)
	}
	for i, e := range events {
		if e.Type() == trace.PolicySelection && Phase(e) == "gateway" && routeAt >= 0 && i > routeAt {
			out = append(out, Violation{Rule: ruleOrder, Event: i + 1, Message: "policySelection (phase gateway) out of order: it comes after routeSelection"})
		}
	}
	return out
}

// order is the fixed order of spec part 3.
var order = []string{
	"requestStarted", "requestSnapshot (initial request)", "requestSnapshot (gateway policies)",
	"routeSelection", "policySelection", "requestSnapshot (route policies)", "requestSnapshot (final request)",
	"backendCallStart", "backendCallResult", "responseSnapshot (backend response ready)",
	"responseSnapshot (final response)", "requestFinished",
}

// CheckEventEnd: eventEnd never decreases within one trace.
func CheckEventEnd(events []trace.Event) []Violation {
	var out []Violation
	for i := 1; i < len(events); i++ {
		if events[i].EventEnd < events[i-1].EventEnd {
			out = append(out, Violation{Rule: ruleEventEnd, Event: i + 1,
				Message: fmt.Sprintf("eventEnd decreases: %s has eventEnd %d after %d", Name(events[i]), events[i].EventEnd, events[i-1].EventEnd)})
		}
	}
	return out
}

// CheckEventStart: eventStart is null on the point events the spec names and
// set on backendCallResult; where set it is not after eventEnd. Event types
// the spec does not name may be timed.
func CheckEventStart(events []trace.Event) []Violation {
	var out []Violation
	for i, e := range events {
		switch {
		case e.EventStart != nil && known[e.Type()] && !timed[e.Type()]:
			out = append(out, Violation{Rule: ruleEventStart, Event: i + 1, Message: fmt.Sprintf("eventStart on a point event: %s has eventStart %d, want null", Name(e), *e.EventStart)})
		case e.EventStart == nil && timed[e.Type()]:
			out = append(out, Violation{Rule: ruleEventStart, Event: i + 1, Message: fmt.Sprintf("%s has no eventStart; it is a timed event", Name(e))})
		case e.EventStart != nil && *e.EventStart > e.EventEnd:
			out = append(out, Violation{Rule: ruleEventStart, Event: i + 1, Message: fmt.Sprintf("%s starts at %d, after its end %d", Name(e), *e.EventStart, e.EventEnd)})
		}
	}
	return out
}

// CheckShape: each spec-named event carries its fields with the types of
// spec part 2.1. Extra fields are allowed.
func CheckShape(events []trace.Event) []Violation {
	var out []Violation
	bad := func(i int, format string, a ...any) {
		out = append(out, Violation{Rule: ruleShape, Event: i + 1, Message: fmt.Sprintf(format, a...)})
	}
	for i, e := range events {
		if e.Message == nil {
			bad(i, "no message object")
			continue
		}
		if e.Type() == "" {
			bad(i, "message.type missing or not a string")
		}
		if e.Severity == "" {
			bad(i, "severity missing")
		}
		m := e.Message
		switch e.Type() {
		case trace.RequestSnapshot, trace.ResponseSnapshot:
			if _, ok := m["stage"].(string); !ok {
				bad(i, "%s has no string stage", e.Type())
			}
			st, ok := m["requestState"].(map[string]any)
			if !ok {
				bad(i, "%s has no requestState object", Name(e))
			}
			for _, msg := range stateTypes(st) {
				bad(i, "%s: %s", Name(e), msg)
			}
		case trace.RouteSelection:
			if s, ok := m["selectedRoute"]; ok && s != nil {
				if _, ok := s.(string); !ok {
					bad(i, "routeSelection.selectedRoute is %T, want a string", s)
				}
			}
			if r, ok := m["evaluatedRoutes"]; ok && r != nil {
				list, ok := r.([]any)
				if !ok {
					bad(i, "routeSelection.evaluatedRoutes is %T, want an array", r)
				}
				for _, x := range list {
					if _, ok := x.(string); !ok {
						bad(i, "routeSelection.evaluatedRoutes holds %T %v, want strings", x, x)
					}
				}
			}
		case trace.PolicySelection:
			if _, ok := m["effectivePolicy"].(map[string]any); !ok {
				bad(i, "policySelection has no effectivePolicy object")
			}
		case trace.BackendCallStart:
			t, ok := m["target"].(string)
			if !ok {
				bad(i, "backendCallStart has no string target")
			} else if _, port, err := net.SplitHostPort(t); err != nil || port == "" {
				bad(i, "backendCallStart.target %q is not host:port", t)
			}
		case trace.BackendCallResult:
			_, hasErr := m["error"]
			s, ok := m["status"].(float64)
			if !hasErr && !ok {
				bad(i, "backendCallResult has neither a status nor an error")
			}
			if ok && s != float64(int(s)) {
				bad(i, "backendCallResult.status %v is not an integer", s)
			}
		}
	}
	return out
}

// stateTypes checks the fields of a snapshot's requestState that are
// present against the types of spec part 2.1. A field that is absent is not
// a type error (which fields a snapshot must carry is a separate check).
func stateTypes(st map[string]any) []string {
	var out []string
	want := func(path, what string, ok func(any) bool) {
		if v, present := Lookup(st, path); present && v != nil && !ok(v) {
			out = append(out, fmt.Sprintf("requestState %s is %s, want %s", path, show(v), what))
		}
	}
	str := func(v any) bool { _, ok := v.(string); return ok }
	obj := func(v any) bool { _, ok := v.(map[string]any); return ok }
	integer := func(v any) bool { f, ok := v.(float64); return ok && f == float64(int64(f)) }
	for _, f := range []string{"request.method", "request.path", "request.pathAndQuery", "request.host", "request.scheme",
		"source.address", "source.rawAddress", "backend.name", "backend.type", "backend.protocol"} {
		want(f, "a string", str)
	}
	for _, f := range []string{"request.headers", "response.headers", "backend", "env"} {
		want(f, "an object", obj)
	}
	for _, f := range []string{"source.port", "source.rawPort", "response.code"} {
		want(f, "an integer", integer)
	}
	want("request.uri", "an absolute URI", func(v any) bool {
		s, _ := v.(string)
		u, err := url.Parse(s)
		return err == nil && u.IsAbs() && u.Host != ""
	})
	want("request.version", "an HTTP version such as HTTP/1.1", func(v any) bool {
		s, _ := v.(string)
		return httpVersion.MatchString(s)
	})
	want("request.startTime", "an ISO 8601 UTC timestamp", func(v any) bool {
		s, _ := v.(string)
		t, err := time.Parse(time.RFC3339Nano, s)
		_, offset := t.Zone()
		return err == nil && offset == 0
	})
	return out
}

var httpVersion = regexp.MustCompile(`^HTTP/\d(\.\d)?$`)

func show(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 80 {
		b = append(b[:80], "..."...)
	}
	return fmt.Sprintf("%T %s", v, b)
}

// Lookup returns the value at a dotted path in a snapshot's requestState,
// accepting both nested objects ({"request": {"method": ...}}) and flat
// dotted keys ({"request.method": ...}).
func Lookup(state map[string]any, path string) (any, bool) {
	if v, ok := state[path]; ok {
		return v, true
	}
	head, rest, found := strings.Cut(path, ".")
	if !found {
		return nil, false
	}
	sub, ok := state[head].(map[string]any)
	if !ok {
		return nil, false
	}
	return Lookup(sub, rest)
}

// State returns message.requestState of a snapshot event, or nil.
func State(e trace.Event) map[string]any {
	s, _ := e.Message["requestState"].(map[string]any)
	return s
}

// Find returns the first event with the given name (a type, or a type with
// its stage as Name prints it), or false.
func Find(events []trace.Event, name string) (trace.Event, bool) {
	for _, e := range events {
		if string(e.Type()) == name || Name(e) == name {
			return e, true
		}
	}
	return trace.Event{}, false
}
