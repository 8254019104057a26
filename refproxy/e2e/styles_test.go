package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/steps/mock"
)

// The configs of the reference's current docs: gateways with routes, and
// the llm shorthand, served through the same data plane as binds.

// TestGatewaysStyleLocalLimits: the docs' style, a gateway and top-level
// routes, with two local limits on one route (requests and tokens) and one
// on another: 200s, then 429 at each limit, the tighter limit's headers.
func TestGatewaysStyleLocalLimits(t *testing.T) {
	e := start(t, `
config:
  tracing: {otlpEndpoint: "http://localhost:4317", randomSampling: true}
gateways:
  default:
    port: 0
routes:
- name: chat
  matches: [{path: {pathPrefix: /v1}}]
  policies:
    localRateLimit:
    - {maxTokens: 5, tokensPerFill: 5, fillInterval: 1h}
    - {maxTokens: 100, tokensPerFill: 100, fillInterval: 1h, type: tokens}
  backends:
  - ai: {name: openai, provider: {openAI: {}}, hostOverride: "{{.LLM}}"}
- name: echo
  policies:
    localRateLimit:
    - {maxTokens: 2, tokensPerFill: 2, fillInterval: 1h}
  backends:
  - host: "{{.Echo}}"
`)
	// 40 tokens a response: the third takes the budget of 100 over, the
	// fourth is refused by the token limit with 2 requests still left.
	for i, want := range []int{200, 200, 200, 429} {
		r := e.chat(t, false, 10, 30)
		if r.status != want {
			t.Fatalf("chat %d: %d, want %d (%s)", i+1, r.status, want, r.body)
		}
		if want == 429 {
			wantReply(t, "chat refused by the token limit", r, 429, "100/0", 3600e9)
		}
	}
	if n := e.llm.Count(); n != 3 {
		t.Errorf("the mock LLM saw %d requests, want 3", n)
	}
	for i, want := range []int{200, 200, 429} {
		if r := e.do(t, http.MethodGet, "/anything", ""); r.status != want {
			t.Fatalf("echo %d: %d, want %d", i+1, r.status, want)
		}
	}
	keys := dumpRouteKeys(t, e)
	if want := []string{"default/default/bind/0/listener0/default/chat", "default/default/bind/0/listener0/default/echo"}; strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("route keys in /config_dump: %q, want %q (named as binds are)", keys, want)
	}
}

// TestStylesGiveOneRuntimeShape: the same routes written as binds and as
// gateways with routes give the same /config_dump, but for addresses.
func TestStylesGiveOneRuntimeShape(t *testing.T) {
	binds := start(t, `
binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: echo
      matches: [{path: {pathPrefix: /}}]
      policies:
        localRateLimit: [{maxTokens: 2, tokensPerFill: 2, fillInterval: 1h}]
        requestHeaderModifier: {set: {x-a: "1"}}
      backends: [{host: "127.0.0.1:9"}]
`)
	gateways := start(t, `
gateways:
  default: {port: 0, protocol: HTTP}
routes:
- name: echo
  policies:
    localRateLimit: [{maxTokens: 2, tokensPerFill: 2, fillInterval: 1h}]
    requestHeaderModifier: {set: {x-a: "1"}}
  backends: [{host: "127.0.0.1:9"}]
`)
	a, b := normalizedDump(t, binds), normalizedDump(t, gateways)
	if a != b {
		t.Errorf("/config_dump differs between the styles:\nbinds:    %s\ngateways: %s", a, b)
	}
}

// TestLLMStyleTokenLimit: the llm shorthand in front of the mock LLM,
// with a token limit on every model: the request's model picks the model
// entry, params.model replaces it, params.baseUrl and apiKey reach the
// provider, and the limit answers 429 once the budget is spent.
func TestLLMStyleTokenLimit(t *testing.T) {
	e := start(t, `
llm:
  port: 0
  policies:
    localRateLimit:
    - {maxTokens: 100, tokensPerFill: 100, fillInterval: 1h, type: tokens}
  models:
  - name: smart
    provider: openAI
    params: {model: gpt-4o-mini, baseUrl: "http://{{.LLM}}/v1", apiKey: sk-test}
  - name: echo/*
    provider: openai
    params: {baseUrl: "http://{{.Echo}}/openai", apiKey: sk-echo}
  - name: "*"
    provider: openAI
    params: {hostOverride: "{{.LLM}}"}
`)
	r := e.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"smart","messages":[{"role":"user","content":"hi"}]}`,
		mock.HeaderPromptTokens, "10", mock.HeaderCompletionTokens, "30")
	if r.status != 200 {
		t.Fatalf("smart: %d %s", r.status, r.body)
	}
	var sent struct{ Model string }
	if err := json.Unmarshal(e.llm.LastRequestBody(), &sent); err != nil || sent.Model != "gpt-4o-mini" {
		t.Errorf("the provider got model %q (%v), want params.model gpt-4o-mini", sent.Model, err)
	}
	// The echo model's provider shows what it was sent: the path under
	// its baseUrl and the API key.
	r = e.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"echo/x","messages":[]}`)
	var echo struct {
		Path    string
		Headers map[string]string
	}
	if err := json.Unmarshal([]byte(r.body), &echo); err != nil || r.status != 200 {
		t.Fatalf("echo model: %d %s (%v)", r.status, r.body, err)
	}
	if echo.Path != "/openai/chat/completions" || echo.Headers["Authorization"] != "Bearer sk-echo" {
		t.Errorf("echo provider got path %q and Authorization %q; want /openai/chat/completions and Bearer sk-echo", echo.Path, echo.Headers["Authorization"])
	}
	// The model list does not reach a provider.
	r = e.do(t, http.MethodGet, "/v1/models", "")
	if r.status != 200 || !strings.Contains(r.body, `"id":"smart"`) || !strings.Contains(r.body, `"id":"echo/*"`) {
		t.Errorf("GET /v1/models: %d %s", r.status, r.body)
	}
	// The echo reply carries no usage: counted as 0. Two more of 40 tokens
	// each take the budget over; the next is refused.
	for i, want := range []int{200, 200, 429} {
		if r := e.chat(t, false, 10, 30); r.status != want {
			t.Fatalf("chat %d: %d, want %d", i+1, r.status, want)
		} else if want == 429 {
			wantReply(t, "refused by the llm block's token limit", r, 429, "100/0", 3600e9)
		}
	}
	if keys := dumpRouteKeys(t, e); len(keys) != 1 || keys[0] != "llm:request" {
		t.Errorf("route keys: %q, want [llm:request] as the reference keys it", keys)
	}
}

// TestLLMStyleUnknownModel: a model no entry takes is the provider-style
// 404 of the reference, and reaches no backend.
func TestLLMStyleUnknownModel(t *testing.T) {
	e := start(t, `
llm:
  port: 0
  models:
  - {name: gpt-4o-mini, provider: openAI, params: {hostOverride: "{{.LLM}}"}}
  - {name: hidden, visibility: internal, provider: openAI, params: {hostOverride: "{{.LLM}}"}}
`)
	for _, tt := range []struct{ body, want string }{
		{`{"model":"gpt-5"}`, "Model gpt-5 not found"},
		{`{"model":"hidden"}`, "Model hidden not found"},
		{`{"messages":[]}`, "No model set"},
	} {
		r := e.do(t, http.MethodPost, "/v1/chat/completions", tt.body)
		if r.status != 404 || !strings.Contains(r.body, tt.want) || !strings.Contains(r.body, "model_not_found") {
			t.Errorf("%s: %d %s, want 404 %q", tt.body, r.status, r.body, tt.want)
		}
	}
	if n := e.llm.Count(); n != 0 {
		t.Errorf("the mock LLM saw %d requests, want 0", n)
	}
}

// TestConditionalLocalLimits: of a conditional localRateLimit the first
// entry whose CEL condition holds applies, the entry without one when
// none does; each entry is a budget of its own.
func TestConditionalLocalLimits(t *testing.T) {
	e := start(t, `
gateways:
  default: {port: 0}
routes:
- policies:
    localRateLimit:
      conditional:
      - condition: 'request.headers["x-tier"] == "gold"'
        maxTokens: 3
        tokensPerFill: 3
        fillInterval: 1h
      - condition: 'cidr("10.0.0.0/8").containsIP(source.address)'
        maxTokens: 100
        tokensPerFill: 100
        fillInterval: 1h
      - {maxTokens: 1, tokensPerFill: 1, fillInterval: 1h}
  backends: [{host: "{{.Echo}}"}]
`)
	for i, st := range []struct {
		tier   string
		status int
		limits string
	}{{"gold", 200, "3/2"}, {"", 200, "1/0"}, {"gold", 200, "3/1"}, {"", 429, "1/0"}, {"gold", 200, "3/0"}, {"gold", 429, "3/0"}, {"silver", 429, "1/0"}} {
		var hdr []string
		if st.tier != "" {
			hdr = []string{"x-tier", st.tier}
		}
		r := e.do(t, http.MethodGet, "/", "", hdr...)
		if r.status != st.status || r.limits() != st.limits {
			t.Errorf("request %d (tier %q): %d %s, want %d %s", i+1, st.tier, r.status, r.limits(), st.status, st.limits)
		}
	}
}

// TestRouteAndGatewayPolicies: cors, authorization, header modifiers and
// direct responses, on a gateway and its routes.
func TestRouteAndGatewayPolicies(t *testing.T) {
	e := start(t, `
gateways:
  default:
    port: 0
    cors:
      allowOrigins: ["https://*.example.com"]
      allowMethods: [GET, POST]
      allowHeaders: ["*"]
      exposeHeaders: [x-resp]
      maxAge: 5m
    authorization:
      rules:
      - deny: 'request.headers["x-block"] == "yes"'
routes:
- name: direct
  matches: [{path: {exact: /hello}}]
  policies:
    directResponse: {status: 202, body: "hello!"}
- name: admin
  matches: [{path: {pathPrefix: /admin}}]
  policies:
    authorization:
      rules: ['request.headers["x-role"] == "admin"']
  backends: [{host: "{{.Echo}}"}]
- name: echo
  policies:
    requestHeaderModifier:
      set: {x-set: "1"}
      add: {x-add: "2"}
      remove: [x-secret]
    responseHeaderModifier:
      set: {x-resp: "yes"}
  backends: [{host: "{{.Echo}}"}]
`)
	r := e.do(t, http.MethodGet, "/hello", "")
	if r.status != 202 || r.body != "hello!" {
		t.Errorf("direct response: %d %q, want 202 hello!", r.status, r.body)
	}
	r = e.do(t, http.MethodGet, "/anything", "", "x-secret", "s", "X-Set", "0", "Origin", "https://app.example.com")
	var echo struct{ Headers map[string]string }
	_ = json.Unmarshal([]byte(r.body), &echo)
	if echo.Headers["X-Set"] != "1" || echo.Headers["X-Add"] != "2" || echo.Headers["X-Secret"] != "" {
		t.Errorf("request headers at the backend: %v; want X-Set 1, X-Add 2, no X-Secret", echo.Headers)
	}
	if r.header.Get("x-resp") != "yes" || r.header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		r.header.Get("Access-Control-Expose-Headers") != "x-resp" {
		t.Errorf("response headers: %v; want x-resp and the CORS headers", r.header)
	}
	// A preflight is answered by the proxy; the echo backend never sees it.
	before := e.echo.Count()
	r = e.do(t, http.MethodOptions, "/anything", "", "Origin", "https://app.example.com", "Access-Control-Request-Method", "PUT", "Access-Control-Request-Headers", "x-a, x-b")
	if r.status != 200 || r.header.Get("Access-Control-Allow-Methods") != "GET,POST" || r.header.Get("Access-Control-Allow-Headers") != "x-a, x-b" ||
		r.header.Get("Access-Control-Max-Age") != "300" || e.echo.Count() != before {
		t.Errorf("preflight: %d %v; want 200 with the allowed methods and headers, not forwarded", r.status, r.header)
	}
	if r = e.do(t, http.MethodGet, "/anything", "", "Origin", "https://evil.test"); r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("an origin not allowed got Access-Control-Allow-Origin %q", r.header.Get("Access-Control-Allow-Origin"))
	}
	for _, tt := range []struct {
		path   string
		hdr    []string
		status int
	}{
		{"/anything", []string{"x-block", "yes"}, 403}, // the gateway's deny
		{"/admin", nil, 403},                           // no allow rule holds
		{"/admin", []string{"x-role", "admin"}, 200},
		{"/admin", []string{"x-role", "admin", "x-block", "yes"}, 403},
	} {
		if r := e.do(t, http.MethodGet, tt.path, "", tt.hdr...); r.status != tt.status {
			t.Errorf("GET %s %v: %d %q, want %d", tt.path, tt.hdr, r.status, r.body, tt.status)
		}
	}
}

// TestRemoteRateLimitLLMStyle: the docs' global token limit on the llm
// shorthand, with descriptors in CEL (a static value, a header and
// has(jwt.sub), which is false: refproxy validates no tokens), against
// the real rate-limit service: each organization's budget is spent by the
// responses' usage, and then refused.
func TestRemoteRateLimitLLMStyle(t *testing.T) {
	svc := rateLimitService(t)
	e := start(t, sprintf(`
llm:
  port: 0
  policies:
    remoteRateLimit:
      host: %s
      domain: gwdiag-styles
      failureMode: failClosed
      descriptors:
      - entries:
        - key: some-static-value
          value: '"something"'
        - key: organization
          value: 'request.headers["x-organization"]'
        - key: authenticated
          value: 'has(jwt.sub)'
        type: tokens
  models:
  - name: "*"
    provider: openAI
    params: {hostOverride: "{{.LLM}}", apiKey: "$GWDIAG_E2E_UNSET_KEY"}
`, svc.Addr))
	org := func(name string) []string { return []string{"x-organization", name} }
	for i, want := range []int{200, 200, 200, 429} {
		r := e.chat(t, false, 10, 30, org("acme")...)
		if r.status != want {
			t.Fatalf("acme %d: %d %s, want %d", i+1, r.status, r.body, want)
		}
		if want == 429 && r.header.Get("x-envoy-ratelimited") != "true" {
			t.Errorf("acme's 429 has no x-envoy-ratelimited: %v", r.header)
		}
	}
	if r := e.chat(t, false, 10, 30, org("globex")...); r.status != 200 {
		t.Errorf("globex: %d, want 200 (a budget of its own)", r.status)
	}
}

// dumpRouteKeys returns the route keys of the proxy's /config_dump.
func dumpRouteKeys(t *testing.T, e *env) []string {
	t.Helper()
	var d struct {
		Binds []struct {
			Listeners map[string]struct {
				Routes map[string]json.RawMessage
			}
		}
	}
	if err := json.Unmarshal([]byte(configDump(t, e)), &d); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, b := range d.Binds {
		for _, l := range b.Listeners {
			for k := range l.Routes {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

func configDump(t *testing.T, e *env) string {
	t.Helper()
	resp, err := http.Get("http://" + e.proxy.AdminAddr() + "/config_dump")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// normalizedDump is a proxy's /config_dump without its addresses.
func normalizedDump(t *testing.T, e *env) string {
	return regexp.MustCompile(`127\.0\.0\.1:\d+`).ReplaceAllString(configDump(t, e), "ADDR")
}
