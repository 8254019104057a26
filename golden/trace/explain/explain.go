// Package explain says, in one line, why a traced request ended as it
// did: `429 from route default/api: localRateLimit[1] (1000 tokens per
// minute) exhausted, resets in 42 s`. It reads the events of one trace as
// they come (Explainer), so a live stream, a saved capture and the viewer
// share one verdict.
//
// refproxy's traces carry reasons (routeSelection.reasons, `policy` and
// `policyEvent` events, requestFinished.cause; docs/admin.md). A proxy
// that gives none, such as agentgateway today, still gets what its trace
// shows: the status, the route, the backend's answer or error, and the
// x-ratelimit-* headers, with the note that the proxy gave no reason.
//
// It reads leniently: unknown events and fields are ignored, a field of
// an unexpected type counts as absent, and nothing here fails.
package explain

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gwdiag/gwdiag/golden/duration"
	"github.com/gwdiag/gwdiag/golden/trace"
)

// NoReason ends the verdict of a trace without reasons.
const NoReason = "the proxy gave no reason"

// Verdict is why one request ended as it did.
type Verdict struct {
	// Status is the status the client received, 0 when the trace does
	// not tell.
	Status int
	// Route is the selected route's key, "" when none was.
	Route string
	// Line is the verdict in one line.
	Line string
	// Details are the reasons behind it, one per line: each route's,
	// each policy's, the backend call's.
	Details []string
	// Reasons: the proxy's trace carried reasons (not only deduced).
	Reasons bool
	// Cause is the proxy's cause kind for a status the backend did not
	// give (requestFinished.cause.kind), "" without one.
	Cause string
	// Complete: the trace reached requestFinished.
	Complete bool
	// Request is the request as the proxy received it (its first
	// snapshot), for what a cluster's routes would have made of it.
	Request Request
}

// Request is what a trace shows of its request.
type Request struct {
	Method, Path, Host string
	// Query is the raw query, without "?".
	Query string
	// Headers by lower-case name (repeats joined with ",").
	Headers map[string]string
}

// Explainer reads one trace's events in order; Verdict can be asked at
// any point (the viewer asks after each event).
type Explainer struct {
	events   int
	complete bool

	method, path, host, query string
	headers                   map[string]string

	routeSeen  bool
	route      string
	listener   string
	evaluated  int
	routes     []RouteReason
	reasonSeen bool

	policies []policyResult
	// charges are refproxy's notes of what a limit took after the
	// response; notes the other policyEvents (a proxy's reasons).
	charges, notes []string

	target        string
	backendStatus int
	backendErr    string

	finalCode    int
	finalHeaders map[string]any

	finishedStatus int
	finishedErr    string
	cause          *trace.Cause
	warnings       []string
}

// RouteReason is one route's verdict, as routeSelection.reasons carries
// it (and a what-if computes it).
type RouteReason = trace.RouteReason

type policyResult struct {
	kind string
	trace.PolicyOutcome
}

// Events explains a whole trace.
func Events(evs []trace.Event) Verdict {
	var x Explainer
	for _, e := range evs {
		x.Add(e)
	}
	return x.Verdict()
}

// Add reads one event.
func (x *Explainer) Add(e trace.Event) {
	x.events++
	m := e.Message
	switch e.Type() {
	case trace.RequestSnapshot:
		if x.method == "" {
			req := trace.Object(trace.Object(m["requestState"])["request"])
			x.method, x.path, x.host = trace.String(req["method"]), trace.String(req["path"]), trace.String(req["host"])
			if _, q, ok := strings.Cut(trace.String(req["pathAndQuery"]), "?"); ok {
				x.query = q
			}
			x.headers = map[string]string{}
			for k, v := range trace.Object(req["headers"]) {
				x.headers[strings.ToLower(k)] = trace.String(v)
			}
		}
	case trace.RouteSelection:
		x.routeSeen = true
		x.route = trace.String(m["selectedRoute"])
		x.listener = trace.String(m["listener"])
		if ev, ok := m["evaluatedRoutes"].([]any); ok {
			x.evaluated = len(ev)
		}
		var rs []RouteReason
		if trace.DecodeReason(m["reasons"], &rs) {
			x.reasonSeen = true
			x.routes = rs
		}
	case trace.PolicyResultType:
		p := policyResult{kind: trace.String(m["kind"])}
		trace.DecodeReason(m["result"], &p.PolicyOutcome)
		x.policies = append(x.policies, p)
	case trace.PolicyEvent:
		d := trace.String(m["details"])
		if d == "" {
			if b, err := json.Marshal(m["details"]); err == nil && string(b) != "null" {
				d = string(b)
			}
		}
		switch kind := trace.String(m["kind"]); {
		case d == "":
		case kind == "localRateLimit" || kind == "remoteRateLimit":
			x.charges = append(x.charges, kind+": "+d)
		default:
			x.notes = append(x.notes, kind+": "+d)
		}
	case trace.BackendCallStart:
		x.target = trace.String(m["target"])
	case trace.BackendCallResult:
		if retry, _ := m["retry"].(bool); retry {
			return
		}
		x.backendStatus = trace.Int(m["status"])
		x.backendErr = trace.String(m["error"])
	case trace.ResponseSnapshot:
		if e.Stage() == trace.StageFinalResponse || x.finalCode == 0 {
			resp := trace.Object(trace.Object(m["requestState"])["response"])
			if c := trace.Int(resp["code"]); c != 0 {
				x.finalCode = c
				x.finalHeaders = trace.Object(resp["headers"])
			}
		}
	case trace.RequestFinished:
		x.complete = true
		x.finishedStatus = trace.Int(m["status"])
		x.finishedErr = trace.String(m["error"])
		x.cause = nil
		if c := new(trace.Cause); trace.DecodeReason(m["cause"], c) {
			x.cause = c
		}
		if ws, ok := m["warnings"].([]any); ok {
			for _, w := range ws {
				x.warnings = append(x.warnings, trace.String(w))
			}
		}
	}
}

// Verdict is the explanation of the events read so far.
func (x *Explainer) Verdict() Verdict {
	v := Verdict{Route: x.route, Complete: x.complete, Status: x.status(),
		Request: Request{Method: x.method, Path: x.path, Host: x.host, Query: x.query, Headers: x.headers}}
	v.Reasons = x.reasonSeen || len(x.policies) > 0 || x.cause != nil || len(x.notes) > 0 || len(x.charges) > 0
	if x.cause != nil {
		v.Cause = x.cause.Kind
	}
	v.Line = x.line(v)
	if !x.complete && x.events > 0 {
		v.Line += fmt.Sprintf(" (trace incomplete: %d %s, no requestFinished)", x.events, Plural(x.events, "event", "events"))
	}
	v.Details = x.details()
	return v
}

// status is what the client received: the final response snapshot's
// code, else requestFinished's status, else the backend's.
func (x *Explainer) status() int {
	switch {
	case x.finalCode != 0:
		return x.finalCode
	case x.finishedStatus != 0:
		return x.finishedStatus
	}
	return x.backendStatus
}

func (x *Explainer) line(v Verdict) string {
	if x.events == 0 {
		return "no events"
	}
	code := "status unknown"
	if v.Status != 0 {
		code = strconv.Itoa(v.Status)
	}
	from := code
	if x.route != "" {
		from = code + " from route " + ShortRoute(x.route)
	}
	if x.cause != nil {
		return from + ": " + x.causeText()
	}
	if !v.Reasons {
		return x.deduced(code, from)
	}
	if x.routeSeen && x.route == "" {
		return code + ": " + x.noRoute()
	}
	// The backend gave the status.
	s := from
	if len(x.notes) > 0 && x.target == "" {
		return s + ": " + strings.Join(x.notes, "; ")
	}
	switch {
	case x.backendErr != "":
		s += ": backend " + x.target + " failed: " + x.backendErr
	case x.target != "":
		s += ": backend " + x.target + " answered " + strconv.Itoa(x.backendStatus)
	}
	if l := x.limitState(); l != "" {
		s += "; " + l
	}
	if x.finishedErr != "" {
		s += "; the body failed afterwards: " + x.finishedErr
	}
	for _, p := range x.policies {
		if p.Type == "skip" && p.kind != "localRateLimit" && p.kind != "remoteRateLimit" {
			s += "; " + p.kind + " skipped: " + p.Reason
		}
	}
	if len(x.notes) > 0 {
		s += "; " + strings.Join(x.notes, "; ")
	}
	return s
}

// Plural is one for n == 1, else many: the one way the project's
// explanations count ("1 key", "3 keys").
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// causeText is the proxy's cause in the verdict's words, from the
// structured reasons where the trace has them.
func (x *Explainer) causeText() string {
	reason := x.cause.Reason
	switch x.cause.Kind {
	case "noRoute":
		if len(x.routes) > 0 {
			return x.noRoute()
		}
		return reason
	case "rateLimit":
		if p := x.policy(x.cause.Policy); p != nil {
			if s := refusedEntries(p); s != "" {
				return s
			}
			if p.Details != "" {
				return p.kind + ": " + p.Details
			}
		}
		return reason
	case "rateLimitServiceUnavailable":
		if p := x.policy("remoteRateLimit"); p != nil && p.Details != "" {
			return "remoteRateLimit: " + p.Details
		}
		return reason
	case "backendUnreachable", "backendError", "backendBody", "noBackend", "clientBody":
		return reason
	}
	return reason
}

// noRoute says why no route took the request.
func (x *Explainer) noRoute() string {
	return NoRoute(x.routes, x.listener, x.host, x.path, x.evaluated)
}

// NoRoute says why no route took a request, from each route's reason: the
// route that came closest and why first (a narrow screen cuts the end),
// then how many routes of which listener were tried; the path alone when
// every route failed on it.
func NoRoute(routes []RouteReason, listener, host, path string, evaluated int) string {
	var best *RouteReason
	n := 0
	for i := range routes {
		r := &routes[i]
		if r.Result != "noMatch" || r.Condition == "listener" {
			continue
		}
		n++
		if best == nil || depth(r.Condition) > depth(best.Condition) {
			best = r
		}
	}
	on := ""
	if listener != "" {
		on = " on " + shortListener(listener)
	}
	switch {
	case best == nil && len(routes) > 0:
		return fmt.Sprintf("no listener serves host %q", host)
	case best == nil:
		return fmt.Sprintf("no route matched (%d evaluated%s)", evaluated, on)
	case best.Condition == "path" && n > 1:
		return fmt.Sprintf("no route matches path %q (%d routes%s)", path, n, on)
	case n == 1:
		return fmt.Sprintf("no route matched: %s: %s", ShortRoute(best.Route), best.Reason)
	}
	return fmt.Sprintf("no route matched; closest, %s: %s (%d routes%s)", ShortRoute(best.Route), best.Reason, n, on)
}

func depth(condition string) int {
	switch condition {
	case "hostname":
		return 1
	case "path":
		return 2
	case "method":
		return 3
	case "header":
		return 4
	case "query":
		return 5
	}
	return 0
}

func (x *Explainer) policy(kind string) *policyResult {
	for i := len(x.policies) - 1; i >= 0; i-- {
		if x.policies[i].kind == kind && x.policies[i].Type == "apply" {
			return &x.policies[i]
		}
	}
	return nil
}

// refusedEntries names the local limit entries that refused:
// "localRateLimit[1] (1000 tokens per minute) exhausted, resets in 42 s".
func refusedEntries(p *policyResult) string {
	var parts []string
	for _, e := range p.Entries {
		if !e.Refused {
			continue
		}
		s := fmt.Sprintf("%s[%d]", p.kind, e.Index)
		if e.Policy != "" {
			s += " of policy " + e.Policy
		}
		s += " (" + describeEntry(e) + ")"
		if e.Key != nil {
			// An entry with a key (a bucket per key): which bucket refused.
			if b := e.Bucket.Value; b != nil {
				s += fmt.Sprintf(" for key %q (key %s)", *b, *e.Key)
			} else {
				s += fmt.Sprintf(" in the bucket of requests without a key (key %s)", *e.Key)
			}
		}
		if e.Remaining == nil || *e.Remaining == 0 {
			s += " exhausted"
		} else {
			s += fmt.Sprintf(" has %d left", *e.Remaining)
		}
		if e.ResetSeconds != nil {
			s += fmt.Sprintf(", resets in %d s", *e.ResetSeconds)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// describeEntry is a limit entry in words: "1000 tokens per minute",
// "3 requests per second, bucket of 6".
func describeEntry(e trace.LimitEntry) string {
	typ := e.Type
	if typ == "" {
		typ = "requests"
	}
	if e.TokensPerFill == 1 {
		typ = strings.TrimSuffix(typ, "s")
	}
	s := fmt.Sprintf("%d %s per %s", e.TokensPerFill, typ, per(e.FillInterval))
	if e.MaxTokens != e.TokensPerFill && e.MaxTokens != 0 {
		s += fmt.Sprintf(", bucket of %d", e.MaxTokens)
	}
	return s
}

// per is a fill interval as the trace writes it ("60s"), as a unit.
func per(interval string) string {
	d, err := time.ParseDuration(interval)
	if err != nil {
		return interval
	}
	return Per(d)
}

// Per is a limit's fill interval as a unit, the one way the producer of
// the reasons (refproxy) and their reader say it: "second", "minute",
// "hour", or the duration as configs write it ("30s").
func Per(d time.Duration) string {
	switch d {
	case time.Second:
		return "second"
	case time.Minute:
		return "minute"
	case time.Hour:
		return "hour"
	}
	return duration.Duration(d).String()
}

// limitState is the local limits' state after an allowed request, when
// the trace tells it.
func (x *Explainer) limitState() string {
	p := x.policy("localRateLimit")
	if p == nil || p.Decision != "allowed" {
		return ""
	}
	var parts []string
	for _, e := range p.Entries {
		if e.Remaining == nil {
			continue
		}
		parts = append(parts, fmt.Sprintf("localRateLimit[%d] %d of %d left", e.Index, *e.Remaining, e.MaxTokens))
	}
	return strings.Join(parts, ", ")
}

// deduced is the verdict of a trace without reasons: what its events show.
func (x *Explainer) deduced(code, from string) string {
	var s string
	switch {
	case x.routeSeen && x.route == "":
		s = fmt.Sprintf("%s: no route selected (%d evaluated)", code, x.evaluated)
	case x.backendErr != "":
		s = from + ": backend " + x.target + " failed: " + x.backendErr
	case x.target != "" && x.backendStatus != 0 && x.backendStatus == x.status():
		s = from + ": backend " + x.target + " answered " + strconv.Itoa(x.backendStatus)
	case x.target != "" && x.backendStatus != 0:
		s = fmt.Sprintf("%s: backend %s answered %d, the proxy answered %s", from, x.target, x.backendStatus, code)
	case x.status() == 429 || headerValue(x.finalHeaders, "x-ratelimit-remaining") == "0":
		s = from + ": rate limited, not forwarded"
	case x.target == "" && x.route != "":
		s = from + ": answered by the proxy, not forwarded"
	default:
		s = from
	}
	if h := x.rateLimitHeaders(); h != "" {
		s += " (" + h + ")"
	}
	if x.finishedErr != "" {
		s += "; " + x.finishedErr
	}
	return s + "; " + NoReason
}

// rateLimitHeaders are the final response's x-ratelimit-* headers.
func (x *Explainer) rateLimitHeaders() string {
	var parts []string
	for _, h := range []string{"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"} {
		if v := headerValue(x.finalHeaders, h); v != "" {
			parts = append(parts, strings.TrimPrefix(h, "x-ratelimit-")+" "+v)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "x-ratelimit " + strings.Join(parts, ", ")
}

func headerValue(h map[string]any, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return trace.String(v)
		}
	}
	return ""
}

// details are the reasons behind the verdict, one per line.
func (x *Explainer) details() []string {
	var out []string
	if x.method != "" || x.path != "" {
		out = append(out, strings.TrimSpace(fmt.Sprintf("request: %s %s (host %s)", x.method, x.path, x.host)))
	}
	if x.listener != "" {
		out = append(out, "listener: "+x.listener)
	}
	for _, r := range x.routes {
		out = append(out, fmt.Sprintf("route %s: %s: %s", r.Route, r.Result, r.Reason))
	}
	if x.routeSeen && len(x.routes) == 0 {
		if x.route != "" {
			out = append(out, fmt.Sprintf("route: %s (%d evaluated)", x.route, x.evaluated))
		} else {
			out = append(out, fmt.Sprintf("route: none selected (%d evaluated)", x.evaluated))
		}
	}
	for _, p := range x.policies {
		switch p.Type {
		case "skip":
			out = append(out, fmt.Sprintf("policy %s skipped: %s", p.kind, p.Reason))
		default:
			out = append(out, fmt.Sprintf("policy %s: %s", p.kind, p.Details))
		}
	}
	if x.target != "" {
		s := "backend " + x.target + ": "
		if x.backendErr != "" {
			s += "error " + x.backendErr
		} else {
			s += "status " + strconv.Itoa(x.backendStatus)
		}
		out = append(out, s)
	}
	out = append(out, x.charges...)
	if x.cause != nil {
		out = append(out, "cause "+x.cause.Kind+": "+x.cause.Reason)
	}
	for _, w := range x.warnings {
		out = append(out, "warning: "+w)
	}
	return out
}

// shortListener is a listener key as a person reads it: a standalone key
// ("default/default/bind/3000/listener0") from its bind; others whole.
func shortListener(key string) string {
	if i := strings.Index(key, "/bind/"); i >= 0 {
		return key[i+1:]
	}
	return key
}

// ShortRoute is a route key as a person reads it: a standalone key
// ("default/default/bind/3000/listener0/default/api") as its route's
// namespace/name; other keys (a cluster's "ns/route.00.http") whole.
func ShortRoute(key string) string {
	if !strings.Contains(key, "/bind/") {
		return key
	}
	parts := strings.Split(key, "/")
	if len(parts) < 2 {
		return key
	}
	return strings.Join(parts[len(parts)-2:], "/")
}
