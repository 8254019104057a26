package e2e

import (
	"net/http"
	"testing"
	"time"
)

// TestEntriesEvaluatedIndependently: a gateway-wide policy caps every route
// of the gateway together, each route adds its own entries, a request must
// pass all of them, a refused request takes from none of them, and the
// headers come from the entry with the fewest remaining.
func TestEntriesEvaluatedIndependently(t *testing.T) {
	e := start(t, `
binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: a
      matches: [{path: {pathPrefix: /a}}]
      policies:
        localRateLimit:
        - {maxTokens: 2, tokensPerFill: 2, fillInterval: 1m}
      backends: [{host: "{{.Echo}}"}]
    - name: b
      matches: [{path: {pathPrefix: /b}}]
      policies:
        localRateLimit:
        - {maxTokens: 10, tokensPerFill: 10, fillInterval: 1m}
      backends: [{host: "{{.Echo}}"}]
    - name: open
      matches: [{path: {pathPrefix: /open}}]
      backends: [{host: "{{.Echo}}"}]
policies:
- name: {name: gateway-cap, namespace: default}
  target: {gateway: {gatewayName: bind/0, gatewayNamespace: default}}
  policy:
    localRateLimit:
    - {maxTokens: 4, tokensPerFill: 4, fillInterval: 1m}
`)
	steps := []struct {
		path   string
		status int
		limits string
	}{
		{"/a", http.StatusOK, "2/1"},                 // a 1, gateway 3
		{"/b", http.StatusOK, "4/2"},                 // gateway 2, b 9
		{"/a", http.StatusOK, "2/0"},                 // a 0, gateway 1
		{"/a", http.StatusTooManyRequests, "2/0"},    // refused by a; gateway keeps 1
		{"/b", http.StatusOK, "4/0"},                 // gateway 0, b 8
		{"/b", http.StatusTooManyRequests, "4/0"},    // refused by the gateway; b keeps 8
		{"/open", http.StatusTooManyRequests, "4/0"}, // the gateway cap covers routes with no policy of their own
	}
	for i, st := range steps {
		r := e.do(t, http.MethodGet, st.path, "")
		wantReply(t, sprintf("step %d %s", i+1, st.path), r, st.status, st.limits, time.Minute)
	}
	if got := e.echo.Count(); got != 4 {
		t.Errorf("echo backend got %d requests, want 4 (refused ones never reach it)", got)
	}
}

// TestRequestsAndTokensEntries: on one LLM route a requests entry and a
// tokens entry count independently; the tokens entry refuses once its
// budget is spent although requests remain.
func TestRequestsAndTokensEntries(t *testing.T) {
	e := start(t, `
binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: openai
      policies:
        localRateLimit:
        - {maxTokens: 5, tokensPerFill: 5, fillInterval: 1m}
        - {maxTokens: 100, tokensPerFill: 100, fillInterval: 1m, type: tokens}
      backends:
      - ai: {name: openai, provider: {openAI: {}}, hostOverride: "{{.LLM}}"}
`)
	steps := []struct {
		prompt, completion int
		status             int
		limits             string
	}{
		{30, 9, http.StatusOK, "5/4"},               // requests 4, tokens 100
		{30, 9, http.StatusOK, "5/3"},               // requests 3, tokens 61
		{50, 50, http.StatusOK, "100/0"},            // requests 2, tokens 22 charged to 0 before the headers
		{1, 1, http.StatusTooManyRequests, "100/0"}, // refused by tokens; requests keep 2
	}
	for i, st := range steps {
		r := e.chat(t, i%2 == 1, st.prompt, st.completion)
		wantReply(t, sprintf("step %d", i+1), r, st.status, st.limits, time.Minute)
	}
	if got := e.llm.Count(); got != 3 {
		t.Errorf("LLM backend got %d requests, want 3", got)
	}
}
