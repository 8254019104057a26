package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/golden/configdump"
	"github.com/gwdiag/gwdiag/golden/trace"
)

// TestBucketPerKey: localRateLimit[].key gives each key its own bucket;
// requests without a key (no header: the expression fails) share one; a
// conditional entry takes a key too.
func TestBucketPerKey(t *testing.T) {
	e := start(t, `
binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: api
      matches: [{path: {pathPrefix: /api}}]
      policies:
        localRateLimit:
        - {maxTokens: 2, tokensPerFill: 2, fillInterval: 1m, key: 'request.headers["x-api-key"]'}
      backends: [{host: "{{.Echo}}"}]
    - name: cond
      matches: [{path: {pathPrefix: /cond}}]
      policies:
        localRateLimit:
          conditional:
          - {condition: 'request.method == "POST"', maxTokens: 1, tokensPerFill: 1, fillInterval: 1m, key: 'request.headers["x-api-key"]'}
          - {maxTokens: 5, tokensPerFill: 5, fillInterval: 1m}
      backends: [{host: "{{.Echo}}"}]
`)
	steps := []struct {
		path, key string
		status    int
		limits    string
	}{
		{"/api", "alice", http.StatusOK, "2/1"},
		{"/api", "alice", http.StatusOK, "2/0"},
		{"/api", "alice", http.StatusTooManyRequests, "2/0"},
		{"/api", "bob", http.StatusOK, "2/1"}, // his own bucket
		{"/api", "", http.StatusOK, "2/1"},    // no key: the shared bucket
		{"/api", "", http.StatusOK, "2/0"},
		{"/api", "", http.StatusTooManyRequests, "2/0"},
		{"/api", "bob", http.StatusOK, "2/0"},
	}
	for i, st := range steps {
		var hdr []string
		if st.key != "" {
			hdr = []string{"x-api-key", st.key}
		}
		r := e.do(t, http.MethodGet, st.path, "", hdr...)
		wantReply(t, sprintf("step %d %s key %q", i+1, st.path, st.key), r, st.status, st.limits, time.Minute)
	}
	for i, st := range []struct {
		key    string
		status int
	}{{"alice", http.StatusOK}, {"alice", http.StatusTooManyRequests}, {"bob", http.StatusOK}} {
		r := e.do(t, http.MethodPost, "/cond", "{}", "x-api-key", st.key)
		wantReply(t, sprintf("conditional step %d key %q", i+1, st.key), r, st.status, "1/0", time.Minute)
	}
}

// TestRefusalHeaders: a 429 carries the headers of the entry that denied
// (remaining 0, its reset), not those of an entry that passed with fewer
// remaining, and Retry-After equal to x-ratelimit-reset.
func TestRefusalHeaders(t *testing.T) {
	e := start(t, `
binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: api
      policies:
        localRateLimit:
        - {maxTokens: 3, tokensPerFill: 3, fillInterval: 1h}
        - {maxTokens: 1, tokensPerFill: 1, fillInterval: 1m, key: 'request.headers["x-api-key"]'}
      backends: [{host: "{{.Echo}}"}]
`)
	wantReply(t, "alice", e.do(t, http.MethodGet, "/", "", "x-api-key", "alice"), http.StatusOK, "1/0", time.Minute)
	if got := e.do(t, http.MethodGet, "/", "", "x-api-key", "bob"); got.header.Get("Retry-After") != "" {
		t.Errorf("an admitted request has Retry-After %q, want none", got.header.Get("Retry-After"))
	}
	r := e.do(t, http.MethodGet, "/", "", "x-api-key", "alice")
	// alice's key entry denied (1 per minute); the route's entry passed
	// with 1 left (3 per hour).
	wantReply(t, "alice refused", r, http.StatusTooManyRequests, "1/0", time.Minute)
	if got, reset := r.header.Get("Retry-After"), r.header.Get("X-Ratelimit-Reset"); got == "" || got != reset {
		t.Errorf("429: Retry-After %q, want it equal to x-ratelimit-reset %q", got, reset)
	}
	if r.reset() > 60 {
		t.Errorf("429: x-ratelimit-reset %d, want the denying entry's (at most 60 s), not the hourly one's", r.reset())
	}
}

// TestOpenAIErrorBody: with rateLimitError: openai an LLM route's 429
// carries the JSON error OpenAI clients parse; without it, the spec's
// text.
func TestOpenAIErrorBody(t *testing.T) {
	for _, openai := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "openai"}[openai], func(t *testing.T) {
			opt := ""
			if openai {
				opt = "\n        rateLimitError: openai"
			}
			e := start(t, `
binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: openai
      policies:`+opt+`
        localRateLimit:
        - {maxTokens: 1, tokensPerFill: 1, fillInterval: 1m}
      backends:
      - ai: {name: openai, provider: {openAI: {}}, hostOverride: "{{.LLM}}"}
`)
			wantReply(t, "first", e.chat(t, false, 1, 1), http.StatusOK, "1/0", time.Minute)
			r := e.chat(t, false, 1, 1)
			if r.status != http.StatusTooManyRequests || r.limits() != "1/0" {
				t.Fatalf("refused: got %d with %s, want 429 with 1/0", r.status, r.limits())
			}
			if !openai {
				if ct := r.header.Get("Content-Type"); r.body != "rate limit exceeded" || ct != "text/plain" {
					t.Errorf("429: %q %q, want text/plain \"rate limit exceeded\"", ct, r.body)
				}
				return
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("429 Content-Type %q, want application/json", ct)
			}
			var body struct {
				Error struct {
					Message, Type, Code string
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(r.body), &body); err != nil {
				t.Fatalf("429 body %q: %v", r.body, err)
			}
			if body.Error.Type != "rate_limit_error" || body.Error.Code != "rate_limit_exceeded" || body.Error.Message == "" {
				t.Errorf("429 error %+v, want type rate_limit_error, code rate_limit_exceeded and a message", body.Error)
			}
		})
	}
}

// TestRateLimitErrorShown: a route's rateLimitError is in its
// effectivePolicy (beside the spec's seventeen keys, with the limit's key)
// and among its inline policies in the config dump; a route without one
// shows neither.
func TestRateLimitErrorShown(t *testing.T) {
	e := start(t, `
binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: openai
      matches: [{path: {pathPrefix: /v1}}]
      policies:
        rateLimitError: openai
        localRateLimit:
        - {maxTokens: 5, tokensPerFill: 5, fillInterval: 1m, key: 'request.headers["x-api-key"]'}
      backends:
      - ai: {name: openai, provider: {openAI: {}}, hostOverride: "{{.LLM}}"}
    - name: plain
      policies:
        localRateLimit:
        - {maxTokens: 5, tokensPerFill: 5, fillInterval: 1m}
      backends:
      - host: "{{.Echo}}"
`)
	effective := func(send func()) map[string]any {
		for _, ev := range traceNext(t, e, send) {
			if ev.Type() == trace.PolicySelection {
				ep, _ := ev.Message["effectivePolicy"].(map[string]any)
				return ep
			}
		}
		t.Fatal("no policySelection event")
		return nil
	}
	ep := effective(func() { e.chat(t, false, 1, 1, "x-api-key", "alice") })
	ls, _ := ep["localRateLimit"].([]any)
	if ep["rateLimitError"] != "openai" || len(ls) != 1 || ls[0].(map[string]any)["key"] != `request.headers["x-api-key"]` {
		t.Errorf("effectivePolicy of the LLM route: rateLimitError %v, localRateLimit %v; want openai and the entry's key", ep["rateLimitError"], ep["localRateLimit"])
	}
	ep = effective(func() { e.do(t, http.MethodGet, "/get", "") })
	if v, ok := ep["rateLimitError"]; ok || ep["localRateLimit"] == nil {
		t.Errorf("effectivePolicy of the plain route: rateLimitError %v (present %v), localRateLimit %v; want no rateLimitError and the limit", v, ok, ep["localRateLimit"])
	}

	resp, err := http.Get("http://" + e.proxy.AdminAddr() + "/config_dump")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d configdump.Dump
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		t.Fatal(err)
	}
	got := map[string][]map[string]any{}
	for _, b := range d.Binds {
		for _, l := range b.Listeners {
			for _, r := range l.Routes {
				got[r.Name] = r.InlinePolicies
			}
		}
	}
	hasErr := func(ps []map[string]any) any {
		for _, p := range ps {
			if v, ok := p["rateLimitError"]; ok {
				return v
			}
		}
		return nil
	}
	if v := hasErr(got["openai"]); v != "openai" {
		t.Errorf("dump: route openai's inline policies %v; want {rateLimitError: openai}", got["openai"])
	}
	if v := hasErr(got["plain"]); v != nil || len(got["plain"]) == 0 {
		t.Errorf("dump: route plain's inline policies %v; want its limit and no rateLimitError", got["plain"])
	}
}
