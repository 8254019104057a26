package refproxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/refproxy/config"
	"github.com/gwdiag/gwdiag/steps/mock"
)

func TestRouteMatching(t *testing.T) {
	a, b, c, d := backendServer(t, "a", nil), backendServer(t, "b", nil), backendServer(t, "c", nil), backendServer(t, "d", nil)
	p := startProxy(t, fmt.Sprintf(`
binds:
- port: 0
  listeners:
  - routes:
    - name: exact
      matches: [{path: {exact: /status}, method: GET}]
      backends: [{host: %q}]
    - name: regex-header
      matches:
      - path: {regex: "/v2/[a-z]+"}
        headers: [{name: x-tenant, value: {exact: blue}}]
      backends: [{host: %q}]
    - name: hosts
      hostnames: [api.example.com, "*.wild.example"]
      backends: [{host: %q}]
    - name: prefix
      matches: [{path: {pathPrefix: /api}}]
      backends: [{host: %q}]
`, a, b, c, d))
	base := "http://" + p.BindAddrs()[0]
	tests := []struct {
		name string
		path string
		hdr  []string
		want string // x-backend, or "404"
	}{
		{"exact path and method", "/status", nil, "a"},
		{"exact does not match a longer path", "/status/x", nil, "404"},
		{"regex with header", "/v2/abc", []string{"X-Tenant", "blue"}, "b"},
		{"regex is anchored", "/v2/abc/def", []string{"X-Tenant", "blue"}, "404"},
		{"regex without header", "/v2/abc", nil, "404"},
		{"header value mismatch", "/v2/abc", []string{"X-Tenant", "red"}, "404"},
		{"hostname exact", "/anything", []string{"Host", "api.example.com"}, "c"},
		{"hostname with port and case", "/anything", []string{"Host", "API.example.com:8080"}, "c"},
		{"hostname wildcard", "/anything", []string{"Host", "x.wild.example"}, "c"},
		{"wildcard needs a label", "/anything", []string{"Host", "wild.example"}, "404"},
		{"prefix", "/api/v1", nil, "d"},
		{"prefix is segment-wise", "/apix", nil, "404"},
		{"prefix itself", "/api", nil, "d"},
		{"first match wins", "/api", []string{"Host", "api.example.com"}, "c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, _ := get(t, base+tt.path, tt.hdr...)
			got := resp.Header.Get("x-backend")
			if resp.StatusCode == http.StatusNotFound {
				got = "404"
			}
			if got != tt.want {
				t.Errorf("GET %s %v went to %q (status %d), want %q", tt.path, tt.hdr, got, resp.StatusCode, tt.want)
			}
		})
	}
	resp, err := http.Post(base+"/status", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST /status: %d, want 404 (route is GET only)", resp.StatusCode)
	}
}

func TestStreamingPassesChunkByChunk(t *testing.T) {
	release := make(chan struct{})
	be := backendServer(t, "sse", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: two\n\n")
	})
	p := startProxy(t, oneRoute(be))
	resp, err := http.Get("http://" + p.BindAddrs()[0] + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "data: one\n" {
		t.Fatalf("first chunk %q, %v", line, err)
	}
	// The first chunk arrived while the backend still holds the second.
	close(release)
	rest, _ := io.ReadAll(br)
	if string(rest) != "\ndata: two\n\n" {
		t.Errorf("rest %q", rest)
	}
}

func TestRequestRateLimit(t *testing.T) {
	be := backendServer(t, "a", nil)
	p := startProxy(t, `
binds:
- port: 0
  listeners:
  - routes:
    - name: limited
      policies:
        localRateLimit: [{maxTokens: 2, tokensPerFill: 1, fillInterval: 1h}]
      backends: [{host: "`+be+`"}]
`)
	url := "http://" + p.BindAddrs()[0] + "/x"
	for i, want := range []string{"1", "0"} {
		resp, _ := get(t, url)
		if resp.StatusCode != 200 || resp.Header.Get("x-ratelimit-remaining") != want || resp.Header.Get("x-ratelimit-limit") != "2" {
			t.Errorf("request %d: %d remaining=%q limit=%q, want 200 remaining=%s limit=2", i+1, resp.StatusCode,
				resp.Header.Get("x-ratelimit-remaining"), resp.Header.Get("x-ratelimit-limit"), want)
		}
	}
	s := watch(t, p, http.MethodPost, "")
	resp, body := get(t, url)
	if resp.StatusCode != http.StatusTooManyRequests || body != "rate limit exceeded" {
		t.Errorf("third request: %d %q, want 429 rate limit exceeded", resp.StatusCode, body)
	}
	evs := s.collect(t)
	want := []string{"requestStarted", "requestSnapshot/initial request", "requestSnapshot/gateway policies", "routeSelection",
		"policySelection", "policy", "requestSnapshot/route policies", "responseSnapshot/final response", "requestFinished"}
	if diff := cmp.Diff(want, types(evs)); diff != "" {
		t.Fatalf("events of a refused request (-want +got):\n%s", diff)
	}
	// The limit's reason: the entry that refused, from where, with its
	// state, its refill in the seconds the client's headers said (no
	// "refills in 49 s" beside a header and a resetSeconds of 48).
	reset := resp.Header.Get("x-ratelimit-reset")
	if n, err := strconv.Atoi(reset); err != nil || n < 3590 || n > 3600 || resp.Header.Get("retry-after") != reset {
		t.Errorf("x-ratelimit-reset %q, retry-after %q: want the same whole seconds, up to an hour", reset, resp.Header.Get("retry-after"))
	}
	result := evs[5].Message["result"].(map[string]any)
	if got := result["details"]; got != "refused by localRateLimit[0] of the inline policies of route default/limited (1 request per hour (bucket of 2)): exhausted, refills in "+reset+" s" {
		t.Errorf("policy details %q, want it to refill in the %s s of x-ratelimit-reset", got, reset)
	}
	if got := result["entries"].([]any)[0].(map[string]any)["resetSeconds"]; fmt.Sprint(got) != reset {
		t.Errorf("resetSeconds %v, want x-ratelimit-reset's %s", got, reset)
	}
	rl := evs[4].Message["effectivePolicy"].(map[string]any)["localRateLimit"]
	wantRL := []any{map[string]any{"maxTokens": float64(2), "tokensPerFill": float64(1), "fillInterval": "3600s", "type": "requests"}}
	if diff := cmp.Diff(wantRL, rl); diff != "" {
		t.Errorf("effectivePolicy.localRateLimit (-want +got):\n%s", diff)
	}
	if c := evs[7].Message["requestState"].(map[string]any)["response"].(map[string]any)["code"]; c != float64(429) {
		t.Errorf("final response %v, want 429", c)
	}
}

func TestGatewayPolicyCapsAllRoutes(t *testing.T) {
	be := backendServer(t, "a", nil)
	p := startProxy(t, `
binds:
- port: 0
  listeners:
  - routes:
    - name: one
      matches: [{path: {pathPrefix: /one}}]
      backends: [{host: "`+be+`"}]
    - name: two
      backends: [{host: "`+be+`"}]
policies:
- name: {name: cap, namespace: default}
  target: {gateway: {gatewayName: bind/0, gatewayNamespace: default}}
  phase: gateway
  policy:
    localRateLimit: [{maxTokens: 2, tokensPerFill: 2, fillInterval: 1h}]
`)
	base := "http://" + p.BindAddrs()[0]
	var codes []int
	for _, path := range []string{"/one", "/two", "/one", "/two"} {
		resp, _ := get(t, base+path)
		codes = append(codes, resp.StatusCode)
	}
	if diff := cmp.Diff([]int{200, 200, 429, 429}, codes); diff != "" {
		t.Errorf("status codes across routes (-want +got):\n%s", diff)
	}
}

func TestTokenLimitAndUsageWarning(t *testing.T) {
	p := llmProxy(t, mock.NewLLM(), 100)
	url := "http://" + p.BindAddrs()[0] + "/v1/chat/completions"
	post := func(hdr ...string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	// Usage missing: the request succeeds, the trace warns, nothing is charged.
	s := watch(t, p, http.MethodPost, "")
	if resp := post(mock.HeaderUsage, mock.UsageMissing); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	evs := s.collect(t)
	fin := evs[len(evs)-1]
	if fin.Type() != trace.RequestFinished || fin.Severity != trace.SeverityWarn || len(toStrings(fin.Message["warnings"])) != 1 {
		t.Errorf("requestFinished = %+v, want severity warn with one warning", fin)
	}
	// 60 + 60 tokens: the second response takes the bucket over; it still succeeds.
	for i := range 2 {
		if resp := post(mock.HeaderPromptTokens, "30", mock.HeaderCompletionTokens, "30"); resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d, want 200", i+1, resp.StatusCode)
		}
	}
	if resp := post(); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("after 120 of 100 tokens: status %d, want 429", resp.StatusCode)
	}
}

func TestReloadKeepsInFlightRequests(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	slow := backendServer(t, "slow", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(started)
			<-release
		}
		fmt.Fprint(w, "slow done")
	})
	other := backendServer(t, "other", nil)
	cfgA := `
binds:
- port: 0
  listeners:
  - routes:
    - backends: [{host: "` + slow + `"}]
`
	p, file := startWatching(t, cfgA)
	base := "http://" + p.BindAddrs()[0]
	type result struct {
		code int
		body string
		err  error
	}
	inflight := make(chan result, 1)
	go func() {
		resp, err := http.Get(base + "/slow")
		if err != nil {
			inflight <- result{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		inflight <- result{resp.StatusCode, string(b), err}
	}()
	<-started

	// A bad config is rejected and the old one stays.
	bad := &config.Config{Binds: []config.Bind{{Listeners: []config.Listener{{Routes: []config.Route{{Matches: []config.Match{{Path: &config.PathMatch{}}}}}}}}}}
	want := "config: binds[0].listeners[0].routes[0].matches[0].path: set exactly one of exact, pathPrefix or regex"
	if err := p.Reload(bad); err == nil || err.Error() != want {
		t.Errorf("Reload(bad) = %v, want %q", err, want)
	}
	// Port 0 binds are identified by position, so the listener stays across
	// a reload; the new table sends everything to other.
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(cfgA, slow, other)), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the file change to be picked up", func() bool {
		resp, err := http.Get(base + "/x")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.Header.Get("x-backend") == "other"
	})
	// A broken file is rejected; routing stays.
	if err := os.WriteFile(file, []byte("binds: [{port: nope}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.ReloadFile(); err == nil || !strings.Contains(err.Error(), "c.yaml:1: binds[0].port") {
		t.Errorf("ReloadFile of a broken file: %v, want a file:line: field error", err)
	}
	if resp, _ := get(t, base+"/x"); resp.Header.Get("x-backend") != "other" {
		t.Errorf("after a rejected reload, traffic went to %q", resp.Header.Get("x-backend"))
	}
	close(release)
	r := <-inflight
	if r.err != nil || r.code != 200 || r.body != "slow done" {
		t.Errorf("in-flight request across reload: %d %q %v, want 200 slow done", r.code, r.body, r.err)
	}
}

func TestQuitQuitQuitIsGracefulAndReleasesPorts(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	be := backendServer(t, "a", func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		fmt.Fprint(w, "finished")
	})
	cfg, err := config.Parse("q.yaml", []byte(oneRoute(be)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(cfg, WithAdminAddr("127.0.0.1:0"), WithLogOutput(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	bind, adminAddr := p.BindAddrs()[0], p.AdminAddr()
	done := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + bind + "/slow")
		if err != nil {
			done <- "error: " + err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- string(b)
	}()
	<-started
	resp, err := http.Get("http://" + adminAddr + "/quitquitquit")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET /quitquitquit: %d Allow=%q, want 405 Allow=POST", resp.StatusCode, resp.Header.Get("Allow"))
	}
	resp, err = http.Post("http://"+adminAddr+"/quitquitquit", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "shutdown now\n" {
		t.Errorf("body %q, want shutdown now", b)
	}
	select {
	case <-p.Done():
		t.Fatal("proxy stopped while a request was in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if got := <-done; got != "finished" {
		t.Errorf("in-flight request got %q, want finished", got)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after quitquitquit")
	}
	for _, addr := range []string{bind, adminAddr} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("port %s not released: %v", addr, err)
			continue
		}
		ln.Close()
	}
}

func TestStartFailsOnBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg, _ := config.Parse("b.yaml", []byte(oneRoute("127.0.0.1:1")))
	p, err := New(cfg, WithAdminAddr(ln.Addr().String()), WithLogOutput(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("Start on a busy admin port: %v, want address already in use", err)
	}
}

// BenchmarkStartShutdown is what the conformance suite pays per scenario.
func BenchmarkStartShutdown(b *testing.B) {
	cfg, err := config.Parse("b.yaml", []byte(oneRoute("127.0.0.1:1")))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		p, err := New(cfg, WithAdminAddr("127.0.0.1:0"), WithLogOutput(io.Discard))
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		if err := p.Shutdown(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

func TestStreamingLLMChargedAfterStream(t *testing.T) {
	llm := mock.NewLLM()
	p := llmProxy(t, llm, 50)
	url := "http://" + p.BindAddrs()[0] + "/v1/chat/completions"
	postStream(t, url, strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`),
		map[string]string{mock.HeaderPromptTokens: "30", mock.HeaderCompletionTokens: "30"})
	if !strings.Contains(string(llm.LastRequestBody()), `"include_usage":true`) {
		t.Errorf("backend got %s; want stream_options.include_usage added", llm.LastRequestBody())
	}
	// The 60 tokens are charged when the stream ends, just after the client has it.
	eventually(t, "the next request to be refused", func() bool {
		// Polls report no usage, so only the stream's charge can exhaust the bucket.
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"model":"m","messages":[]}`))
		req.Header.Set(mock.HeaderUsage, mock.UsageMissing)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		return r.StatusCode == http.StatusTooManyRequests
	})
}

// TestLargeLLMRequestBody: request bodies beyond what the server holds in
// memory (64 KiB) reach the token route as a stream; include_usage is still
// added below llm.MaxRequestSize, and above it the body goes on untouched.
func TestLargeLLMRequestBody(t *testing.T) {
	llm := mock.NewLLM()
	p := llmProxy(t, llm, 1_000_000)
	url := "http://" + p.BindAddrs()[0] + "/v1/chat/completions"
	for _, tc := range []struct {
		name    string
		size    int
		chunked bool
		usage   bool // include_usage added
	}{
		{"200 KiB, Content-Length", 200 << 10, false, true},
		{"200 KiB, chunked", 200 << 10, true, true},
		{"over MaxRequestSize, untouched", 17 << 20, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("x", tc.size) + `"}]}`
			var rd io.Reader = strings.NewReader(body)
			if tc.chunked {
				rd = io.MultiReader(rd) // unknown length: sent chunked
			}
			postStream(t, url, rd, nil)
			sent := llm.LastRequestBody()
			if added := strings.Contains(string(sent), `"include_usage":true`); added != tc.usage {
				t.Errorf("include_usage added = %v, want %v", added, tc.usage)
			}
			want := body
			if tc.usage {
				want = `{"stream_options":{"include_usage":true},` + body[1:]
			}
			if string(sent) != want {
				t.Errorf("backend got %d bytes, want %d (the body as sent, with include_usage as expected)", len(sent), len(want))
			}
		})
	}
}

// postStream posts a streaming chat completion (JSON body, extra headers)
// and requires a 200 and a complete stream.
func postStream(t *testing.T, url string, body io.Reader, headers map[string]string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, body)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(got), "data: [DONE]") {
		t.Fatalf("stream: status %d, body %.200q", resp.StatusCode, got)
	}
}

// llmProxy runs a proxy with one route to the mock LLM llm, limited to
// budget tokens an hour.
func llmProxy(t *testing.T, llm http.Handler, budget int) *Proxy {
	t.Helper()
	llmSrv, err := mock.Listen("127.0.0.1:0", llm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { llmSrv.Close() })
	return startProxy(t, fmt.Sprintf(`
binds:
- port: 0
  listeners:
  - routes:
    - name: openai
      policies:
        localRateLimit: [{maxTokens: %d, tokensPerFill: %d, fillInterval: 1h, type: tokens}]
      backends:
      - ai: {name: openai, provider: {openAI: {}}, hostOverride: %q}
`, budget, budget, llmSrv.Addr()))
}

// TestReloadNeverEmptiesARunningProxy: an editor that truncates the config
// file before writing it, or a ConfigMap update, passes through an empty
// file. Reloading it must keep the running config (traffic flows), say why
// (the error, and /config_dump's X-Config-Rejected header), and apply the
// file again once it is whole.
func TestReloadNeverEmptiesARunningProxy(t *testing.T) {
	be := backendServer(t, "be", nil)
	whole := oneRoute(be)
	p, file := startWatching(t, whole)
	base := "http://" + p.BindAddrs()[0]
	for _, content := range []string{"", "\n", "# nothing yet\n", "binds: []\n"} {
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		err := p.ReloadFile()
		if err == nil || !strings.Contains(err.Error(), "c.yaml: the config has no binds") {
			t.Errorf("reload of %q: got %v, want a refusal naming the file", content, err)
		}
		if resp, _ := get(t, base+"/x"); resp.StatusCode != 200 {
			t.Errorf("after reloading %q: status %d, want the running config to keep serving", content, resp.StatusCode)
		}
		resp, _ := adminDo(t, p, http.MethodGet, "/config_dump")
		if got := resp.Header.Get("X-Config-Rejected"); !strings.Contains(got, "no binds") {
			t.Errorf("after reloading %q: X-Config-Rejected %q, want the reason", content, got)
		}
	}
	// The poller applies the whole file again and the rejection is gone.
	if err := os.WriteFile(file, []byte(whole), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the restored file to be applied", func() bool {
		resp, _ := adminDo(t, p, http.MethodGet, "/config_dump")
		return resp.Header.Get("X-Config-Rejected") == "" && resp.Header.Get("X-Config-Source") == file
	})
}

// startWatching writes a config file c.yaml with content and starts a proxy
// that reloads it when it changes; the proxy stops when the test ends.
func startWatching(t *testing.T, content string) (*Proxy, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(cfg, WithAdminAddr("127.0.0.1:0"), WithLogOutput(io.Discard), WithConfigFile(file, true))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	return p, file
}

// TestRouteReasonsBounded: a bind of many routes gives at most a hundred
// reasons in routeSelection (an event stays within what readers take),
// always with the route that came closest, and counts the rest.
func TestRouteReasonsBounded(t *testing.T) {
	be := backendServer(t, "a", nil)
	var b strings.Builder
	b.WriteString("binds:\n- port: 0\n  listeners:\n  - routes:\n")
	for i := range 150 {
		fmt.Fprintf(&b, "    - name: r%03d\n      matches: [{path: {pathPrefix: /p%03d}}]\n      backends: [{host: %q}]\n", i, i, be)
	}
	// The closest miss sorts last: it fails on the method, every other route on the path.
	fmt.Fprintf(&b, "    - name: zz-post\n      matches: [{path: {pathPrefix: /x}, method: POST}]\n      backends: [{host: %q}]\n", be)
	p := startProxy(t, b.String())
	s := watch(t, p, http.MethodPost, "")
	resp, _ := get(t, "http://"+p.BindAddrs()[0]+"/x")
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("status %d, want 404", resp.StatusCode)
	}
	for _, e := range s.collect(t) {
		if e.Type() != trace.RouteSelection {
			continue
		}
		reasons, _ := e.Message["reasons"].([]any)
		if len(reasons) != 101 || e.Message["reasonsOmitted"] != float64(50) {
			t.Errorf("%d reasons, %v omitted; want 101 (100 and the closest) and 50", len(reasons), e.Message["reasonsOmitted"])
		}
		last, _ := reasons[len(reasons)-1].(map[string]any)
		if !strings.HasSuffix(fmt.Sprint(last["route"]), "/zz-post") || last["condition"] != "method" {
			t.Errorf("the closest miss is not kept: last reason %v", last)
		}
	}
}

// TestWatchAppliesAnEditMadeBeforeStart: the file changes after the caller
// read it and before the proxy starts (a ConfigMap updated while its pod
// starts, which left a proxy pod on the local node serving its first
// config for good). The poller compares the file with the bytes the running
// config came from, so the edit is applied.
func TestWatchAppliesAnEditMadeBeforeStart(t *testing.T) {
	first, second := backendServer(t, "first", nil), backendServer(t, "second", nil)
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte(oneRoute(first)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(oneRoute(second)), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := New(cfg, WithAdminAddr("127.0.0.1:0"), WithLogOutput(io.Discard), WithConfigFile(file, true))
	if err != nil {
		t.Fatal(err)
	}
	p.opts.pollEvery = 20 * time.Millisecond
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	base := "http://" + p.BindAddrs()[0]
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, _ := get(t, base+"/x")
		got := resp.Header.Get("x-backend")
		if got == "second" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the edit made before Start was never applied: after 10s the proxy still routes to %q, want \"second\"", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
