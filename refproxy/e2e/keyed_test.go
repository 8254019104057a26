package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
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
