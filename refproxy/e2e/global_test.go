package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/clusters/toolbin"
	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit"
	"github.com/gwdiag/gwdiag/steps/ratelimitsvc"
)

// The service's limits for these tests. Its windows are fixed and aligned
// to the clock, so they are a day long: a test never straddles a reset.
const serviceLimits = `
domain: gwdiag-e2e
descriptors:
  - key: route
    value: shared
    rate_limit: {unit: day, requests_per_unit: 5}
  - key: llm
    value: json
    rate_limit: {unit: day, requests_per_unit: 100}
  - key: llm
    value: stream
    rate_limit: {unit: day, requests_per_unit: 100}
  - key: user
    rate_limit: {unit: day, requests_per_unit: 2}
`

// stylesLimits are the limits of styles_test.go: the reference docs'
// global token limit, per organization (responses of 40 tokens: the third
// takes it over).
const stylesLimits = `
domain: gwdiag-styles
descriptors:
  - key: some-static-value
    value: something
    descriptors:
      - key: organization
        descriptors:
          - key: authenticated
            value: "false"
            rate_limit: {unit: day, requests_per_unit: 100}
`

// rateLimitService starts the real service (github.com/envoyproxy/ratelimit
// on redis-server) until the test ends.
func rateLimitService(t *testing.T) *ratelimitsvc.Service {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := ratelimitsvc.Start(ctx, ratelimitsvc.Options{Config: map[string]string{"e2e.yaml": serviceLimits, "styles.yaml": stylesLimits}})
	if errors.Is(err, toolbin.ErrNoNetwork) {
		t.Skipf("the rate-limit service cannot be built here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// echoWithRemote is an echo route with the remoteRateLimit whose fields
// (besides the host) are policy, indented as they go.
func echoWithRemote(host, policy string) string {
	return fmt.Sprintf(`
binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: echo
      policies:
        remoteRateLimit:
          host: %s
          domain: gwdiag-e2e
%s
      backends:
      - host: "{{.Echo}}"
`, host, policy)
}

// globalRoute is an echo route limited by the service with a budget for
// the descriptor route=shared, failing as mode says.
func globalRoute(host, mode string) string {
	return echoWithRemote(host, `          failureMode: `+mode+`
          policies: {http: {requestTimeout: 500ms}}
          descriptors:
          - entries: [{key: route, value: '"shared"'}]`)
}

// TestGlobalRequestLimitSharedAcrossReplicas: two replicas behind one
// service share one budget of 5: of 64 concurrent requests spread over
// both, exactly 5 reach the backend; every 429 is the service's (with
// x-envoy-ratelimited), every answer has the headers with the window.
func TestGlobalRequestLimitSharedAcrossReplicas(t *testing.T) {
	svc := rateLimitService(t)
	a := start(t, globalRoute(svc.Addr, "failClosed"))
	b := a.replica(t)
	const n = 64
	replies := make([]reply, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			e := a
			if i%2 == 1 {
				e = b
			}
			replies[i], errs[i] = e.try(http.MethodGet, "/", "")
		})
	}
	wg.Wait()
	admitted := 0
	for i, r := range replies {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if got := r.header.Get(ratelimit.HeaderLimit); got != "5, 5;w=86400" {
			t.Errorf("request %d (%d): x-ratelimit-limit %q, want \"5, 5;w=86400\"", i, r.status, got)
		}
		switch r.status {
		case http.StatusOK:
			admitted++
			if v := r.header.Get("x-envoy-ratelimited"); v != "" {
				t.Errorf("request %d: admitted with x-envoy-ratelimited %q", i, v)
			}
		case http.StatusTooManyRequests:
			if r.header.Get("x-envoy-ratelimited") != "true" || r.body != ratelimit.RefusedBody || r.remaining() != 0 {
				t.Errorf("request %d: 429 with x-envoy-ratelimited %q, remaining %d, body %q; want true, 0, %q",
					i, r.header.Get("x-envoy-ratelimited"), r.remaining(), r.body, ratelimit.RefusedBody)
			}
		default:
			t.Errorf("request %d: status %d, body %q", i, r.status, r.body)
		}
	}
	if admitted != 5 || a.echo.Count() != 5 {
		t.Errorf("admitted %d, backend saw %d; want 5 and 5 across both replicas", admitted, a.echo.Count())
	}
}

// TestGlobalTokenLimitSharedAcrossReplicas: a token budget of 100 shared by
// two replicas, responses of 39 tokens: 200 (A), 200 (B), 200 (A, crossing
// the limit), then 429 on either, with no request reaching the backend.
func TestGlobalTokenLimitSharedAcrossReplicas(t *testing.T) {
	svc := rateLimitService(t)
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			value := map[bool]string{false: "json", true: "stream"}[stream] // a budget each
			a := start(t, fmt.Sprintf(`
binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: openai
      policies:
        remoteRateLimit:
          host: %s
          domain: gwdiag-e2e
          descriptors:
          - entries: [{key: llm, value: '"%s"'}]
            type: tokens
            limitOverride: '{"unit": "day", "requestsPerUnit": 100}'
      backends:
      - ai: {name: openai, provider: {openAI: {}}, hostOverride: "{{.LLM}}"}
`, svc.Addr, value))
			b := a.replica(t)
			for i, st := range []struct {
				e      *env
				status int
			}{{a, 200}, {b, 200}, {a, 200}, {b, 429}, {a, 429}} {
				r := st.e.chat(t, stream, 30, 9)
				if r.status != st.status {
					t.Errorf("request %d: %d (%s remaining), want %d", i+1, r.status, r.header.Get(ratelimit.HeaderRemaining), st.status)
				}
				if st.status == 429 && r.header.Get("x-envoy-ratelimited") != "true" {
					t.Errorf("request %d: 429 without x-envoy-ratelimited", i+1)
				}
			}
			if got := a.llm.Count(); got != 3 {
				t.Errorf("LLM backend got %d requests, want 3", got)
			}
		})
	}
}

// TestGlobalDescriptorFromHeader: a descriptor valued by a request header
// gives each user a budget of their own (2), and under failOpen a request
// without the header makes no descriptor and is not limited (under
// failClosed it is refused: TestGlobalDescriptorThatCannotBeEvaluated).
func TestGlobalDescriptorFromHeader(t *testing.T) {
	svc := rateLimitService(t)
	e := start(t, echoWithRemote(svc.Addr, `          failureMode: failOpen
          descriptors:
          - entries: [{key: user, value: 'request.headers["x-user"]'}]`))
	for i, st := range []struct {
		user   string
		status int
	}{{"ann", 200}, {"ann", 200}, {"ann", 429}, {"bob", 200}, {"", 200}, {"", 200}, {"", 200}} {
		var hdr []string
		if st.user != "" {
			hdr = []string{"x-user", st.user}
		}
		if r := e.do(t, http.MethodGet, "/", "", hdr...); r.status != st.status {
			t.Errorf("request %d (user %q): %d, want %d", i+1, st.user, r.status, st.status)
		}
	}
}

// TestGlobalFailureModes: with the service gone, failClosed answers 500
// within the call timeout and failOpen lets requests through, each saying
// so in the trace; when the service is back, limiting resumes.
func TestGlobalFailureModes(t *testing.T) {
	svc := rateLimitService(t)
	closed := start(t, globalRoute(svc.Addr, "failClosed"))
	open := start(t, globalRoute(svc.Addr, "failOpen"))
	if r := closed.do(t, http.MethodGet, "/", ""); r.status != http.StatusOK {
		t.Fatalf("service up: %d %q", r.status, r.body)
	}
	svc.Kill()
	began := time.Now()
	var r reply
	evs := traceNext(t, closed, func() { r = closed.do(t, http.MethodGet, "/", "") })
	if r.status != http.StatusInternalServerError || time.Since(began) > 5*time.Second {
		t.Errorf("failClosed, service gone: %d %q after %v; want 500 within the timeout", r.status, r.body, time.Since(began))
	}
	wantWarning(t, "failClosed", evs, "request refused (failClosed)")
	for _, ev := range evs {
		if ev.Type() != trace.PolicySelection {
			continue
		}
		ep, _ := ev.Message["effectivePolicy"].(map[string]any)
		rs, _ := ep["remoteRateLimit"].([]any)
		if len(rs) != 1 || rs[0].(map[string]any)["failureMode"] != "failClosed" || rs[0].(map[string]any)["host"] != svc.Addr {
			t.Errorf("effectivePolicy.remoteRateLimit %v; want the route's policy, failClosed, host %s", ep["remoteRateLimit"], svc.Addr)
		}
	}
	evs = traceNext(t, open, func() { r = open.do(t, http.MethodGet, "/", "") })
	if r.status != http.StatusOK {
		t.Errorf("failOpen, service gone: %d %q; want 200", r.status, r.body)
	}
	wantWarning(t, "failOpen", evs, "request let through (failOpen)")
	before := open.echo.Count()
	if err := svc.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Back: the budget of 5 (one spent above) runs out again. The proxy
	// reconnects within its back-off (at most a second).
	awaitAllowed(t, 10*time.Second, func() reply { return closed.do(t, http.MethodGet, "/", "") })
	for closed.do(t, http.MethodGet, "/", "").status == http.StatusOK {
		if closed.echo.Count()-before > 5 {
			t.Fatal("more than the budget admitted after the service came back")
		}
	}
}

// TestGlobalLimitConnectsAtLoad: a route with a global limit connects to
// its rate-limit service when the config loads, before any request: the
// first request's check, bounded by the policy's timeout, must not also
// pay for the connection (a fail-closed route's first request got a 500
// on a loaded machine when it did).
func TestGlobalLimitConnectsAtLoad(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
	}()
	start(t, globalRoute(ln.Addr().String(), "failClosed"))
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("no connection to the rate-limit service within 10 s of the config's load, before any request")
	}
}

// TestGlobalDescriptorThatCannotBeEvaluated: a request whose descriptor
// cannot be made (the header it reads is missing) is refused under
// failClosed and let through under failOpen, the trace naming the
// descriptor and why; the reference lets it through under both (its issue
// 3523), so a client escapes a keyed limit by leaving out its key.
func TestGlobalDescriptorThatCannotBeEvaluated(t *testing.T) {
	svc := rateLimitService(t)
	route := func(mode string) string {
		return echoWithRemote(svc.Addr, `          failureMode: `+mode+`
          descriptors:
          - entries: [{key: team, value: 'request.headers["x-team"]'}]`)
	}
	closed, open := start(t, route("failClosed")), start(t, route("failOpen"))
	var r reply
	evs := traceNext(t, closed, func() { r = closed.do(t, http.MethodGet, "/", "") })
	if r.status != http.StatusInternalServerError || closed.echo.Count() != 0 {
		t.Errorf("failClosed, no x-team: %d %q, backend reached %d times; want 500, never reached", r.status, r.body, closed.echo.Count())
	}
	wantWarning(t, "failClosed", evs, `request refused (failClosed): descriptor 0 cannot be evaluated: entry "team"`)
	evs = traceNext(t, open, func() { r = open.do(t, http.MethodGet, "/", "") })
	if r.status != http.StatusOK {
		t.Errorf("failOpen, no x-team: %d %q; want 200", r.status, r.body)
	}
	wantWarning(t, "failOpen", evs, `request let through (failOpen): descriptor 0 cannot be evaluated: entry "team"`)
}

// wantWarning checks requestFinished carries a warning containing want.
func wantWarning(t *testing.T, what string, evs []trace.Event, want string) {
	t.Helper()
	last := evs[len(evs)-1]
	ws, _ := last.Message["warnings"].([]any)
	for _, w := range ws {
		if s, _ := w.(string); strings.Contains(s, want) {
			return
		}
	}
	t.Errorf("%s: requestFinished warnings %v, want one containing %q", what, ws, want)
}

// BenchmarkGlobalLimitLatency measures what a global limit adds to one
// request: the same echo route with no limit, a local limit and a global
// limit through the real service (on loopback), requests one at a time,
// interleaved round by round so that machine noise hits all three alike.
// It reports p50 and p99 per case (ns); the limits never refuse.
func BenchmarkGlobalLimitLatency(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	svc, err := ratelimitsvc.Start(ctx, ratelimitsvc.Options{Config: map[string]string{"bench.yaml": `
domain: gwdiag-bench
descriptors:
  - key: route
    value: bench
    rate_limit: {unit: day, requests_per_unit: 4000000000}
`}})
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Stop()
	e := start(b, fmt.Sprintf(`
binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: none
      matches: [{headers: [{name: x-route, value: {exact: none}}]}]
      backends: [{host: "{{.Echo}}"}]
    - name: local
      matches: [{headers: [{name: x-route, value: {exact: local}}]}]
      policies:
        localRateLimit:
        - {maxTokens: 1000000000000, tokensPerFill: 1000000000000, fillInterval: 1s}
      backends: [{host: "{{.Echo}}"}]
    - name: global
      matches: [{headers: [{name: x-route, value: {exact: global}}]}]
      policies:
        remoteRateLimit:
          host: %s
          domain: gwdiag-bench
          descriptors: [{entries: [{key: route, value: '"bench"'}]}]
      backends: [{host: "{{.Echo}}"}]
`, svc.Addr))
	names := []string{"none", "local", "global"}
	lat := make([][]time.Duration, len(names))
	for range 50 { // warm the connections
		for _, n := range names {
			e.do(b, http.MethodGet, "/", "", "x-route", n)
		}
	}
	b.ResetTimer()
	for range b.N {
		for i, n := range names {
			t0 := time.Now()
			r, err := e.try(http.MethodGet, "/", "", "x-route", n)
			lat[i] = append(lat[i], time.Since(t0))
			if err != nil || r.status != http.StatusOK {
				b.Fatalf("%s: %d %v", n, r.status, err)
			}
		}
	}
	b.StopTimer()
	for i, n := range names {
		slices.Sort(lat[i])
		b.ReportMetric(float64(lat[i][len(lat[i])/2].Nanoseconds()), n+"-p50-ns")
		b.ReportMetric(float64(lat[i][len(lat[i])*99/100].Nanoseconds()), n+"-p99-ns")
	}
}

// TestGlobalLimitOverride: a descriptor's limitOverride sets the limit the
// service applies, where the service's configuration has none for it.
func TestGlobalLimitOverride(t *testing.T) {
	svc := rateLimitService(t)
	e := start(t, echoWithRemote(svc.Addr, `          descriptors:
          - entries: [{key: scenario, value: '"override"'}]
            limitOverride: '{"unit": "day", "requestsPerUnit": 2}'`))
	for i, want := range []int{200, 200, 429} {
		r := e.do(t, http.MethodGet, "/", "")
		if r.status != want || r.header.Get(ratelimit.HeaderLimit) != "2, 2;w=86400" {
			t.Errorf("request %d: %d with x-ratelimit-limit %q; want %d with \"2, 2;w=86400\"", i+1, r.status, r.header.Get(ratelimit.HeaderLimit), want)
		}
	}
}
