package explain

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
)

// realTraces are traces the real proxy (agentgateway) and its docs wrote;
// their README names the sources.
const realTraces = "../sse/testdata/agentgateway/"

// TestRealTraces: every real agentgateway trace is explained, without
// error, with what its events show and the note that the proxy gave no
// reason (agctl's one-event fixtures too, as fragments).
func TestRealTraces(t *testing.T) {
	want := map[string]string{
		"k8s-12x.docs.jsonl":                    "200 from route httpbin/httpbin.00.http: backend 10.244.0.7:8080 answered 200; the proxy gave no reason",
		"k8s-latest.docs.jsonl":                 "200 from route httpbin/httpbin.00.http: backend 10.244.0.7:8080 answered 200; the proxy gave no reason",
		"k8s-latest.DERIVED-sse-framing.sse":    "200 from route httpbin/httpbin.00.http: backend 10.244.0.7:8080 answered 200; the proxy gave no reason",
		"standalone-12x.deelided.jsonl":         "200 from route default/httpbin: backend 127.0.0.1:8000 answered 200; the proxy gave no reason",
		"standalone-12x.docs.jsonl":             "200 from route default/httpbin: backend 127.0.0.1:8000 answered 200; the proxy gave no reason",
		"standalone-latest.deelided.jsonl":      "200 from route default/httpbin: backend 127.0.0.1:8000 answered 200; the proxy gave no reason",
		"standalone-latest.docs.jsonl":          "200 from route default/httpbin: backend 127.0.0.1:8000 answered 200; the proxy gave no reason",
		"trace_test-event-INFO-uppercase.jsonl": "status unknown; the proxy gave no reason (trace incomplete: 1 event, no requestFinished)",
		"trace_test-event-lowercase.jsonl":      "status unknown; the proxy gave no reason (trace incomplete: 1 event, no requestFinished)",
		"trace_test-policyEvent-cors.jsonl":     "status unknown: cors: request has no Origin header (trace incomplete: 1 event, no requestFinished)",
		"trace_test-traceSampling.jsonl":        "status unknown; the proxy gave no reason (trace incomplete: 1 event, no requestFinished)",
	}
	files, _ := filepath.Glob(realTraces + "*.*l")
	more, _ := filepath.Glob(realTraces + "*.sse")
	files = append(files, more...)
	if len(files) != len(want) {
		t.Errorf("%d real traces, %d expectations: add the new file's verdict", len(files), len(want))
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			var got []Verdict
			err := sse.ReadTracesFile(f, nil, func(ct sse.CapturedTrace) error {
				got = append(got, Events(ct.TraceEvents()))
				return nil
			})
			var bad *sse.CaptureError
			if err != nil && !errors.As(err, &bad) {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("%d traces, want 1", len(got))
			}
			if got[0].Line != want[name] {
				t.Errorf("verdict:\ngot  %s\nwant %s", got[0].Line, want[name])
			}
			if got[0].Reasons && !strings.Contains(name, "policyEvent") {
				t.Errorf("Reasons = true for a trace of a proxy that gives none")
			}
		})
	}
}

// realEvents reads a real trace's events.
func realEvents(t *testing.T, name string) []trace.Event {
	t.Helper()
	f, err := os.Open(realTraces + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []trace.Event
	if err := sse.ReadCapture(f, name, func(c sse.Captured) error {
		evs = append(evs, c.Event)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestDeducedWithoutReasons: what a trace without reasons shows, for the
// outcomes the real proxy's trace can have: a 429 told by its headers, a
// 404 with no route, a transport error, a status the proxy changed.
func TestDeducedWithoutReasons(t *testing.T) {
	base := realEvents(t, "k8s-12x.docs.jsonl")
	edit := func(f func(i int, e trace.Event) (trace.Event, bool)) []trace.Event {
		var out []trace.Event
		for i, e := range base {
			c := trace.Event{EventStart: e.EventStart, EventEnd: e.EventEnd, Severity: e.Severity, Message: map[string]any{}}
			for k, v := range e.Message {
				c.Message[k] = v
			}
			if n, keep := f(i, c); keep {
				out = append(out, n)
			}
		}
		return out
	}
	final := func(code float64, headers map[string]any) map[string]any {
		return map[string]any{"response": map[string]any{"code": code, "headers": headers}}
	}
	noCall := func(e trace.Event) bool {
		t := e.Type()
		return t == trace.BackendCallStart || t == trace.BackendCallResult || e.Stage() == trace.StageBackendResponseReady || e.Stage() == trace.StageFinalRequest
	}
	tests := []struct {
		name   string
		events []trace.Event
		want   string
	}{
		{"429 with headers", edit(func(_ int, e trace.Event) (trace.Event, bool) {
			if e.Stage() == trace.StageFinalResponse {
				e.Message["requestState"] = final(429, map[string]any{"x-ratelimit-limit": "10", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "42"})
			}
			return e, !noCall(e)
		}), "429 from route httpbin/httpbin.00.http: rate limited, not forwarded (x-ratelimit limit 10, remaining 0, reset 42); the proxy gave no reason"},
		{"no route", edit(func(_ int, e trace.Event) (trace.Event, bool) {
			switch {
			case e.Type() == trace.RouteSelection:
				e.Message["selectedRoute"] = nil
			case e.Stage() == trace.StageFinalResponse:
				e.Message["requestState"] = final(404, nil)
			}
			return e, !noCall(e) && e.Type() != trace.PolicySelection
		}), "404: no route selected (2 evaluated); the proxy gave no reason"},
		{"transport error", edit(func(_ int, e trace.Event) (trace.Event, bool) {
			switch {
			case e.Type() == trace.BackendCallResult:
				e.Message["status"], e.Message["error"] = nil, "connection refused"
			case e.Type() == trace.ResponseSnapshot:
				e.Message["requestState"] = final(503, nil)
			}
			return e, true
		}), "503 from route httpbin/httpbin.00.http: backend 10.244.0.7:8080 failed: connection refused; the proxy gave no reason"},
		{"proxy changed the status", edit(func(_ int, e trace.Event) (trace.Event, bool) {
			if e.Stage() == trace.StageFinalResponse {
				e.Message["requestState"] = final(500, nil)
			}
			return e, true
		}), "500 from route httpbin/httpbin.00.http: backend 10.244.0.7:8080 answered 200, the proxy answered 500; the proxy gave no reason"},
		{"cut before requestFinished", base[:8], "status unknown from route httpbin/httpbin.00.http; the proxy gave no reason (trace incomplete: 8 events, no requestFinished)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Events(tt.events).Line; got != tt.want {
				t.Errorf("verdict:\ngot  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestReasons: refproxy's reasons as its trace carries them (shapes of
// refproxy/internal/proxy/reasons.go; the end-to-end tests in cli/e2e take them from
// the live proxy) make the verdict.
func TestReasons(t *testing.T) {
	ev := func(typ trace.MessageType, fields map[string]any) trace.Event {
		m := map[string]any{"type": string(typ)}
		for k, v := range fields {
			m[k] = v
		}
		return trace.Event{Severity: trace.SeverityInfo, Message: m}
	}
	route := "default/default/bind/3000/listener0/default/api"
	selected := ev(trace.RouteSelection, map[string]any{"selectedRoute": route, "listener": "default/default/bind/3000/listener0",
		"reasons": []any{map[string]any{"route": route, "result": "selected", "reason": `matched path prefix "/api"`}}})
	finished := func(status float64, cause map[string]any) trace.Event {
		return ev(trace.RequestFinished, map[string]any{"status": status, "cause": cause})
	}
	refusal := ev(trace.PolicyResultType, map[string]any{"kind": "localRateLimit", "result": map[string]any{"type": "apply", "decision": "refused",
		"details": "refused by ...", "entries": []any{
			map[string]any{"index": 0.0, "type": "requests", "maxTokens": 100.0, "tokensPerFill": 100.0, "fillInterval": "60s", "remaining": 80.0, "resetSeconds": 42.0},
			map[string]any{"index": 1.0, "type": "tokens", "maxTokens": 1000.0, "tokensPerFill": 1000.0, "fillInterval": "60s", "remaining": 0.0, "resetSeconds": 42.0, "refused": true, "policy": "default/llm"},
		}}})
	tests := []struct {
		name   string
		events []trace.Event
		want   string
	}{
		{"token limit", []trace.Event{selected, refusal, finished(429, map[string]any{"kind": "rateLimit", "policy": "localRateLimit", "reason": "..."})},
			"429 from route default/api: localRateLimit[1] of policy default/llm (1000 tokens per minute) exhausted, resets in 42 s"},
		{"keyed limit", []trace.Event{selected, ev(trace.PolicyResultType, map[string]any{"kind": "localRateLimit", "result": map[string]any{"type": "apply", "decision": "refused",
			"entries": []any{map[string]any{"index": 0.0, "type": "requests", "maxTokens": 2.0, "tokensPerFill": 2.0, "fillInterval": "60s", "remaining": 0.0, "resetSeconds": 30.0,
				"refused": true, "key": `request.headers["x-api-key"]`, "bucket": "alice"}}}}),
			finished(429, map[string]any{"kind": "rateLimit", "policy": "localRateLimit", "reason": "..."})},
			`429 from route default/api: localRateLimit[0] (2 requests per minute) for key "alice" (key request.headers["x-api-key"]) exhausted, resets in 30 s`},
		{"keyless request of a keyed limit", []trace.Event{selected, ev(trace.PolicyResultType, map[string]any{"kind": "localRateLimit", "result": map[string]any{"type": "apply", "decision": "refused",
			"entries": []any{map[string]any{"index": 0.0, "type": "requests", "maxTokens": 2.0, "tokensPerFill": 2.0, "fillInterval": "60s", "remaining": 0.0, "resetSeconds": 30.0,
				"refused": true, "key": `request.headers["x-api-key"]`, "bucket": nil}}}}),
			finished(429, map[string]any{"kind": "rateLimit", "policy": "localRateLimit", "reason": "..."})},
			`429 from route default/api: localRateLimit[0] (2 requests per minute) in the bucket of requests without a key (key request.headers["x-api-key"]) exhausted, resets in 30 s`},
		{"no route by method", []trace.Event{
			ev(trace.RouteSelection, map[string]any{"selectedRoute": nil, "listener": "default/default/bind/3000/listener0", "reasons": []any{
				map[string]any{"route": route, "result": "noMatch", "condition": "path", "reason": `path "/x" does not match prefix "/api"`},
				map[string]any{"route": "default/default/bind/3000/listener0/default/submit", "result": "noMatch", "condition": "method", "reason": "method is GET, the route wants POST"},
			}}),
			finished(404, map[string]any{"kind": "noRoute", "reason": "..."})},
			"404: no route matched; closest, default/submit: method is GET, the route wants POST (2 routes on bind/3000/listener0)"},
		{"unreachable", []trace.Event{selected, ev(trace.BackendCallStart, map[string]any{"target": "127.0.0.1:1"}),
			ev(trace.BackendCallResult, map[string]any{"status": 503.0, "error": "dial tcp 127.0.0.1:1: connect: connection refused"}),
			finished(503, map[string]any{"kind": "backendUnreachable", "reason": "backend 127.0.0.1:1 could not be reached: dial tcp 127.0.0.1:1: connect: connection refused"})},
			"503 from route default/api: backend 127.0.0.1:1 could not be reached: dial tcp 127.0.0.1:1: connect: connection refused"},
		{"allowed", []trace.Event{selected,
			ev(trace.PolicyResultType, map[string]any{"kind": "localRateLimit", "result": map[string]any{"type": "apply", "decision": "allowed", "entries": []any{
				map[string]any{"index": 0.0, "maxTokens": 6.0, "remaining": 5.0}}}}),
			ev(trace.BackendCallStart, map[string]any{"target": "127.0.0.1:8000"}),
			ev(trace.BackendCallResult, map[string]any{"status": 200.0, "error": nil}), finished(200, nil)},
			"200 from route default/api: backend 127.0.0.1:8000 answered 200; localRateLimit[0] 5 of 6 left"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Events(tt.events)
			if v.Line != tt.want {
				t.Errorf("verdict:\ngot  %s\nwant %s", v.Line, tt.want)
			}
			if !v.Reasons || !v.Complete {
				t.Errorf("Reasons %v Complete %v, want both", v.Reasons, v.Complete)
			}
		})
	}
}

// FuzzExplain: any trace explains without panicking.
func FuzzExplain(f *testing.F) {
	files, _ := filepath.Glob(realTraces + "*.jsonl")
	// refproxy's golden traces, which carry its reasons.
	golden, _ := filepath.Glob("../../traces/*.jsonl")
	files = append(files, golden...)
	// Reasons of other types than golden/trace's: a bucket and a
	// condition that are not strings, entries that are not a list.
	f.Add([]byte(`{"eventStart":null,"eventEnd":5,"severity":"warn","message":{"kind":"localRateLimit","result":{"decision":"refused","details":"d","entries":[{"bucket":5,"condition":{},"entry":0,"index":"0","key":7,"refused":true,"remaining":-1}],"type":"apply"},"type":"policy"}}` + "\n" +
		`{"eventStart":null,"eventEnd":8,"severity":"warn","message":{"cause":{"kind":"rateLimit","policy":3,"reason":null},"status":429,"type":"requestFinished"}}`))
	f.Add([]byte(`{"eventStart":null,"eventEnd":5,"severity":"warn","message":{"kind":"remoteRateLimit","result":{"decision":"refused","descriptors":{"a":1},"entries":"x","type":"apply"},"type":"policy"}}`))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var x Explainer
		for _, line := range strings.Split(string(b), "\n") {
			if e, err := trace.Parse([]byte(line)); err == nil {
				x.Add(e)
				_ = x.Verdict()
			}
		}
	})
}
