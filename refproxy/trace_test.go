package refproxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/redact"
)

var fullTrace = []string{
	"requestStarted",
	"requestSnapshot/initial request",
	"requestSnapshot/gateway policies",
	"routeSelection",
	"policySelection",
	"requestSnapshot/route policies",
	"requestSnapshot/final request",
	"backendCallStart",
	"backendCallResult",
	"responseSnapshot/backend response ready",
	"responseSnapshot/final response",
	"requestFinished",
}

func TestTraceOfProxiedRequest(t *testing.T) {
	var gotXFF, gotHop string
	be := backendServer(t, "a", func(w http.ResponseWriter, r *http.Request) {
		gotXFF, gotHop = r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Hop")
		w.Write([]byte("ok"))
	})
	p := startProxy(t, oneRoute(be), WithEnv("gw-pod-1", "gwns", "gw"))
	s := watch(t, p, http.MethodPost, "")
	resp, body := get(t, "http://"+p.BindAddrs()[0]+"/get?x=1", "Connection", "X-Hop", "X-Hop", "secret", "X-Test", "yes")
	if resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("response %d %q, want 200 ok", resp.StatusCode, body)
	}
	if gotXFF != "127.0.0.1" {
		t.Errorf("backend X-Forwarded-For = %q, want 127.0.0.1", gotXFF)
	}
	if gotHop != "" {
		t.Errorf("hop-by-hop header named in Connection reached the backend: X-Hop=%q", gotHop)
	}
	evs := s.collect(t)
	if diff := cmp.Diff(fullTrace, types(evs)); diff != "" {
		t.Fatalf("event order (-want +got):\n%s", diff)
	}
	var last int64
	for i, e := range evs {
		if e.EventEnd < last {
			t.Errorf("event %d %s: eventEnd %d < previous %d", i, e.Type(), e.EventEnd, last)
		}
		last = e.EventEnd
		if (e.EventStart != nil) != (e.Type() == trace.BackendCallResult) {
			t.Errorf("event %d %s: eventStart = %v; want it set only on backendCallResult", i, e.Type(), e.EventStart)
		}
		if e.Severity != trace.SeverityInfo {
			t.Errorf("event %d %s: severity %q, want info", i, e.Type(), e.Severity)
		}
	}
	wantKey := "default/default/bind/0/listener0/default/httpbin"
	rs := evs[3].Message
	if rs["selectedRoute"] != wantKey || !slices.Equal(toStrings(rs["evaluatedRoutes"]), []string{wantKey}) {
		t.Errorf("routeSelection = %v, want selected and evaluated %q", rs, wantKey)
	}
	eff, _ := evs[4].Message["effectivePolicy"].(map[string]any)
	if len(eff) != 17 {
		t.Errorf("effectivePolicy has %d keys, want 17: %v", len(eff), eff)
	}
	for k, v := range eff {
		if v != nil {
			t.Errorf("effectivePolicy.%s = %v, want null (no policy)", k, v)
		}
	}
	init := evs[1].Message["requestState"].(map[string]any)
	req := init["request"].(map[string]any)
	want := map[string]any{"method": "GET", "path": "/get", "pathAndQuery": "/get?x=1", "scheme": "http", "version": "HTTP/1.1",
		"host": p.BindAddrs()[0], "uri": "http://" + p.BindAddrs()[0] + "/get?x=1"}
	for k, v := range want {
		if req[k] != v {
			t.Errorf("request.%s = %v, want %v", k, req[k], v)
		}
	}
	if h := req["headers"].(map[string]any); h["x-test"] != "yes" {
		t.Errorf("request.headers[x-test] = %v, want yes", h["x-test"])
	}
	if _, ok := req["startTime"].(string); !ok || !strings.HasSuffix(req["startTime"].(string), "Z") {
		t.Errorf("request.startTime = %v, want an ISO 8601 UTC string", req["startTime"])
	}
	src := init["source"].(map[string]any)
	if src["address"] != "127.0.0.1" || src["rawAddress"] != "127.0.0.1" || src["port"].(float64) <= 0 || src["port"] != src["rawPort"] {
		t.Errorf("source = %v", src)
	}
	if _, ok := init["backend"]; ok {
		t.Errorf("initial request snapshot has a backend block; want it only at final request")
	}
	if diff := cmp.Diff(map[string]any{"podName": "gw-pod-1", "namespace": "gwns", "gateway": "gw"}, init["env"]); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	final := evs[6].Message["requestState"].(map[string]any)
	if diff := cmp.Diff(map[string]any{"name": be, "type": "backend", "protocol": "http"}, final["backend"]); diff != "" {
		t.Errorf("final request backend (-want +got):\n%s", diff)
	}
	if evs[7].Message["target"] != be {
		t.Errorf("backendCallStart.target = %v, want %s", evs[7].Message["target"], be)
	}
	if r := evs[8].Message; r["status"] != float64(200) || r["error"] != nil {
		t.Errorf("backendCallResult = %v, want status 200 error null", r)
	}
	fr := evs[10].Message["requestState"].(map[string]any)["response"].(map[string]any)
	if fr["code"] != float64(200) || fr["headers"].(map[string]any)["x-backend"] != "a" {
		t.Errorf("final response = %v", fr)
	}
}

func toStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func TestTraceOfUnroutedRequest(t *testing.T) {
	be := backendServer(t, "a", nil)
	p := startProxy(t, `
binds:
- port: 0
  listeners:
  - routes:
    - name: one
      matches: [{path: {exact: /one}}]
      backends: [{host: "`+be+`"}]
    - name: two
      key: team/two.00.http # as the reference controller sets it
      matches: [{path: {pathPrefix: /two}}]
      backends: [{host: "`+be+`"}]
`)
	s := watch(t, p, http.MethodGet, "")
	resp, _ := get(t, "http://"+p.BindAddrs()[0]+"/nowhere")
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("status %d, want 404", resp.StatusCode)
	}
	evs := s.collect(t)
	want := []string{"requestStarted", "requestSnapshot/initial request", "requestSnapshot/gateway policies", "routeSelection",
		"responseSnapshot/final response", "requestFinished"}
	if diff := cmp.Diff(want, types(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	rs := evs[3]
	if rs.Message["selectedRoute"] != nil || rs.Severity != trace.SeverityError {
		t.Errorf("routeSelection = %v severity %s; want selectedRoute null, severity error", rs.Message, rs.Severity)
	}
	wantEval := []string{"default/default/bind/0/listener0/default/one", "team/two.00.http"}
	if diff := cmp.Diff(wantEval, toStrings(rs.Message["evaluatedRoutes"])); diff != "" {
		t.Errorf("evaluatedRoutes (-want +got):\n%s", diff)
	}
	if c := evs[4].Message["requestState"].(map[string]any)["response"].(map[string]any)["code"]; c != float64(404) {
		t.Errorf("final response code %v, want 404", c)
	}
	if evs[5].Severity != trace.SeverityWarn {
		t.Errorf("requestFinished severity %s, want warn", evs[5].Severity)
	}
}

func TestTraceOfUnreachableBackend(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now
	p := startProxy(t, oneRoute(dead))
	s := watch(t, p, http.MethodPost, "")
	resp, body := get(t, "http://"+p.BindAddrs()[0]+"/x")
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", resp.StatusCode)
	}
	if !strings.Contains(body, "connection refused") {
		t.Errorf("body %q does not name the transport error", body)
	}
	evs := s.collect(t)
	if diff := cmp.Diff(fullTrace, types(evs)); diff != "" {
		t.Fatalf("event order (-want +got):\n%s", diff)
	}
	res := evs[8]
	errStr, _ := res.Message["error"].(string)
	if res.Message["status"] != float64(503) || !strings.Contains(errStr, "connection refused") || res.Severity != trace.SeverityError {
		t.Errorf("backendCallResult = %v severity %s; want 503, the dial error, error", res.Message, res.Severity)
	}
	if evs[11].Severity != trace.SeverityError {
		t.Errorf("requestFinished severity %s, want error", evs[11].Severity)
	}
}

func TestWatchersAreFIFOAndOneShot(t *testing.T) {
	be := backendServer(t, "a", nil)
	p := startProxy(t, oneRoute(be))
	first := watch(t, p, http.MethodPost, "")
	second := watch(t, p, http.MethodGet, "")
	get(t, "http://"+p.BindAddrs()[0]+"/first")
	get(t, "http://"+p.BindAddrs()[0]+"/second")
	get(t, "http://"+p.BindAddrs()[0]+"/third") // nobody waits for it
	for _, c := range []struct {
		s    *traceStream
		path string
	}{{first, "/first"}, {second, "/second"}} {
		evs := c.s.collect(t)
		if len(evs) != 12 {
			t.Fatalf("%s: %d events, want 12", c.path, len(evs))
		}
		got := evs[1].Message["requestState"].(map[string]any)["request"].(map[string]any)["path"]
		if got != c.path {
			t.Errorf("watcher expecting %s traced %v", c.path, got)
		}
	}
	if p.reg.Waiting() {
		t.Errorf("registry still has watchers after both traces")
	}
}

func TestExpressionPicksRequest(t *testing.T) {
	be := backendServer(t, "a", nil)
	p := startProxy(t, oneRoute(be))
	s := watch(t, p, http.MethodPost, `?expression=request.path+%3D%3D+%22%2Fv1%2Fchat%2Fcompletions%22`)
	get(t, "http://"+p.BindAddrs()[0]+"/other")
	get(t, "http://"+p.BindAddrs()[0]+"/v1/chat/completions")
	evs := s.collect(t)
	if got := evs[1].Message["requestState"].(map[string]any)["request"].(map[string]any)["path"]; got != "/v1/chat/completions" {
		t.Errorf("traced %v, want /v1/chat/completions", got)
	}

	for _, q := range []string{"?expression=request.path+%3D%3D", "?expression=1+%2B+1", "?expression=nosuchvar"} {
		resp, err := http.Post("http://"+p.AdminAddr()+"/debug/trace"+q, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(string(b), "invalid expression: ") {
			t.Errorf("%s: %d %q, want 400 invalid expression: ...", q, resp.StatusCode, b)
		}
	}
}

func TestWatcherDisconnectIsDroppedAtOnce(t *testing.T) {
	p := startProxy(t, oneRoute(backendServer(t, "a", nil)))
	s := watch(t, p, http.MethodPost, "")
	if !p.reg.Waiting() {
		t.Fatal("no watcher registered after : ready")
	}
	s.cancel()
	eventually(t, "the watcher to be dropped", func() bool { return !p.reg.Waiting() })
}

func TestKeepaliveComments(t *testing.T) {
	p := startProxy(t, oneRoute(backendServer(t, "a", nil)))
	s := watch(t, p, http.MethodGet, "")
	select {
	case c := <-s.comments:
		if c != ": keepalive" {
			t.Errorf("comment %q, want : keepalive", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no keepalive comment within 5s (want one every second)")
	}
	if ct := s.resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	if cc := s.resp.Header.Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("Cache-Control %q", cc)
	}
}

// The backend-response-ready snapshot is the backend's answer; the proxy's own
// x-ratelimit-* headers appear only in the final response.
func TestTraceResponseSnapshotsSeparateProxyHeaders(t *testing.T) {
	be := backendServer(t, "a", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	cfg := strings.Replace(oneRoute(be), "      backends:", "      policies:\n        localRateLimit:\n        - {maxTokens: 5, tokensPerFill: 5, fillInterval: 60s}\n      backends:", 1)
	p := startProxy(t, cfg)
	s := watch(t, p, http.MethodPost, "")
	if resp, _ := get(t, "http://"+p.BindAddrs()[0]+"/get"); resp.Header.Get("X-Ratelimit-Limit") != "5" {
		t.Fatalf("x-ratelimit-limit = %q, want 5 (is the policy applied?)", resp.Header.Get("X-Ratelimit-Limit"))
	}
	headers := map[string]map[string]any{}
	for _, e := range s.collect(t) {
		if e.Type() == trace.ResponseSnapshot {
			headers[e.Stage()] = e.Message["requestState"].(map[string]any)["response"].(map[string]any)["headers"].(map[string]any)
		}
	}
	if _, ok := headers[trace.StageBackendResponseReady]["x-ratelimit-limit"]; ok {
		t.Errorf("backend response ready snapshot has x-ratelimit-limit: %v", headers[trace.StageBackendResponseReady])
	}
	if got := headers[trace.StageFinalResponse]["x-ratelimit-limit"]; got != "5" {
		t.Errorf("final response x-ratelimit-limit = %v, want 5", got)
	}
}

// TestTraceOfGatewaysStyle: a route of the docs' gateways style is named
// as the reference's docs trace names it, its effectivePolicy holds the
// policies that apply (the gateway's with the route's), and the headers
// of config.sensitiveHeaders are redacted in the snapshots.
func TestTraceOfGatewaysStyle(t *testing.T) {
	var gotKey, gotAdded string
	be := backendServer(t, "a", func(w http.ResponseWriter, r *http.Request) {
		gotKey, gotAdded = r.Header.Get("X-Api-Key"), r.Header.Get("X-Added")
		w.Write([]byte("ok"))
	})
	p := startProxy(t, `
config:
  sensitiveHeaders: [x-api-key]
gateways:
  default:
    port: 0
    authorization:
      rules: ['request.headers["x-api-key"] != ""']
routes:
- name: httpbin
  policies:
    requestHeaderModifier: {set: {x-added: "1"}}
    cors: {allowOrigins: ["*"]}
  backends:
  - host: `+be+`
`)
	s := watch(t, p, http.MethodPost, "")
	resp, _ := get(t, "http://"+p.BindAddrs()[0]+"/get", "X-Api-Key", "secret")
	if resp.StatusCode != 200 || gotKey != "secret" || gotAdded != "1" {
		t.Fatalf("response %d, backend got x-api-key %q and x-added %q; want 200, secret, 1", resp.StatusCode, gotKey, gotAdded)
	}
	evs := s.collect(t)
	if diff := cmp.Diff(fullTrace, types(evs)); diff != "" {
		t.Fatalf("event order (-want +got):\n%s", diff)
	}
	if got, want := evs[3].Message["selectedRoute"], "default/default/bind/0/listener0/default/httpbin"; got != want {
		t.Errorf("selectedRoute %v, want %s", got, want)
	}
	eff := evs[4].Message["effectivePolicy"].(map[string]any)
	for _, k := range []string{"authorization", "cors", "requestHeaderModifier"} {
		if eff[k] == nil {
			t.Errorf("effectivePolicy.%s is null, want the route's policy", k)
		}
	}
	if eff["localRateLimit"] != nil || eff["directResponse"] != nil {
		t.Errorf("effectivePolicy holds policies the route does not have: %v", eff)
	}
	for _, i := range []int{1, 5, 6} {
		h := evs[i].Message["requestState"].(map[string]any)["request"].(map[string]any)["headers"].(map[string]any)
		if v, _ := h["x-api-key"].(string); !redact.IsMarker(v) {
			t.Errorf("%s: x-api-key %v, want a redacted value", types(evs)[i], h["x-api-key"])
		}
	}
}

// policyRoutes are two routes whose policies give reasons: guarded, whose
// authorization refuses a request with x-bad: 1, and tiered, a
// conditional limit (3 an hour for x-tier: gold, else 1), both to backend be.
func policyRoutes(be string) string {
	return `- name: guarded
  matches: [{path: {pathPrefix: /guarded}}]
  policies:
    authorization:
      rules:
      - deny: 'request.headers["x-bad"] == "1"'
  backends: [{host: ` + be + `}]
- name: tiered
  matches: [{path: {pathPrefix: /tiered}}]
  policies:
    localRateLimit:
      conditional:
      - condition: 'request.headers["x-tier"] == "gold"'
        maxTokens: 3
        tokensPerFill: 3
        fillInterval: 1h
      - {maxTokens: 1, tokensPerFill: 1, fillInterval: 1h}
  backends: [{host: ` + be + `}]
`
}

// TestReasonsOfRoutePolicies: a request the route's authorization refuses
// names the rule (policy event, and requestFinished.cause authorization);
// a conditional limit says which of its entries applied and which did not.
func TestReasonsOfRoutePolicies(t *testing.T) {
	be := backendServer(t, "a", nil)
	p := startProxy(t, `
gateways:
  default: {port: 0}
routes:
`+policyRoutes(be))
	base := "http://" + p.BindAddrs()[0]
	s := watch(t, p, http.MethodPost, "")
	if resp, _ := get(t, base+"/guarded", "X-Bad", "1"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d, want 403", resp.StatusCode)
	}
	evs := s.collect(t)
	var details string
	for _, e := range evs {
		if e.Type() == trace.PolicyResultType && e.Message["kind"] == "authorization" {
			details, _ = e.Message["result"].(map[string]any)["details"].(string)
		}
	}
	if details != `refused: deny rule "request.headers[\"x-bad\"] == \"1\"" holds` {
		t.Errorf("authorization details %q", details)
	}
	if c := evs[len(evs)-1].Message["cause"].(map[string]any); c["kind"] != "authorization" || c["policy"] != "authorization" {
		t.Errorf("cause %v, want authorization", c)
	}

	s = watch(t, p, http.MethodPost, "")
	get(t, base+"/tiered", "X-Tier", "gold")
	var entries []any
	for _, e := range s.collect(t) {
		if e.Type() == trace.PolicyResultType && e.Message["kind"] == "localRateLimit" {
			entries, _ = e.Message["result"].(map[string]any)["entries"].([]any)
		}
	}
	if len(entries) != 2 {
		t.Fatalf("entries %v, want the two conditional entries", entries)
	}
	gold, fallback := entries[0].(map[string]any), entries[1].(map[string]any)
	if gold["applies"] != true || gold["remaining"] != float64(2) || gold["condition"] != `request.headers["x-tier"] == "gold"` ||
		fallback["applies"] != false || fallback["condition"] != nil || fallback["remaining"] != nil {
		t.Errorf("entries:\n%v\n%v\nwant the gold entry applied with 2 left, the fallback not", gold, fallback)
	}
}

// TestReasonsOfAKeyedLimit: a 429 of a limit with a key names the key
// expression and the request's bucket (its key, or the shared bucket of
// requests without one), in the policy event and in requestFinished.cause;
// a key that is a credential (an x-api-key) is named by its fingerprint,
// the same in the three places.
func TestReasonsOfAKeyedLimit(t *testing.T) {
	be := backendServer(t, "a", nil)
	p := startProxy(t, `
gateways:
  default: {port: 0}
routes:
- name: api
  matches: [{path: {pathPrefix: /api}}]
  policies:
    localRateLimit:
    - {maxTokens: 1, tokensPerFill: 1, fillInterval: 1h, key: 'request.headers["x-api-key"]'}
  backends: [{host: `+be+`}]
- name: tenant
  policies:
    localRateLimit:
    - {maxTokens: 1, tokensPerFill: 1, fillInterval: 1h, key: 'request.headers["x-tenant"]'}
  backends: [{host: `+be+`}]
`)
	base := "http://" + p.BindAddrs()[0]
	for _, tc := range []struct {
		path, header, key, expr string
		// bucket is the sentence's words; want the bucket field (a
		// marker: any fingerprint, the same everywhere).
		bucket string
		want   any
	}{
		{"/", "X-Tenant", "alice", `request.headers["x-tenant"]`, `for key "alice"`, "alice"},
		{"/", "", "", `request.headers["x-tenant"]`, "in the bucket of requests without a key", nil},
		{"/api", "X-Api-Key", "alice", `request.headers["x-api-key"]`, `for key "<redacted:`, "<redacted:"},
	} {
		var hdr []string
		if tc.key != "" {
			hdr = []string{tc.header, tc.key}
		}
		if resp, _ := get(t, base+tc.path, hdr...); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %q: first request %d, want 200", tc.header, tc.key, resp.StatusCode)
		}
		s := watch(t, p, http.MethodPost, "")
		if resp, _ := get(t, base+tc.path, hdr...); resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("%s %q: second request %d, want 429", tc.header, tc.key, resp.StatusCode)
		}
		evs := s.collect(t)
		var entry map[string]any
		var details string
		for _, e := range evs {
			if e.Type() == trace.PolicyResultType && e.Message["kind"] == "localRateLimit" {
				res := e.Message["result"].(map[string]any)
				details, _ = res["details"].(string)
				entries, _ := res["entries"].([]any)
				if len(entries) == 1 {
					entry, _ = entries[0].(map[string]any)
				}
			}
		}
		bucket := entry["bucket"]
		if w, ok := tc.want.(string); ok && strings.HasPrefix(w, "<redacted:") {
			if b, _ := bucket.(string); redact.IsMarker(b) {
				tc.want, tc.bucket = b, fmt.Sprintf("for key %q", b)
			}
		}
		if entry == nil || entry["key"] != tc.expr || bucket != tc.want || entry["refused"] != true {
			t.Errorf("%s %q: entry %v, want key %s, bucket %v and refused", tc.header, tc.key, entry, tc.expr, tc.want)
		}
		if !strings.Contains(details, tc.bucket) {
			t.Errorf("%s %q: details %q, want %q", tc.header, tc.key, details, tc.bucket)
		}
		if c := evs[len(evs)-1].Message["cause"].(map[string]any); !strings.Contains(c["reason"].(string), tc.bucket) {
			t.Errorf("%s %q: cause %v, want its reason to name the bucket (%s)", tc.header, tc.key, c, tc.bucket)
		}
	}
}

// TestReasonsHaveTheirWrittenShape: the reasons refproxy traces are the
// types golden/trace writes them as (trace.RouteReason, trace.PolicyResult
// with its LimitEntry entries, trace.Cause), field for field: decoded
// strictly, nothing the types do not name. Requests that give every shape
// of them: routes missed on path, method, header (missing and wrong) and
// hostname, with several matches; a conditional limit, a keyed one (its
// bucket and the bucket of requests without a key), a refusal; an
// authorization refusal; a direct response.
func TestReasonsHaveTheirWrittenShape(t *testing.T) {
	be := backendServer(t, "a", nil)
	p := startProxy(t, `
gateways:
  default: {port: 0}
routes:
- name: submit
  matches: [{path: {pathPrefix: /submit}, method: POST}, {path: {exact: /post}, method: POST}]
  backends: [{host: `+be+`}]
- name: tenant
  hostnames: [tenant.example]
  matches: [{path: {pathPrefix: /t}, headers: [{name: x-tenant, value: {exact: blue}}]}]
  backends: [{host: `+be+`}]
`+policyRoutes(be)+`- name: keyed
  matches: [{path: {pathPrefix: /keyed}}]
  policies:
    localRateLimit:
    - {maxTokens: 1, tokensPerFill: 1, fillInterval: 1h, key: 'request.headers["x-user"]'}
    - {maxTokens: 5, tokensPerFill: 5, fillInterval: 60s}
  backends: [{host: `+be+`}]
- name: direct
  matches: [{path: {pathPrefix: /direct}}]
  policies:
    directResponse: {status: 204, body: ""}
`)
	base := "http://" + p.BindAddrs()[0]
	shapes := map[string]int{}
	for _, r := range []struct {
		path   string
		header []string
	}{
		{"/submit/x", nil},
		{"/t", []string{"Host", "tenant.example"}},
		{"/t", []string{"X-Tenant", "red"}},
		{"/guarded", []string{"X-Bad", "1"}},
		{"/tiered", []string{"X-Tier", "gold"}},
		{"/tiered", nil},
		{"/tiered", nil},
		{"/keyed", []string{"X-User", "alice"}},
		{"/keyed", []string{"X-User", "alice"}},
		{"/keyed", nil},
		{"/direct", nil},
		{"/nowhere", nil},
	} {
		s := watch(t, p, http.MethodPost, "")
		req, err := http.NewRequest(http.MethodGet, base+r.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(r.header); i += 2 {
			if r.header[i] == "Host" {
				req.Host = r.header[i+1]
			} else {
				req.Header.Set(r.header[i], r.header[i+1])
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		for _, e := range s.collect(t) {
			what := fmt.Sprintf("%s %s: %s", r.path, r.header, e.Type())
			switch e.Type() {
			case trace.RouteSelection:
				var rs []trace.RouteReason
				if err := trace.StrictReason(e.Message["reasons"], &rs); err != nil || len(rs) == 0 {
					t.Errorf("%s: reasons %v do not decode as trace.RouteReason: %v", what, e.Message["reasons"], err)
				}
				for _, r := range rs {
					shapes["route "+r.Result+" "+r.Condition]++
					if r.Match != nil {
						shapes["route of several matches"]++
					}
				}
			case trace.PolicyResultType:
				switch kind := e.Message["kind"]; kind {
				case "localRateLimit", "authorization":
					var pr trace.PolicyResult
					if err := trace.StrictReason(e.Message, &pr); err != nil {
						t.Errorf("%s: %v does not decode as trace.PolicyResult: %v", what, e.Message, err)
					}
					shapes[fmt.Sprintf("%s %s", kind, pr.Result.Decision)]++
					for _, en := range pr.Result.Entries {
						shapes[fmt.Sprintf("entry keyed %v conditional %v", en.Key != nil, en.Applies != nil)]++
					}
				}
			case trace.RequestFinished:
				if c, ok := e.Message["cause"]; ok {
					var cause trace.Cause
					if err := trace.StrictReason(c, &cause); err != nil || cause.Kind == "" {
						t.Errorf("%s: cause %v does not decode as trace.Cause: %v", what, c, err)
					}
					shapes["cause "+cause.Kind]++
				}
			}
		}
	}
	// The requests gave every shape: a test that saw fewer would hold
	// nothing to the types.
	for _, want := range []string{"route noMatch path", "route noMatch method", "route noMatch header", "route noMatch hostname",
		"route selected ", "route of several matches", "authorization refused", "localRateLimit allowed", "localRateLimit refused",
		"entry keyed true conditional false", "entry keyed false conditional true", "entry keyed false conditional false",
		"cause noRoute", "cause authorization", "cause rateLimit", "cause directResponse"} {
		if shapes[want] == 0 {
			t.Errorf("no reason of the shape %q among %v", want, shapes)
		}
	}
}
