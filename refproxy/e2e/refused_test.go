package e2e

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
)

// TestRefusedRequestTrace: a refused request is never forwarded; its trace
// shows the limits that apply, no backend events and a final response of
// 429 carrying the x-ratelimit-* headers.
func TestRefusedRequestTrace(t *testing.T) {
	e := start(t, `
binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: httpbin
      policies:
        localRateLimit:
        - {maxTokens: 1, tokensPerFill: 1, fillInterval: 1h}
      backends: [{host: "{{.Echo}}"}]
`)
	wantReply(t, "first", e.do(t, http.MethodGet, "/headers", ""), http.StatusOK, "1/0", time.Hour)

	events := traceNext(t, e, func() {
		wantReply(t, "second", e.do(t, http.MethodGet, "/headers", ""), http.StatusTooManyRequests, "1/0", time.Hour)
	})
	if got := e.echo.Count(); got != 1 {
		t.Errorf("echo backend got %d requests, want 1", got)
	}
	var final map[string]any
	for _, ev := range events {
		switch ev.Type() {
		case trace.BackendCallStart, trace.BackendCallResult:
			t.Errorf("refused request's trace has %s, want no backend events", ev.Type())
		case trace.PolicySelection:
			eff, _ := ev.Message["effectivePolicy"].(map[string]any)
			lrl, _ := eff["localRateLimit"].([]any)
			if len(lrl) != 1 {
				t.Errorf("effectivePolicy.localRateLimit = %v, want the one limit", eff["localRateLimit"])
			}
		case trace.ResponseSnapshot:
			if ev.Stage() == "final response" {
				st, _ := ev.Message["requestState"].(map[string]any)
				final, _ = st["response"].(map[string]any)
			}
		}
	}
	if final == nil {
		t.Fatalf("no final response snapshot in %v", types(events))
	}
	if code, _ := final["code"].(float64); code != http.StatusTooManyRequests {
		t.Errorf("final response code %v, want 429", final["code"])
	}
	hdr, _ := final["headers"].(map[string]any)
	if hdr["x-ratelimit-limit"] != "1" || hdr["x-ratelimit-remaining"] != "0" {
		t.Errorf("final response headers %v, want x-ratelimit-limit 1 and x-ratelimit-remaining 0", hdr)
	}
	if last := events[len(events)-1].Type(); last != trace.RequestFinished {
		t.Errorf("last event %s, want requestFinished", last)
	}
}

// traceNext opens /debug/trace, runs send once the watcher is registered,
// and returns the events of the traced request.
func traceNext(t *testing.T, e *env, send func()) []trace.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+e.proxy.AdminAddr()+"/debug/trace", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("open trace: %v", err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != ": ready\n" {
		t.Fatalf("trace stream starts with %q, %v; want \": ready\"", line, err)
	}
	send()
	tr, err := sse.ReadTrace(sse.NewReader(br))
	if err != nil {
		t.Fatalf("reading the trace: %v", err)
	}
	for _, e := range tr.Events {
		if err := trace.StrictReasons(e); err != nil {
			t.Errorf("a reason of another shape than golden/trace/reasons.go writes: %v", err)
		}
	}
	return tr.Events // EOF after requestFinished
}

func types(evs []trace.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, string(e.Type()))
	}
	return slices.Clip(out)
}
