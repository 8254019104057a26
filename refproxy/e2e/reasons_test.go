package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/golden/trace"
)

// reasonsRoutes are routes that give the reasons refproxy's own package
// tests cannot: a global limit on the real rate-limit service (2 requests a
// day per x-user, serviceLimits), a shadow local limit, and an LLM route
// whose responses are charged to a token limit.
const reasonsRoutes = `
binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: global
      matches: [{path: {pathPrefix: /global}}]
      policies:
        remoteRateLimit:
          host: %s
          domain: gwdiag-e2e
          failureMode: failClosed
          descriptors:
          - entries: [{key: user, value: 'request.headers["x-user"]'}]
      backends: [{host: "{{.Echo}}"}]
    - name: shadow
      matches: [{path: {pathPrefix: /shadow}}]
      policies:
        localRateLimit:
        - {maxTokens: 1, tokensPerFill: 1, fillInterval: 1h, shadow: true}
      backends: [{host: "{{.Echo}}"}]
    - name: openai
      policies:
        localRateLimit:
        - {maxTokens: 1000, tokensPerFill: 1000, fillInterval: 1h, type: tokens}
      backends:
      - ai: {name: openai, provider: {openAI: {}}, hostOverride: "{{.LLM}}"}
`

// TestReasonsOfLimitsHaveTheirWrittenShape: a global limit that allows and
// refuses, a shadow limit that would refuse, and a response's charge to a
// token limit are traced with the shapes golden/trace/reasons.go writes
// (traceNext holds every event to trace.StrictReasons), and each shape
// was seen: a run that saw fewer would hold nothing to the types.
func TestReasonsOfLimitsHaveTheirWrittenShape(t *testing.T) {
	svc := rateLimitService(t)
	e := start(t, fmt.Sprintf(reasonsRoutes, svc.Addr))
	user := strings.ToLower(t.Name())
	seen := map[string]int{}
	tally := func(evs []trace.Event) {
		for _, ev := range evs {
			switch ev.Type() {
			case trace.PolicyResultType:
				var p trace.PolicyResult
				trace.DecodeReason(ev.Message, &p)
				seen[p.Kind+" "+p.Result.Decision]++
				for _, en := range p.Result.Entries {
					if en.Shadow && en.WouldRefuse {
						seen["shadow entry that would refuse"]++
					}
				}
				for _, d := range p.Result.Descriptors {
					if d.Entries["user"] == user && d.Limit != nil && d.Remaining != nil {
						seen["descriptor "+d.Code]++
					}
				}
			case trace.PolicyEvent:
				var c trace.PolicyCharge
				trace.DecodeReason(ev.Message, &c)
				if c.Tokens == 30 && c.Usage == (trace.Usage{InputTokens: 10, OutputTokens: 20}) && len(c.Entries) == 1 {
					seen["charge"]++
				}
			}
		}
	}
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		var r reply
		tally(traceNext(t, e, func() { r = e.do(t, http.MethodGet, "/global", "", "X-User", user) }))
		if r.status != want {
			t.Fatalf("global request %d: %d %q, want %d", i+1, r.status, r.body, want)
		}
	}
	for range 2 {
		var r reply
		tally(traceNext(t, e, func() { r = e.do(t, http.MethodGet, "/shadow", "") }))
		if r.status != http.StatusOK {
			t.Fatalf("shadow: %d %q; a shadow limit never refuses", r.status, r.body)
		}
	}
	var r reply
	tally(traceNext(t, e, func() { r = e.chat(t, false, 10, 20) }))
	if r.status != http.StatusOK {
		t.Fatalf("chat: %d %q", r.status, r.body)
	}
	for _, want := range []string{"remoteRateLimit allowed", "remoteRateLimit refused", "descriptor OK", "descriptor OVER_LIMIT",
		"localRateLimit allowed", "shadow entry that would refuse", "charge"} {
		if seen[want] == 0 {
			t.Errorf("no reason of the shape %q among %v", want, seen)
		}
	}
}
