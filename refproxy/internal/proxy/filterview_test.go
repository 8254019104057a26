package proxy

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gwdiag/gwdiag/golden/trace/redact"
	"github.com/gwdiag/gwdiag/golden/trace/watch"
	"github.com/gwdiag/gwdiag/refproxy/internal/tracing"
)

// filterExpressions read `request` in every way a trace filter can: each
// string field, the headers, keys it has not, presence tests, macros over
// its keys, its size, comparing and indexing it whole.
var filterExpressions = []string{
	`request.path == "/never"`,
	`request.path.startsWith("/a")`,
	`request.path == "/a b" || request.path == "/%zz"`,
	`request.method == "POST" && request.host.endsWith(".example")`,
	`request.uri.contains("?") || request.uri.startsWith("https://")`,
	`request.pathAndQuery == "/a%20b?x=1"`,
	`request.scheme == "http" && request.version == "HTTP/1.1"`,
	`"x-team" in request.headers`,
	`request.headers["x-team"] == "blue"`,
	`has(request.headers.accept)`,
	`has(request.path) && !has(request.startTime)`,
	`request.startTime == ""`,
	`request.nope == "x"`,
	`size(request) == 8`,
	`request.exists(k, k == "path")`,
	`request.all(k, k != "startTime")`,
	`"path" in request`,
	`request["path"] == "/"`,
	`request["nope"] == "/"`,
	`request == {"path": "/"}`,
	`{"path": "/"} == request`,
	`request.path.matches("^/[a-z]+$")`,
	`request.path.size() > 3 && request.method in ["GET", "PUT"]`,
	`int(request.path) > 0`,
	`request.headers.size() > 2`,
	`request.headers["authorization"] == "Bearer sk-filter-secret"`,
	`request.headers["authorization"].startsWith("Bearer sk-")`,
	`request.headers["authorization"].startsWith("Bearer <redacted:")`,
	`request.headers["cookie"].contains("s3cr3t")`,
}

// TestFilterRequestMatchesMap: a trace filter gives the same answer (or
// fails alike) on filterRequest, which builds `request` field by field,
// as on requestInfo's whole map with the credential headers redacted,
// over random requests: escaped and absolute-form URIs, queries, hosts,
// methods, repeated headers and credentials. No filter can tell a
// credential: one that tests a guess of it never holds.
func TestFilterRequestMatchesMap(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 2026))
	rd := tracing.NewRedaction(redact.New(redact.Options{Key: testRedactKey, EscapeHTML: true}), false)
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	for _, expr := range filterExpressions {
		filter, err := watch.CompileFilter(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		for range 300 {
			var req fasthttp.Request
			req.Header.SetMethod(pick("GET", "POST", "PUT"))
			req.SetRequestURI(pick("/", "/a%20b?x=1", "/abc", "/a/b?q=1&r=<2>", "http://abs.example/p?x", "/%zz", "/123"))
			req.Header.SetHost(pick("gw.example", "other.test:8080", "é.example"))
			for range r.IntN(4) {
				req.Header.Add(pick("X-Team", "Accept", "x-team", "User-Agent"), pick("blue", "red", "*/*", ""))
			}
			if r.IntN(2) == 0 {
				req.Header.Set("Authorization", "Bearer sk-filter-secret")
				req.Header.Set("Cookie", "id=s3cr3t")
			}
			var ctx fasthttp.RequestCtx
			ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1000}, nil)
			lazy, _, lazyErr := filter.Eval(map[string]any{"request": &filterRequest{ctx: &ctx, rd: rd}})
			info := requestInfo(&ctx, time.Time{})
			redactedAsMaps(info["headers"].(map[string]any), rd)
			whole, _, wholeErr := filter.Eval(map[string]any{"request": info})
			if guess := strings.Contains(expr, "sk-") || strings.Contains(expr, "s3cr3t"); guess && lazyErr == nil && lazy.Value() == true {
				t.Fatalf("%s holds: a filter tells a credential", expr)
			}
			got, want := fmt.Sprint(lazyErr != nil), fmt.Sprint(wholeErr != nil)
			if lazyErr == nil && wholeErr == nil {
				got, want = fmt.Sprint(lazy.Value()), fmt.Sprint(whole.Value())
			}
			if got != want {
				t.Fatalf("%s on %s %s (host %s): field by field %s (%v), whole map %s (%v)",
					expr, req.Header.Method(), req.RequestURI(), req.Host(), got, lazyErr, want, wholeErr)
			}
		}
	}
}

// TestFilteredOutAllocations: a request a follow watcher's CEL filter
// turns away, the filter reading the path, costs the path's string and
// the filter's evaluation, not the request's map and every header
// (31 allocations when it was built whole).
func TestFilteredOutAllocations(t *testing.T) {
	dp, h := newBenchHandler(t, false)
	e := newExchange()
	e.req.Header.Set("X-One", "1")
	e.req.Header.Set("X-Two", "2")
	never, err := watch.CompileFilter(`request.path == "/never"`)
	if err != nil {
		t.Fatal(err)
	}
	w := mustFollow(t, dp, tracing.FollowOptions{Filter: never})
	defer w.Cancel()
	n := testing.AllocsPerRun(500, func() { e.serve(h) })
	if evs, _, _ := drainEvents(t, w); len(evs) != 0 {
		t.Fatalf("the filter took %d events", len(evs))
	}
	t.Logf("allocs per request filtered out: %v", n)
	if n > maxFilteredOutAllocs && !raceEnabled {
		t.Errorf("allocs per request filtered out = %v, want at most %d", n, maxFilteredOutAllocs)
	}
}

// maxFilteredOutAllocs bounds TestFilteredOutAllocations: the request
// value, the activation, the path, the evaluation's own.
const maxFilteredOutAllocs = 6
