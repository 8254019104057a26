package e2e

import (
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"
)

// benchConfig routes the same traffic with and without a local rate limit
// that never refuses, chosen by the x-route header, so that the only
// difference between the sub-benchmarks is the policy. Each unlimited route
// comes first, so route matching never favours the limited one.
const benchConfig = `
binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: echo
      matches: [{path: {pathPrefix: /}, headers: [{name: x-route, value: {exact: echo}}]}]
      backends: [{host: "{{.Echo}}"}]
    - name: echo-limited
      matches: [{path: {pathPrefix: /}, headers: [{name: x-route, value: {exact: echo-limited}}]}]
      policies:
        localRateLimit:
        - {maxTokens: 1000000000000, tokensPerFill: 1000000000000, fillInterval: 1s}
      backends: [{host: "{{.Echo}}"}]
    - name: llm
      matches: [{path: {pathPrefix: /v1/}, headers: [{name: x-route, value: {exact: llm}}]}]
      backends:
      - ai: {name: openai-unlimited, provider: {openAI: {}}, hostOverride: "{{.LLM}}"}
    - name: llm-limited
      matches: [{path: {pathPrefix: /v1/}, headers: [{name: x-route, value: {exact: llm-limited}}]}]
      policies:
        localRateLimit:
        - {maxTokens: 1000000000000, tokensPerFill: 1000000000000, fillInterval: 1s, type: tokens}
      backends:
      - ai: {name: openai, provider: {openAI: {}}, hostOverride: "{{.LLM}}"}
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
		{"echo/none", http.MethodGet, "/status/200", "", []string{"x-route", "echo"}},
		{"echo/limited", http.MethodGet, "/status/200", "", []string{"x-route", "echo-limited"}},
		{"llm/none", http.MethodPost, "/v1/chat/completions", chatBody(false), []string{"x-route", "llm"}},
		{"llm/limited", http.MethodPost, "/v1/chat/completions", chatBody(false), []string{"x-route", "llm-limited"}},
		{"llm-stream/none", http.MethodPost, "/v1/chat/completions", chatBody(true), []string{"x-route", "llm"}},
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

// BenchmarkProxyOverheadPaired sends, in each iteration, the same request to
// the route without a policy and to the one with a non-limiting policy,
// alternating, and reports each one's median latency and the relative cost
// of the median. Pairing makes both see the same machine load, and medians
// ignore the preemptions that, on a shared machine, swamp the few hundred
// nanoseconds a limiter costs.
func BenchmarkProxyOverheadPaired(b *testing.B) {
	e := start(b, benchConfig)
	cases := []struct {
		name, method, path, body string
		none, limited            string // x-route of the two routes
	}{
		{"echo", http.MethodGet, "/status/200", "", "echo", "echo-limited"},
		{"llm", http.MethodPost, "/v1/chat/completions", chatBody(false), "llm", "llm-limited"},
		// The proxy adds include_usage on the limited route only, so the
		// backend also sends one more chunk there.
		{"llm-stream", http.MethodPost, "/v1/chat/completions", chatBody(true), "llm", "llm-limited"},
		// The client asks for usage itself: both routes carry the same stream.
		{"llm-stream-with-usage", http.MethodPost, "/v1/chat/completions", streamWithUsage, "llm", "llm-limited"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var none, limited []time.Duration
			send := func(hdr ...string) time.Duration {
				t0 := time.Now()
				r, err := e.try(c.method, c.path, c.body, hdr...)
				d := time.Since(t0)
				if err != nil || r.status != http.StatusOK {
					b.Fatalf("%s: %d %v", c.name, r.status, err)
				}
				return d
			}
			for b.Loop() {
				// Alternate which goes first, so neither always warms the other.
				if len(none)%2 == 0 {
					none = append(none, send("x-route", c.none))
					limited = append(limited, send("x-route", c.limited))
				} else {
					limited = append(limited, send("x-route", c.limited))
					none = append(none, send("x-route", c.none))
				}
			}
			mn, ml := median(none), median(limited)
			b.ReportMetric(float64(mn.Nanoseconds()), "none-p50-ns")
			b.ReportMetric(float64(ml.Nanoseconds()), "limited-p50-ns")
			b.ReportMetric(100*(float64(ml)-float64(mn))/float64(mn), "overhead-%")
		})
	}
}

// streamWithUsage is a streaming request that asks for usage itself.
const streamWithUsage = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
