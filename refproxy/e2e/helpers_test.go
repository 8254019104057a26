package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/gwdiag/gwdiag/refproxy"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit"
	"github.com/gwdiag/gwdiag/refproxy/refproxytest"
	"github.com/gwdiag/gwdiag/steps/mock"
)

// env is one proxy in front of one mock LLM and one echo backend.
type env struct {
	llm    *mock.LLM
	echo   *mock.Echo
	proxy  *refproxy.Proxy
	base   string // http://host:port of the first bind
	client *http.Client
	cfg    string // the rendered config, for replicas
}

// backends are the addresses a config template refers to as {{.LLM}} and {{.Echo}}.
type backends struct{ LLM, Echo string }

// start runs the mocks and a proxy for the config template cfg until the
// test ends. Binds use port 0; the proxy's first bind is env.base.
func start(t testing.TB, cfg string) *env {
	t.Helper()
	e := &env{llm: mock.NewLLM(), echo: mock.NewEcho()}
	llmSrv, err := mock.Listen("127.0.0.1:0", e.llm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = llmSrv.Close() })
	echoSrv, err := mock.Listen("127.0.0.1:0", e.echo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = echoSrv.Close() })

	var buf bytes.Buffer
	if err := template.Must(template.New("cfg").Parse(cfg)).Execute(&buf, backends{LLM: llmSrv.Addr(), Echo: echoSrv.Addr()}); err != nil {
		t.Fatal(err)
	}
	e.cfg = buf.String()
	p := refproxytest.Start(t, e.cfg)
	e.proxy = p
	e.base = "http://" + p.BindAddrs()[0]
	tr := &http.Transport{MaxIdleConnsPerHost: 128, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	e.client = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	return e
}

// replica starts another proxy with the same config, in front of the
// same mocks, until the test ends.
func (e *env) replica(t testing.TB) *env {
	t.Helper()
	r := *e
	r.proxy = refproxytest.Start(t, e.cfg)
	r.base = "http://" + r.proxy.BindAddrs()[0]
	// The client shares e's transport: its connections to this replica
	// close before the replica shuts down (cleanups run last-in first-out),
	// or connections it dialled but never used would hold the shutdown for
	// the seconds the server gives a new connection before calling it idle.
	t.Cleanup(r.client.Transport.(*http.Transport).CloseIdleConnections)
	return &r
}

// reply is one response as the client saw it.
type reply struct {
	status int
	header http.Header
	body   string
}

// limits renders x-ratelimit-limit and x-ratelimit-remaining as "limit/remaining".
func (r reply) limits() string {
	return r.header.Get(ratelimit.HeaderLimit) + "/" + r.header.Get(ratelimit.HeaderRemaining)
}

// reset is x-ratelimit-reset in seconds (-1 when absent or bad).
func (r reply) reset() int {
	n, err := strconv.Atoi(r.header.Get(ratelimit.HeaderReset))
	if err != nil {
		return -1
	}
	return n
}

// remaining is x-ratelimit-remaining as a number (-1 when absent or bad).
func (r reply) remaining() int {
	n, err := strconv.Atoi(r.header.Get(ratelimit.HeaderRemaining))
	if err != nil {
		return -1
	}
	return n
}

// do sends one request through the proxy and reads the whole response.
// hdr is name, value pairs. It must run on the test's goroutine; others use try.
func (e *env) do(t testing.TB, method, path, body string, hdr ...string) reply {
	t.Helper()
	r, err := e.try(method, path, body, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// try is do for any goroutine: it returns the error instead of failing.
func (e *env) try(method, path, body string, hdr ...string) (reply, error) {
	req, err := http.NewRequest(method, e.base+path, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: reading body: %w", method, path, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}, nil
}

// chatBody is a chat completion request; stream selects SSE (without
// stream_options, so the proxy must add include_usage).
func chatBody(stream bool) string {
	return fmt.Sprintf(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"stream":%t}`, stream)
}

// chat sends a chat completion whose usage is prompt + completion tokens.
func (e *env) chat(t testing.TB, stream bool, prompt, completion int, hdr ...string) reply {
	t.Helper()
	hdr = append([]string{mock.HeaderPromptTokens, strconv.Itoa(prompt), mock.HeaderCompletionTokens, strconv.Itoa(completion)}, hdr...)
	return e.do(t, http.MethodPost, "/v1/chat/completions", chatBody(stream), hdr...)
}

// awaitAllowed repeats send until it is admitted (the window refilled), for
// at most timeout, and returns the admitted reply. Each refused try costs
// nothing, so polling does not disturb the budget.
func awaitAllowed(t testing.TB, timeout time.Duration, send func() reply) reply {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r := send()
		if r.status != http.StatusTooManyRequests {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("still 429 after %v (limit/remaining %s, reset %ds)", timeout, r.limits(), r.reset())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// specYAML renders a bucket spec as one localRateLimit entry.
func specYAML(s ratelimit.Spec) string {
	typ := s.Type
	if typ == "" {
		typ = ratelimit.Requests
	}
	return fmt.Sprintf("{maxTokens: %d, tokensPerFill: %d, fillInterval: %s, type: %s}", s.MaxTokens, s.TokensPerFill, s.FillInterval, typ)
}

// wantReply checks status, body and the x-ratelimit-* headers of r: limits
// is "limit/remaining" ("" for no headers), and the reset must be whole
// seconds within the fill interval.
func wantReply(t testing.TB, what string, r reply, status int, limits string, interval time.Duration) {
	t.Helper()
	if r.status != status || r.limits() != limits && !(limits == "" && r.limits() == "/") {
		t.Errorf("%s: got %d with limit/remaining %s (body %.80q), want %d with %s", what, r.status, r.limits(), r.body, status, limits)
	}
	if limits != "" {
		if n := r.reset(); n < 0 || time.Duration(n)*time.Second > interval {
			t.Errorf("%s: x-ratelimit-reset %q, want whole seconds in [0, %v]", what, r.header.Get(ratelimit.HeaderReset), interval)
		}
	} else if v := r.header.Get(ratelimit.HeaderReset); v != "" {
		t.Errorf("%s: x-ratelimit-reset %q on an unlimited route, want none", what, v)
	}
	if status == http.StatusTooManyRequests {
		if r.body != ratelimit.RefusedBody || r.header.Get("Content-Type") != "text/plain" {
			t.Errorf("%s: 429 body %q, Content-Type %q; want %q, text/plain", what, r.body, r.header.Get("Content-Type"), ratelimit.RefusedBody)
		}
	}
}

// sprintf is fmt.Sprintf, for config templates.
func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
