package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/steps/mock"
)

const llmRoute = `
binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: openai
      policies:
        localRateLimit:
        - {maxTokens: %d, tokensPerFill: %d, fillInterval: %s, type: tokens}
      backends:
      - ai: {name: openai, provider: {openAI: {}}, hostOverride: "{{.LLM}}"}
`

// TestTokenOverage is the documented example: 100 tokens per minute and
// responses of 39 tokens each answer 200, 200, 200, then 429. The third
// response takes the budget over the limit and still succeeds. A
// non-streamed response is read whole before its headers go out, so its
// x-ratelimit-remaining shows its own charge; a stream's shows the
// charges before it.
func TestTokenOverage(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "json", true: "stream"}[stream]
		t.Run(name, func(t *testing.T) {
			e := start(t, tokensConfig(100, 100, time.Minute))
			steps := []struct {
				status int
				limits string // before this request's usage is charged
			}{
				{http.StatusOK, "100/100"},
				{http.StatusOK, "100/61"},
				{http.StatusOK, "100/22"},
				{http.StatusTooManyRequests, "100/0"},
			}
			if !stream { // after it
				steps[0].limits, steps[1].limits, steps[2].limits = "100/61", "100/22", "100/0"
			}
			for i, st := range steps {
				r := e.chat(t, stream, 30, 9)
				wantReply(t, "request "+string(rune('1'+i)), r, st.status, st.limits, time.Minute)
				if st.status == http.StatusOK && stream && !strings.HasSuffix(r.body, "data: [DONE]\n\n") {
					t.Errorf("request %d: stream does not end with [DONE]:\n%s", i+1, r.body)
				}
			}
			if got := e.llm.Count(); got != 3 {
				t.Errorf("LLM backend got %d requests, want 3", got)
			}
		})
	}
}

// TestTokenOverageFloorsAtZero: one response of 1200 on a 1000 limit
// succeeds; the bucket floors at 0 and the overage is not carried on.
func TestTokenOverageFloorsAtZero(t *testing.T) {
	e := start(t, tokensConfig(1000, 1000, time.Second))
	wantReply(t, "big response", e.chat(t, false, 200, 1000), http.StatusOK, "1000/0", time.Second)
	wantReply(t, "after the overage", e.chat(t, false, 1, 1), http.StatusTooManyRequests, "1000/0", time.Second)
	// One fill restores the whole budget: nothing of the 200 overage is owed.
	r := awaitAllowed(t, 5*time.Second, func() reply { return e.chat(t, false, 1, 1) })
	wantReply(t, "next window", r, http.StatusOK, "1000/998", time.Second) // its own 2 tokens
}

// TestBadUsageCountsZero: malformed, missing or truncated usage never
// breaks the response or the proxy; the request counts as 0 tokens.
func TestBadUsageCountsZero(t *testing.T) {
	for _, mode := range []string{mock.UsageMissing, mock.UsageMalformed, mock.UsageGarbage, mock.UsageTruncated} {
		for _, stream := range []bool{false, true} {
			t.Run(mode+map[bool]string{false: "/json", true: "/stream"}[stream], func(t *testing.T) {
				e := start(t, tokensConfig(10, 10, time.Minute))
				r := e.chat(t, stream, 30, 9, mock.HeaderUsage, mode)
				wantReply(t, "bad usage", r, http.StatusOK, "10/10", time.Minute)
				next, good := "10/10", "10/9" // a stream's headers go out before its usage
				if !stream {
					next, good = "10/9", "10/8" // a whole body's include its own charge
				}
				wantReply(t, "next request", e.chat(t, stream, 1, 0), http.StatusOK, next, time.Minute)
				wantReply(t, "good usage", e.chat(t, stream, 1, 0), http.StatusOK, good, time.Minute)
			})
		}
	}
}

func tokensConfig(max, fill uint64, every time.Duration) string {
	return sprintf(llmRoute, max, fill, every)
}
