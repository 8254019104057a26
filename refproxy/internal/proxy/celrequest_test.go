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
	"github.com/gwdiag/gwdiag/refproxy/celexpr"
	"github.com/gwdiag/gwdiag/refproxy/internal/tracing"
)

// celExpressions read `request` in every way a policy's expression or a
// trace filter can: each string field, the headers (one by one, in
// another case, missing, repeated, whole), keys it has not, presence
// tests, macros over its keys, its size, comparing and indexing it whole.
var celExpressions = []string{
	`request.path == "/never"`,
	`request.path.startsWith("/a")`,
	`request.path == "/a b" || request.path == "/%zz"`,
	`request.method == "POST" && request.host.endsWith(".example")`,
	`request.uri.contains("?") || request.uri.startsWith("https://")`,
	`request.pathAndQuery == "/a%20b?x=1"`,
	`request.scheme == "http" && request.version == "HTTP/1.1"`,
	`"x-team" in request.headers`,
	`request.headers["x-team"] == "blue"`,
	`request.headers["x-team"] == "blue,red" || request.headers["x-team"].endsWith(",")`,
	`request.headers["X-Team"] == "blue"`,
	`request.headers["x-none"] == ""`,
	`request.headers.accept == "*/*"`,
	`request.headers["user-agent"] + "|" + request.headers["host"] == "|gw.example"`,
	`has(request.headers.accept)`,
	`has(request.headers.nope)`,
	`request.headers.exists(k, k == "x-team")`,
	// More look-ups than celRequest makes one by one: the rest by the whole map.
	`["h0", "h1", "h2", "h3", "h4", "h5", "h6", "h7", "h8", "h9", "h10", "h11", "h12", "h13", "h14", "h15", "accept", "x-team", "user-agent"].exists(h, request.headers[h] == "blue")`,
	`["h0", "h1", "h2", "h3", "h4", "h5", "h6", "h7", "h8", "h9", "h10", "h11", "h12", "h13", "h14", "h15", "h16", "authorization"].exists(h, has(request.headers.accept) && request.headers[h].startsWith("Bearer sk-"))`,
	`request.headers == {"host": "gw.example"}`,
	`request.headers[1] == "x"`,
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

// TestCELRequestMatchesMap: an expression gives the same answer (or fails
// alike) on celRequest, which builds `request` field by field, as on
// requestInfo's whole map, over random requests: escaped and
// absolute-form URIs, queries, hosts, methods, repeated headers in mixed
// case and credentials. As a trace filter sees it (the credential
// headers redacted, in the whole map too), no expression can tell a
// credential: one that tests a guess of it never holds. As a policy sees
// it, the credentials are as sent.
func TestCELRequestMatchesMap(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 2026))
	filterRD := tracing.NewRedaction(redact.New(redact.Options{Key: testRedactKey, EscapeHTML: true}), false)
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	held := map[bool]int{}
	for _, expr := range celExpressions {
		filter, err := watch.CompileFilter(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		for i := range 300 {
			var req fasthttp.Request
			req.Header.SetMethod(pick("GET", "POST", "PUT"))
			req.SetRequestURI(pick("/", "/a%20b?x=1", "/abc", "/a/b?q=1&r=<2>", "http://abs.example/p?x", "/%zz", "/123"))
			req.Header.SetHost(pick("gw.example", "other.test:8080", "é.example"))
			for range r.IntN(4) {
				req.Header.Add(pick("X-Team", "Accept", "x-team", "User-Agent", "X-TEAM"), pick("blue", "red", "*/*", ""))
			}
			if r.IntN(2) == 0 {
				req.Header.Set("Authorization", "Bearer sk-filter-secret")
				req.Header.Set("Cookie", "id=s3cr3t")
			}
			var ctx fasthttp.RequestCtx
			ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1000}, nil)
			filtering := i%2 == 0
			var rd *tracing.Redaction
			if filtering {
				rd = filterRD
			}
			lazy, _, lazyErr := filter.Eval(map[string]any{"request": newCELRequest(&ctx, rd)})
			info := requestInfo(&ctx, time.Time{})
			redactedAsMaps(info["headers"].(map[string]any), rd)
			whole, _, wholeErr := filter.Eval(map[string]any{"request": info})
			if guess := strings.Contains(expr, "sk-") || strings.Contains(expr, "s3cr3t"); guess && filtering && lazyErr == nil && lazy.Value() == true {
				t.Fatalf("%s holds: a filter tells a credential", expr)
			}
			got, want := fmt.Sprint(lazyErr != nil), fmt.Sprint(wholeErr != nil)
			if lazyErr == nil && wholeErr == nil {
				got, want = fmt.Sprint(lazy.Value()), fmt.Sprint(whole.Value())
			}
			if got != want {
				t.Fatalf("%s on %s %s (host %s, filter %v): field by field %s (%v), whole map %s (%v)",
					expr, req.Header.Method(), req.RequestURI(), req.Host(), filtering, got, lazyErr, want, wholeErr)
			}
			held[got == "true"]++
		}
	}
	// The random requests are of both kinds for the expressions: some hold.
	if held[true] == 0 || held[false] == 0 {
		t.Errorf("expressions held %d times and did not %d times: the requests do not tell them apart", held[true], held[false])
	}
}

// TestFilteredOutAllocations: a request a follow watcher's CEL filter
// turns away, the filter reading the path, costs the path's string and
// the filter's evaluation, not the request's map and every header
// (31 allocations when it was built whole).
func TestFilteredOutAllocations(t *testing.T) {
	e := newExchange()
	e.req.Header.Set("X-One", "1")
	e.req.Header.Set("X-Two", "2")
	never, err := watch.CompileFilter(`request.path == "/never"`)
	if err != nil {
		t.Fatal(err)
	}
	n := unfilledAllocs(t, e, tracing.FollowOptions{Filter: never})
	t.Logf("allocs per request filtered out: %v", n)
	if n > maxFilteredOutAllocs && !raceEnabled {
		t.Errorf("allocs per request filtered out = %v, want at most %d", n, maxFilteredOutAllocs)
	}
}

// maxFilteredOutAllocs bounds TestFilteredOutAllocations: the request
// value, the activation, the path, the evaluation's own.
const maxFilteredOutAllocs = 6

// TestCELActivationMatchesMap: a policy's expression gives the same
// answer (or fails alike) on celActivation as on the activation made of
// whole maps (requestInfo, sourceInfo, and the identity's claims, key
// metadata and user, else empty maps), for a request no auth policy
// authenticated, and one a JWT, an API key or Basic credentials did.
func TestCELActivationMatchesMap(t *testing.T) {
	var req fasthttp.Request
	req.SetRequestURI("/api/v1?x=1")
	req.Header.SetHost("gw.example")
	req.Header.Set("X-Tier", "gold")
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 4567}, nil)
	ids := map[string]identity{
		"none":   {},
		"jwt":    {claims: map[string]any{"sub": "alice", "groups": []any{"admin"}}, token: "t"},
		"apiKey": {apiKey: map[string]any{"key": "<redacted>", "team": "red"}},
		"basic":  {user: "bob"},
	}
	exprs := []string{
		`request.headers["x-tier"] == "gold" && request.path == "/api/v1"`,
		`source.address == "10.1.2.3" && source.port == 4567`,
		`cidr("10.0.0.0/8").containsIP(source.address)`,
		`has(jwt.sub)`, `jwt.sub == "alice"`, `"admin" in jwt.groups`, `size(jwt) == 0`,
		`has(apiKey.team)`, `apiKey.team == "red"`, `apiKey.key == "<redacted>"`,
		`has(basicAuth.username)`, `basicAuth.username == "bob"`, `basicAuth == {}`,
		`jwt.nope == "x"`,
	}
	held := 0
	for name, id := range ids {
		whole := map[string]any{"request": requestInfo(&ctx, time.Time{}), "source": sourceInfo(ctx.RemoteAddr()),
			"jwt": celexpr.NoClaims, "apiKey": celexpr.NoClaims, "basicAuth": celexpr.NoClaims}
		if id.claims != nil {
			whole["jwt"] = id.claims
		}
		if id.apiKey != nil {
			whole["apiKey"] = id.apiKey
		}
		if id.user != "" {
			whole["basicAuth"] = map[string]any{"username": id.user}
		}
		for _, expr := range exprs {
			p, err := celexpr.CompileRequest(expr, celexpr.Bool)
			if err != nil {
				t.Fatalf("%s: %v", expr, err)
			}
			lazy, _, lazyErr := p.Eval(newActivation(&ctx, id))
			want, _, wantErr := p.Eval(whole)
			got, w := fmt.Sprint(lazyErr), fmt.Sprint(wantErr)
			if lazyErr == nil && wantErr == nil {
				got, w = fmt.Sprint(lazy.Value()), fmt.Sprint(want.Value())
			}
			if (lazyErr == nil) != (wantErr == nil) || lazyErr == nil && got != w {
				t.Errorf("%s, identity %s: celActivation %s, whole maps %s", expr, name, got, w)
			}
			if got == "true" {
				held++
			}
		}
	}
	if held < len(ids)+4 {
		t.Errorf("only %d expressions held: the identities are not seen", held)
	}
}
