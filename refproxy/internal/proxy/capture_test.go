package proxy

import (
	"bytes"
	"encoding/json"
	"net"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"cel.dev/cel-go/cel"
	"github.com/valyala/fasthttp"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/refproxy/internal/tracing"
)

// captureConfig has routes that fail on path, on a header and on the
// method, sensitive headers, and the route that takes the request.
const captureConfig = `
config:
  sensitiveHeaders: [authorization]
binds:
- port: 0
  listeners:
  - routes:
    - name: other
      matches: [{path: {exact: /other}}]
      backends: [{host: "127.0.0.1:1"}]
    - name: blue
      matches: [{path: {pathPrefix: /}, headers: [{name: x-team, value: {exact: blue}}]}]
      backends: [{host: "127.0.0.1:1"}]
    - name: posts
      matches: [{path: {pathPrefix: /}, method: POST}]
      backends: [{host: "127.0.0.1:1"}]
    - name: limited
      matches: [{path: {exact: /limited}}]
      policies:
        localRateLimit: [{maxTokens: 1, tokensPerFill: 1, fillInterval: 1h}]
      backends: [{host: "127.0.0.1:1"}]
    - name: down
      matches: [{path: {exact: /down}}]
      backends: [{host: "127.0.0.1:2"}]
    - name: httpbin
      matches: [{path: {pathPrefix: /}}]
      backends: [{host: "127.0.0.1:1"}]
`

// normalised is a trace's events as JSON, without what differs from one
// run to the next or between a one-shot and a follow stream: times,
// requestId and requestFinished's timings.
func normalised(t *testing.T, evs []trace.Event) []string {
	t.Helper()
	var out []string
	for _, e := range evs {
		e.EventStart, e.EventEnd, e.RequestID = nil, 0, ""
		if st, ok := e.Message["requestState"].(map[string]any); ok {
			if r, ok := st["request"].(map[string]any); ok {
				delete(r, "startTime")
				if h, ok := r["headers"].(map[string]any); ok {
					delete(h, "x-request-id")
				}
			}
		}
		delete(e.Message, "timings")
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// drainEvents drains w and reads its frames as a stream's reader does.
// Each frame must be, byte for byte, what json.Marshal writes for the
// event it parses to: compact, keys in encoding/json's order, strings
// escaped as it escapes them (the proxy writes events straight to bytes;
// Capture.Render).
func drainEvents(t testing.TB, w *tracing.Watcher) (evs []trace.Event, dropped int, final *trace.Event) {
	t.Helper()
	frames, dropped, fin := w.Drain()
	all := append(append([]byte(nil), frames...), fin...)
	evs, err := tracing.ParseFrames(all)
	if err != nil {
		t.Fatal(err)
	}
	for i, rest := 0, all; len(rest) > 0; i++ {
		var f []byte
		f, rest, _ = bytes.Cut(rest, []byte("\n\n"))
		want, err := json.Marshal(evs[i])
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if got := bytes.TrimPrefix(f, []byte("data: ")); !bytes.Equal(got, want) {
			t.Errorf("event %d %s: the proxy wrote\n%s\njson.Marshal writes\n%s", i, evs[i].Type(), got, want)
		}
	}
	if fin != nil {
		final = &evs[len(evs)-1]
		evs = evs[:len(evs)-1]
	}
	return evs, dropped, final
}

// traceOf serves e's request through h and returns its trace, its
// requestFinished last: taken by a one-shot watcher of dp, or, with
// outcome set, held by a follow watcher for that outcome filter and sent
// if it keeps it.
func traceOf(t testing.TB, dp *Dataplane, h fasthttp.RequestHandler, e *exchange, outcome cel.Program) []trace.Event {
	t.Helper()
	var w *tracing.Watcher
	if outcome != nil {
		w = mustFollow(t, dp, tracing.FollowOptions{Duration: time.Minute, Outcome: outcome})
	} else {
		w = dp.reg.Watch(nil)
	}
	e.serve(h)
	evs, _, final := drainEvents(t, w)
	w.Cancel()
	if final != nil {
		evs = append(evs, *final)
	}
	return evs
}

// unfilledAllocs is what e's request allocates under one follow watcher
// of o that must send nothing: its outcome filter drops every trace, or
// its CEL filter takes none.
func unfilledAllocs(t *testing.T, e *exchange, o tracing.FollowOptions) float64 {
	t.Helper()
	dp, h := newBenchHandler(t, false)
	w := mustFollow(t, dp, o)
	defer w.Cancel()
	n := testing.AllocsPerRun(500, func() { e.serve(h) })
	if evs, _, _ := drainEvents(t, w); len(evs) != 0 {
		t.Fatalf("the watcher's filter took %d events", len(evs))
	}
	return n
}

// heldFor is outcome when held, else nil (traceOf's one-shot watcher).
func heldFor(held bool, outcome cel.Program) cel.Program {
	if held {
		return outcome
	}
	return nil
}

// TestHeldTraceRendersAsOneShot: a trace held for an outcome filter and
// rendered when the filter keeps it is the trace a one-shot watcher gets
// of the same request, event for event and field for field: a forwarded
// request (route reasons, redacted and repeated headers, percent-encoded
// path), one refused by a local limit and one whose backend cannot be
// reached (events built eagerly, with causes). Each kind of watcher has
// its own data plane, so that both see the same limits.
func TestHeldTraceRendersAsOneShot(t *testing.T) {
	dpOne, hOne := newBenchHandlerFor(t, false, captureConfig)
	dpHeld, hHeld := newBenchHandlerFor(t, false, captureConfig)
	for _, rt := range dpOne.table.Load().binds[0].listeners[0].routes {
		if strings.HasSuffix(rt.key, "/down") {
			rt.backends[0].do = unreachableBackend
		}
	}
	for _, rt := range dpHeld.table.Load().binds[0].listeners[0].routes {
		if strings.HasSuffix(rt.key, "/down") {
			rt.backends[0].do = unreachableBackend
		}
	}
	all := mustOutcome(t, `response.code >= 0`)
	for _, c := range []struct {
		name, uri string
		status    int
	}{
		{"forwarded", "/a%20b/c?x=1&y=2", 200},
		{"limited, admitted", "/limited", 200},
		{"limited, refused", "/limited", 429},
		{"backend unreachable", "/down", 503},
	} {
		e := newExchange()
		e.req.SetRequestURI(c.uri)
		e.req.Header.Set("Authorization", "Bearer secret")
		e.req.Header.Add("X-Multi", "one")
		e.req.Header.Add("X-Multi", "two")
		e.req.Header.Set("X-Team", "red")
		e.req.Header.Set("X-Request-Id", "fixed-id")

		evs := traceOf(t, dpOne, hOne, e, nil)
		final := evs[len(evs)-1]
		if final.Type() != trace.RequestFinished {
			t.Fatalf("%s: one-shot watcher: no requestFinished", c.name)
		}
		if code, _ := final.Message["status"].(float64); int(code) != c.status {
			t.Errorf("%s: status %v, want %d", c.name, final.Message["status"], c.status)
		}
		want := normalised(t, evs)

		fevs := traceOf(t, dpHeld, hHeld, e, all)
		if len(fevs) > 0 {
			tm, _ := fevs[len(fevs)-1].Message["timings"].(map[string]any)
			if want := timingsOf(fevs); !reflect.DeepEqual(tm, want) {
				t.Errorf("%s: held requestFinished: timings %v, want %v (from its events' times)", c.name, tm, want)
			}
		}
		for _, ev := range fevs {
			if ev.RequestID != "fixed-id" {
				t.Errorf("%s: held event %s: requestId %q, want fixed-id", c.name, ev.Type(), ev.RequestID)
			}
		}
		got := normalised(t, fevs)
		if len(got) != len(want) {
			t.Errorf("%s: held trace: %d events, one-shot: %d", c.name, len(got), len(want))
			continue
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: event %d:\nheld     %s\none-shot %s", c.name, i, got[i], want[i])
			}
		}
	}
}

// timingsOf is requestFinished's timings as a followed trace's events
// (the last one requestFinished) imply them: from the first
// requestStarted, routeSelection and backendCallStart, and the last
// backendCallResult (its eventStart and eventEnd), as JSON numbers.
func timingsOf(evs []trace.Event) map[string]any {
	var started, route, callStart, result, call float64
	var seenRoute, seenStart, seenResult, seenCall bool
	for _, e := range evs {
		end := float64(e.EventEnd)
		switch e.Type() {
		case trace.RequestStarted:
			if !seenStart {
				started, seenStart = end, true
			}
		case trace.RouteSelection:
			if !seenRoute {
				route, seenRoute = end, true
			}
		case trace.BackendCallStart:
			if !seenCall {
				callStart, seenCall = end, true
			}
		case trace.BackendCallResult:
			result, seenResult = end, true
			if e.EventStart != nil {
				call = float64(*e.EventStart)
			}
		}
	}
	end := float64(evs[len(evs)-1].EventEnd)
	switch {
	case !seenRoute:
		return map[string]any{"totalMicros": end}
	case !seenResult:
		return map[string]any{"policiesMicros": end - route, "routeSelectionMicros": route - started, "totalMicros": end}
	}
	return map[string]any{"backendCallMicros": result - call, "policiesMicros": callStart - route,
		"responseMicros": end - result, "routeSelectionMicros": route - started, "totalMicros": end}
}

func unreachableBackend(*fasthttp.Request, *fasthttp.Response) error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
}

// TestDroppedTraceAllocations reports what a request costs that only an
// outcome filter watches, and that the filter drops (the common case of
// a watcher waiting for a rare 5xx): the tracer, and nothing else (no
// allocation per event; the request id is made a string only for a kept
// trace; the filter's answer for a status is remembered).
func TestDroppedTraceAllocations(t *testing.T) {
	n := unfilledAllocs(t, newExchange(), tracing.FollowOptions{Outcome: mustOutcome(t, `response.code >= 500`)})
	t.Logf("allocs per request held and dropped: %v", n)
	if n > maxDroppedAllocs && !raceEnabled {
		t.Errorf("allocs per request held and dropped = %v, want at most %d (a request's, not an event's)", n, maxDroppedAllocs)
	}
}

// maxDroppedAllocs bounds TestDroppedTraceAllocations: the tracer.
const maxDroppedAllocs = 1

// TestTraceEventsEncodeAsMarshal: every event the proxy traces, of every
// kind here (a forwarded request, with route reasons, redacted and
// repeated headers and a percent-encoded path; one a local limit admits
// and one it refuses, with the policy's reasons; an unreachable backend;
// another route's exact path), one-shot and held for an outcome filter,
// streams as the bytes json.Marshal writes for it (drainEvents): the
// credential headers redacted (an authorization, cookies, an x-api-key
// with HTML characters) and a header the scrubbing pass rewrites (it
// quotes the bearer token, among characters json.Marshal escapes).
func TestTraceEventsEncodeAsMarshal(t *testing.T) {
	dp, h := newBenchHandlerFor(t, false, captureConfig)
	for _, rt := range dp.table.Load().binds[0].listeners[0].routes {
		if strings.HasSuffix(rt.key, "/down") {
			rt.backends[0].do = unreachableBackend
		}
	}
	all := mustOutcome(t, `response.code >= 0`)
	kinds := map[trace.MessageType]bool{}
	scrubbed := false
	for _, uri := range []string{"/a%20b/c?x=<1>&y=\"2\"", "/limited", "/limited", "/down", "/other"} {
		for _, held := range []bool{false, true} {
			e := newExchange()
			e.req.SetRequestURI(uri)
			e.req.Header.Set("Authorization", "Bearer secret-token-0123")
			e.req.Header.Add("X-Multi", "one")
			e.req.Header.Add("X-Multi", "two & <three>")
			e.req.Header.Set("Cookie", "a=cookie-<1>&x; b=2")
			e.req.Header.Set("X-Api-Key", "k<&>ey-0123456789")
			e.req.Header.Set("X-Note", "the token <secret-token-0123> & more")
			evs := traceOf(t, dp, h, e, heldFor(held, all))
			for _, ev := range evs {
				kinds[ev.Type()] = true
				b, _ := json.Marshal(ev)
				if bytes.Contains(b, []byte("secret-token-0123")) || bytes.Contains(b, []byte("cookie-\\u003c1")) || bytes.Contains(b, []byte("ey-0123456789")) {
					t.Errorf("%s %s shows a credential: %s", uri, ev.Type(), b)
				}
				scrubbed = scrubbed || bytes.Contains(b, []byte(`"x-note":"the token \u003c\u003credacted:`))
			}
		}
	}
	if len(kinds) < 9 {
		t.Errorf("event kinds seen %v; want the whole forwarded trace and policies", kinds)
	}
	if !scrubbed {
		t.Error("no x-note scrubbed of the bearer token: the scrubbing pass's output was not held to json.Marshal")
	}
}

// TestAddHeaderLowersAsStrings: a snapshot's header names are what
// strings.ToLower makes of them, for ASCII names of every case, names
// longer than the stack buffer, and names with non-ASCII or invalid
// UTF-8 bytes; repeated names join their values with ",".
func TestAddHeaderLowersAsStrings(t *testing.T) {
	names := []string{"Host", "X-REQUEST-ID", "x-mixed-Case_09", strings.Repeat("Ab", 40), "Ünïcode-Name", "bad\xffByte", "", "ÀB"}
	for _, n := range names {
		m := map[string]any{}
		addHeader(m, []byte(n), []byte("one"))
		addHeader(m, []byte(n), []byte("two"))
		want := map[string]any{strings.ToLower(n): "one,two"}
		if len(m) != 1 || m[strings.ToLower(n)] != want[strings.ToLower(n)] {
			t.Errorf("addHeader(%q) twice = %q, want %q", n, m, want)
		}
	}
}

// TestSnapshotSharedOnlyWhenUnchanged: the route policies snapshot shares
// the initial snapshot's state when the route's policies changed nothing,
// and shows its own when a request header modifier changed the request
// (x-added, x-gone set to another value or removed), held or not; a capture shares the bytes of
// the one before only when the request is the same.
func TestSnapshotSharedOnlyWhenUnchanged(t *testing.T) {
	dp, h := newBenchHandlerFor(t, false, `
binds:
- port: 0
  listeners:
  - routes:
    - name: modified
      matches: [{path: {exact: /modified}}]
      policies:
        requestHeaderModifier: {set: {x-added: "1"}}
      backends: [{host: "127.0.0.1:1"}]
    - name: changed
      matches: [{path: {exact: /changed}}]
      policies:
        requestHeaderModifier: {set: {x-gone: "2"}}
      backends: [{host: "127.0.0.1:1"}]
    - name: removed
      matches: [{path: {exact: /removed}}]
      policies:
        requestHeaderModifier: {remove: [x-gone]}
      backends: [{host: "127.0.0.1:1"}]
    - name: plain
      matches: [{path: {pathPrefix: /}}]
      backends: [{host: "127.0.0.1:1"}]
`)
	all := mustOutcome(t, `response.code >= 0`)
	state := func(evs []trace.Event, stage string) map[string]any {
		for _, e := range evs {
			if e.Type() == trace.RequestSnapshot && e.Stage() == stage {
				st, _ := e.Message["requestState"].(map[string]any)
				return st
			}
		}
		t.Fatalf("no %s snapshot in %d events", stage, len(evs))
		return nil
	}
	for _, held := range []bool{false, true} {
		for _, c := range []struct {
			uri    string
			shared bool
		}{{"/plain", true}, {"/modified", false}, {"/changed", false}, {"/removed", false}} {
			e := newExchange()
			e.req.SetRequestURI(c.uri)
			e.req.Header.Set("X-Gone", "1")
			evs := traceOf(t, dp, h, e, heldFor(held, all))
			initial, route := state(evs, trace.StageInitialRequest), state(evs, trace.StageRoutePolicies)
			hs, _ := route["request"].(map[string]any)["headers"].(map[string]any)
			_, added := hs["x-added"]
			if want := c.uri == "/modified"; added != want {
				t.Errorf("%s (held %v): route policies snapshot has x-added %v, want %v", c.uri, held, added, want)
			}
			_, kept := hs["x-gone"]
			if want := c.uri != "/removed"; kept != want {
				t.Errorf("%s (held %v): route policies snapshot has x-gone %v, want %v", c.uri, held, kept, want)
			}
			wantInitial, _ := json.Marshal(initial)
			gotRoute, _ := json.Marshal(route)
			if same := string(wantInitial) == string(gotRoute); same != c.shared {
				t.Errorf("%s (held %v): route policies state equal to initial's %v, want %v:\n%s\n%s", c.uri, held, same, c.shared, gotRoute, wantInitial)
			}
		}
	}
}
