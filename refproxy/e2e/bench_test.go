package e2e

import (
	"net/http"
	"syscall"
	"testing"
	"time"
)

// benchConfig routes the same traffic with and without a local rate limit
// that never refuses, chosen by the x-route header, so that the only
// difference between the sub-benchmarks is the policy.
const benchConfig = `
binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: echo-limited
      matches: [{path: {pathPrefix: /}, headers: [{name: x-route, value: {exact: echo-limited}}]}]
      policies:
        localRateLimit:
        - {maxTokens: 1000000000000, tokensPerFill: 1000000000000, fillInterval: 1s}
      backends: [{host: "{{.Echo}}"}]
    - name: llm-limited
      matches: [{path: {pathPrefix: /v1/}, headers: [{name: x-route, value: {exact: llm-limited}}]}]
      policies:
        localRateLimit:
        - {maxTokens: 1000000000000, tokensPerFill: 1000000000000, fillInterval: 1s, type: tokens}
      backends:
      - ai: {name: openai, provider: {openAI: {}}, hostOverride: "{{.LLM}}"}
    - name: llm
      matches: [{path: {pathPrefix: /v1/}}]
      backends:
      - ai: {name: openai-unlimited, provider: {openAI: {}}, hostOverride: "{{.LLM}}"}
    - name: echo
      matches: [{path: {pathPrefix: /}}]
      backends: [{host: "{{.Echo}}"}]
`

// BenchmarkProxyThroughput compares requests through the whole proxy with a
// non-limiting local rate limit and with none (target: under 5% cost).
// Compare each .../none with its .../limited, e.g. with -count 6 and benchstat.
// Besides wall time it reports cpu-ns/op, the process CPU time (client,
// proxy and mocks all run in-process) per request, which other load on a
// shared machine disturbs much less than wall time.
func BenchmarkProxyThroughput(b *testing.B) {
	e := start(b, benchConfig)
	cases := []struct {
		name, method, path, body string
		hdr                      []string
	}{
		{"echo/none", http.MethodGet, "/status/200", "", nil},
		{"echo/limited", http.MethodGet, "/status/200", "", []string{"x-route", "echo-limited"}},
		{"llm/none", http.MethodPost, "/v1/chat/completions", chatBody(false), nil},
		{"llm/limited", http.MethodPost, "/v1/chat/completions", chatBody(false), []string{"x-route", "llm-limited"}},
		{"llm-stream/none", http.MethodPost, "/v1/chat/completions", chatBody(true), nil},
		{"llm-stream/limited", http.MethodPost, "/v1/chat/completions", chatBody(true), []string{"x-route", "llm-limited"}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime()
			defer func() { b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op") }()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r, err := e.try(c.method, c.path, c.body, c.hdr...)
					if err != nil || r.status != http.StatusOK {
						b.Errorf("%s: %d %v", c.name, r.status, err)
						return
					}
				}
			})
		})
	}
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
