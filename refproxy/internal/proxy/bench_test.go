package proxy

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"cel.dev/cel-go/cel"
	"github.com/valyala/fasthttp"

	"github.com/gwdiag/gwdiag/golden/trace/watch"
	"github.com/gwdiag/gwdiag/refproxy/config"
	"github.com/gwdiag/gwdiag/refproxy/internal/tracing"
)

// stubBackend answers every upstream call in process, so that allocation
// counts measure the proxy's own request path and nothing of the network.
type stubBackend struct{ body strings.Reader }

func (s *stubBackend) do(_ *fasthttp.Request, resp *fasthttp.Response) error {
	resp.SetStatusCode(200)
	resp.Header.SetContentType("text/plain")
	s.body.Reset("ok\n")
	resp.SetBodyStream(&s.body, 3)
	return nil
}

const benchConfig = `
binds:
- port: 0
  listeners:
  - routes:
    - name: other
      matches: [{path: {exact: /other}}]
      backends: [{host: "127.0.0.1:1"}]
    - name: httpbin
      matches: [{path: {pathPrefix: /}}]
      backends: [{host: "127.0.0.1:1"}]
`

// testRedactKey keys the fingerprints of the tests' data planes.
var testRedactKey = []byte("refproxy/internal/proxy test key")

func newBenchHandler(tb testing.TB, tracingOff bool) (*Dataplane, fasthttp.RequestHandler) {
	tb.Helper()
	return newBenchHandlerFor(tb, tracingOff, benchConfig)
}

func newBenchHandlerFor(tb testing.TB, tracingOff bool, cfgYAML string) (*Dataplane, fasthttp.RequestHandler) {
	tb.Helper()
	return newBenchHandlerWith(tb, tracingOff, cfgYAML, true)
}

// newBenchHandlerWith is newBenchHandlerFor whose backends are stubs only
// when stub is set.
func newBenchHandlerWith(tb testing.TB, tracingOff bool, cfgYAML string, stub bool) (*Dataplane, fasthttp.RequestHandler) {
	tb.Helper()
	cfg, err := config.Parse("bench.yaml", []byte(cfgYAML))
	if err != nil {
		tb.Fatal(err)
	}
	// One fingerprint key for every test's data plane, so that two data
	// planes show a credential alike.
	dp := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RedactKey: testRedactKey})
	dp.tracingOff = tracingOff
	if err := dp.Apply(cfg); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { dp.Shutdown(tb.Context()) })
	for _, l := range dp.table.Load().binds[0].listeners {
		if !stub {
			break
		}
		for _, rt := range l.routes {
			for _, be := range rt.backends {
				be.do = new(stubBackend).do
			}
		}
	}
	return dp, (&bindHandler{dp: dp, key: dp.table.Load().binds[0].key}).serve
}

// exchange is one request served in process: the handler runs and the
// response, body stream included, is written to nowhere.
type exchange struct {
	ctx    fasthttp.RequestCtx
	req    fasthttp.Request
	out    *bufio.Writer
	body   []byte
	status int // of the last response
}

func newExchange() *exchange {
	e := &exchange{out: bufio.NewWriter(io.Discard)}
	// As the data plane's server reads them (DisableHeaderNamesNormalizing).
	e.req.Header.DisableNormalizing()
	e.ctx.Response.Header.DisableNormalizing()
	e.req.Header.SetMethod("GET")
	e.req.SetRequestURI("/get?x=1")
	e.req.Header.SetHost("gw.example")
	e.req.Header.Set("User-Agent", "bench")
	e.ctx.Init(&e.req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
	return e
}

func (e *exchange) serve(h fasthttp.RequestHandler) {
	e.req.CopyTo(&e.ctx.Request)
	e.ctx.Response.Reset()
	h(&e.ctx)
	e.status = e.ctx.Response.StatusCode()
	if err := e.ctx.Response.Write(e.out); err != nil {
		panic(err)
	}
	e.ctx.Response.Reset()
}

// allocsPerRun is testing.AllocsPerRun(runs, f), and under the race
// detector the fewest of five: there sync.Pool drops a Put at random (one
// in four), so a path that takes a pooled buffer allocates one more now
// and then, which only ever adds (TestNoWatcherCostsNothing failed once in
// 600 runs so: 2 allocations against 1). An allocation the path always
// makes is in every count, so in the fewest.
func allocsPerRun(runs int, f func()) float64 {
	n := testing.AllocsPerRun(runs, f)
	for i := 1; raceEnabled && i < 5; i++ {
		n = min(n, testing.AllocsPerRun(runs, f))
	}
	return n
}

// TestNoWatcherCostsNothing is the zero-cost guarantee: with nobody
// watching, a request allocates exactly what it allocates with tracing
// switched off entirely.
func TestNoWatcherCostsNothing(t *testing.T) {
	allocs := func(off bool) float64 {
		_, h := newBenchHandler(t, off)
		e := newExchange()
		return allocsPerRun(500, func() { e.serve(h) })
	}
	off, idle := allocs(true), allocs(false)
	if idle > off {
		t.Errorf("allocs per request with no watcher = %v, with tracing off = %v; want equal", idle, off)
	}
	// And the request path itself allocates nothing (the backend is a stub).
	if off != 0 && !raceEnabled {
		t.Errorf("allocs per request with tracing off = %v, want 0", off)
	}
	t.Logf("allocs per request: tracing off %v, no watcher %v", off, idle)
}

// BenchmarkServe measures one request through the data plane, with
// tracing off, with nobody watching, and under each kind of watcher; the
// -credentials cases send the same request with credentials (an
// Authorization and a Cookie header), which traces redact.
func BenchmarkServe(b *testing.B) {
	b.Run("tracing-off", func(b *testing.B) { benchServe(b, true, newExchange()) })
	for _, x := range []struct {
		suffix   string
		exchange func() *exchange
	}{{"", newExchange}, {"-credentials", newCredentialsExchange}} {
		b.Run("no-watcher"+x.suffix, func(b *testing.B) { benchServe(b, false, x.exchange()) })
		// A follow watcher whose outcome filter drops every trace: each
		// request is captured, then dropped at requestFinished.
		b.Run("outcome-dropped"+x.suffix, func(b *testing.B) {
			benchUnfilled(b, x.exchange(), tracing.FollowOptions{Outcome: mustOutcome(b, `response.code >= 500`)})
		})
		// The same filter keeping every trace: captured, then rendered.
		b.Run("outcome-kept"+x.suffix, func(b *testing.B) {
			benchFollow(b, x.exchange(), tracing.FollowOptions{Outcome: mustOutcome(b, `response.code >= 0`)})
		})
		b.Run("watcher"+x.suffix, func(b *testing.B) { benchWatcher(b, x.exchange()) })
		// A follow watcher without an outcome filter: each event rendered
		// as it happens (the live path).
		b.Run("follow"+x.suffix, func(b *testing.B) { benchFollow(b, x.exchange(), tracing.FollowOptions{}) })
	}
	// A follow watcher whose CEL filter takes no request: each request is
	// shown to the filter (its map built, the expression evaluated).
	b.Run("cel-filtered", func(b *testing.B) {
		never, err := watch.CompileFilter(`request.path == "/never"`)
		if err != nil {
			b.Fatal(err)
		}
		benchUnfilled(b, newExchange(), tracing.FollowOptions{Filter: never})
	})
}

// benchServe serves e's request with nobody watching, or with tracing
// off.
func benchServe(b *testing.B, tracingOff bool, e *exchange) {
	_, h := newBenchHandler(b, tracingOff)
	b.ReportAllocs()
	for b.Loop() {
		e.serve(h)
	}
}

// benchUnfilled serves e's request under one follow watcher of o that
// sends nothing: its outcome filter drops every trace, or its CEL filter
// takes none.
func benchUnfilled(b *testing.B, e *exchange, o tracing.FollowOptions) {
	dp, h := newBenchHandler(b, false)
	w := mustFollow(b, dp, o)
	defer w.Cancel()
	b.ReportAllocs()
	for b.Loop() {
		e.serve(h)
	}
}

// benchFollow traces e's request with a new follow watcher of o per
// iteration, which must send the trace's 12 events.
func benchFollow(b *testing.B, e *exchange, o tracing.FollowOptions) {
	dp, h := newBenchHandler(b, false)
	b.ReportAllocs()
	for b.Loop() {
		w := mustFollow(b, dp, o)
		e.serve(h)
		if frames, _, _ := w.Drain(); bytes.Count(frames, []byte("\n\n")) != 12 {
			b.Fatalf("followed %d events, want 12", bytes.Count(frames, []byte("\n\n")))
		}
		w.Cancel()
	}
}

// mustOutcome is the outcome filter of expression.
func mustOutcome(tb testing.TB, expression string) cel.Program {
	tb.Helper()
	p, err := watch.CompileOutcome(expression)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// mustFollow registers a follow watcher of dp with o's filters, for one
// trace and an hour unless o says otherwise.
func mustFollow(tb testing.TB, dp *Dataplane, o tracing.FollowOptions) *tracing.Watcher {
	tb.Helper()
	if o.Max == 0 {
		o.Max = 1
	}
	if o.Duration == 0 {
		o.Duration = time.Hour
	}
	w, err := dp.reg.Follow(o)
	if err != nil {
		tb.Fatal(err)
	}
	return w
}

// benchWatcher traces e's request with a one-shot watcher per iteration.
func benchWatcher(b *testing.B, e *exchange) {
	dp, h := newBenchHandler(b, false)
	b.ReportAllocs()
	for b.Loop() {
		wt := dp.reg.Watch(nil)
		e.serve(h)
		frames, _, final := wt.Drain()
		if n := bytes.Count(frames, []byte("\n\n")); n != 11 || final == nil {
			b.Fatalf("traced %d events + final %v, want 11 + requestFinished", n, final != nil)
		}
		wt.Cancel()
	}
}

// newCredentialsExchange is newExchange's request with the credentials a
// browser or an API client sends: a bearer token and two cookies.
func newCredentialsExchange() *exchange {
	e := newExchange()
	e.req.Header.Set("Authorization", "Bearer sk-bench-0123456789abcdef")
	e.req.Header.Set("Cookie", "session=5f2b9c0e7d4a1b3c; theme=dark")
	return e
}

func TestRouteSelectionAllocatesNothing(t *testing.T) {
	dp, _ := newBenchHandler(t, true)
	bt := dp.table.Load().binds[0]
	e := newExchange()
	var rt *route
	if n := testing.AllocsPerRun(100, func() {
		v := newView(&e.req)
		rt = bt.selectRoute(&v)
	}); n != 0 {
		t.Errorf("selectRoute allocates %v times per request, want 0", n)
	}
	if rt == nil || !strings.HasSuffix(rt.key, "/httpbin") {
		t.Errorf("selected %v, want httpbin", rt)
	}
}

// policyCase is a route of one policy kind, the Authorization header its
// request carries, and the most allocations TestServePoliciesAllocations
// lets it make.
type policyCase struct {
	name, policies, header string
	allocs                 float64
}

var policyCases = []policyCase{
	{"none", "    {}", "", 0},
	{"header-modifiers", "    requestHeaderModifier: {set: {x-a: \"1\"}, remove: [x-b]}\n    responseHeaderModifier: {add: {x-c: \"1\"}}", "", 0},
	{"cors", "    cors: {allowOrigins: [\"*\"], allowMethods: [GET]}", "", 0},
	{"local-limit", "    localRateLimit: [{maxTokens: 1000000000, tokensPerFill: 1000000000, fillInterval: 1h}]", "", 0},
	{"conditional-limit", "    localRateLimit:\n      conditional:\n      - {condition: 'request.headers[\"x-tier\"] == \"gold\"', maxTokens: 1000000000, tokensPerFill: 1000000000, fillInterval: 1h}\n      - {maxTokens: 1000000000, tokensPerFill: 1000000000, fillInterval: 1h}", "", 7},
	{"authorization", "    authorization: {rules: ['request.path.startsWith(\"/get\")']}", "", 7},
	// An API key checked (every SHA-256 digest compared) and taken off.
	{"api-key", "    apiKey: {keys: [{key: bench-key-1}, {key: bench-key-2}], mode: strict}", "Bearer bench-key-2", 4},
	// Basic credentials checked against a SHA-1 entry (bcrypt would
	// measure bcrypt) and taken off.
	{"basic-auth", "    basicAuth: {htpasswd: \"u:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\", mode: strict}", "Basic dTpwYXNzd29yZA==", 6},
}

// newPolicyRoute is c's handler and an exchange whose request it lets
// through (the credentials accepted).
func newPolicyRoute(tb testing.TB, c policyCase) (fasthttp.RequestHandler, *exchange) {
	tb.Helper()
	_, h := newBenchHandlerFor(tb, false, "\ngateways:\n  default: {port: 0}\nroutes:\n- name: httpbin\n  policies:\n"+
		c.policies+"\n  backends: [{host: \"127.0.0.1:1\"}]\n")
	e := newExchange()
	if c.header != "" {
		e.req.Header.Set("Authorization", c.header)
	}
	if e.serve(h); e.status != fasthttp.StatusOK {
		tb.Fatalf("%s: status %d, want 200", c.name, e.status)
	}
	return h, e
}

// TestServePoliciesAllocations: an untraced request through a route of
// header modifiers, CORS (no Origin) or a local limit allocates nothing,
// as one through a route without policies; one an API key or Basic
// credentials authenticate, no more than the credential's reading and
// removal take (4 and 6; 11 each when the key's CEL metadata was copied
// per request and removal collected names); one whose route has a CEL
// condition or authorization rule, no more than the activation, the
// strings the expression reads and CEL's evaluation take (7; 41 and 40
// when the activation was maps of the whole request, every header and
// the client's address).
func TestServePoliciesAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	for _, c := range policyCases {
		h, e := newPolicyRoute(t, c)
		if got := testing.AllocsPerRun(200, func() { e.serve(h) }); got > c.allocs {
			t.Errorf("%s: %v allocations per request, want at most %v", c.name, got, c.allocs)
		}
	}
}

// BenchmarkServePolicies measures what a route's policies cost per request
// (untraced), each beside the route without any: header modifiers, cors,
// a CEL condition picking a local limit, CEL authorization, the auth
// policies.
func BenchmarkServePolicies(b *testing.B) {
	for _, c := range policyCases {
		b.Run(c.name, func(b *testing.B) {
			h, e := newPolicyRoute(b, c)
			b.ReportAllocs()
			for b.Loop() {
				e.serve(h)
			}
		})
	}
}

// BenchmarkServeTracedPolicies measures a traced request through a route
// of each policy kind whose reasons are built for a trace (a local
// limit's entries, an API key's metadata): what writing its policy event
// costs beside the rest of the trace.
func BenchmarkServeTracedPolicies(b *testing.B) {
	route := func(policies string) string {
		return "gateways:\n  default: {port: 0}\nroutes:\n- name: httpbin\n  policies:\n" + policies +
			"\n  backends: [{host: \"127.0.0.1:1\"}]\n"
	}
	for _, c := range []struct{ name, policies, header string }{
		{"local-limit", "    localRateLimit: [{maxTokens: 1000000000, tokensPerFill: 1000000000, fillInterval: 1h}]", ""},
		{"api-key", "    apiKey: {keys: [{key: bench-key-1, metadata: {name: ci}}], mode: strict}", "Bearer bench-key-1"},
	} {
		b.Run(c.name, func(b *testing.B) {
			dp, h := newBenchHandlerFor(b, false, route(c.policies))
			e := newExchange()
			e.req.Header.Set("Authorization", c.header)
			b.ReportAllocs()
			for b.Loop() {
				if c.header != "" {
					e.req.Header.Set("Authorization", c.header)
				}
				wt := dp.reg.Watch(nil)
				e.serve(h)
				frames, _, final := wt.Drain()
				if !bytes.Contains(frames, []byte(`"type":"policy"`)) || final == nil {
					b.Fatalf("no policy event traced (status %d)", e.status)
				}
				wt.Cancel()
			}
		})
	}
}

// localAnswerCase is a request the proxy answers itself (untraced), its
// route, its path and the status it gets; allocs is what it may allocate.
type localAnswerCase struct {
	name, policies, path string
	status               int
	allocs               float64
}

// localAnswerCases: no route takes the request, the route's local limit
// refuses it (with two header families, and a CORS origin, which is
// copied: 1 allocation), its directResponse answers.
var localAnswerCases = []localAnswerCase{
	{"no-route", "    {}", "/other", fasthttp.StatusNotFound, 0},
	{"refused", "    cors: {allowOrigins: [\"*\"]}\n    rateLimitHeaders: [xRateLimit, ietf]\n    localRateLimit: [{maxTokens: 1, tokensPerFill: 1, fillInterval: 24h}]", "/get", fasthttp.StatusTooManyRequests, 1},
	{"refused-no-cors", "    rateLimitHeaders: [xRateLimit, ietf, openai, anthropic]\n    localRateLimit: [{maxTokens: 1, tokensPerFill: 1, fillInterval: 24h}]", "/get", fasthttp.StatusTooManyRequests, 0},
	{"direct", "    directResponse: {status: 204}", "/get", fasthttp.StatusNoContent, 0},
}

// newLocalAnswer is c's handler and an exchange that gets c.status.
func newLocalAnswer(tb testing.TB, c localAnswerCase) (fasthttp.RequestHandler, *exchange) {
	tb.Helper()
	_, h := newBenchHandlerFor(tb, false, "gateways:\n  default: {port: 0}\nroutes:\n- name: httpbin\n  matches: [{path: {pathPrefix: /get}}]\n  policies:\n"+
		c.policies+"\n  backends: [{host: \"127.0.0.1:1\"}]\n")
	e := newExchange()
	e.req.SetRequestURI(c.path)
	e.req.Header.Set("Origin", "https://app.example")
	e.serve(h) // the limit's one token
	e.serve(h)
	if e.status != c.status {
		tb.Fatalf("%s: status %d, want %d", c.name, e.status, c.status)
	}
	return h, e
}

// TestLocalAnswerAllocations: an untraced request the proxy answers
// itself builds no reason and allocates nothing, but a CORS origin.
func TestLocalAnswerAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	for _, c := range localAnswerCases {
		h, e := newLocalAnswer(t, c)
		if got := testing.AllocsPerRun(200, func() { e.serve(h) }); got != c.allocs {
			t.Errorf("%s: %v allocations per request, want %v", c.name, got, c.allocs)
		}
		if e.status != c.status {
			t.Errorf("%s: status %d, want %d", c.name, e.status, c.status)
		}
	}
}

// BenchmarkServeLocalAnswer measures the requests of localAnswerCases.
func BenchmarkServeLocalAnswer(b *testing.B) {
	for _, c := range localAnswerCases {
		b.Run(c.name, func(b *testing.B) {
			h, e := newLocalAnswer(b, c)
			b.ReportAllocs()
			for b.Loop() {
				e.serve(h)
			}
		})
	}
}
