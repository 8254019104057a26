package proxy

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/gwdiag/gwdiag/golden/routing"
	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/redact"
	"github.com/gwdiag/gwdiag/refproxy/internal/tracing"
)

// redactedAsMaps redacts the headers of a snapshot built as maps, as the
// redact package does (its own test of names, not the tracer's).
func redactedAsMaps(headers map[string]any, rd *tracing.Redaction) map[string]any {
	if rd == nil {
		return headers
	}
	for k, v := range headers {
		if rd.Redactor().Sensitive(k) {
			headers[k] = rd.Redactor().Value(k, v.(string))
		}
	}
	return headers
}

// stateAsMaps is a request snapshot's requestState as spec part 2.1 shows
// it, built as maps (how refproxy built it before it wrote snapshots
// straight to JSON): the reference renderRequestState is held to.
func stateAsMaps(dp *Dataplane, req map[string]any, rd *tracing.Redaction, addr net.Addr, be *backend) map[string]any {
	host, port := hostPort(addr)
	if hs, ok := req["headers"].(map[string]any); ok {
		redactedAsMaps(hs, rd)
	}
	st := map[string]any{
		"request": req,
		"source":  map[string]any{"address": host, "port": port, "rawAddress": host, "rawPort": port},
	}
	if be != nil {
		st["backend"] = map[string]any{"name": be.name, "type": be.traceType, "protocol": "http"}
	}
	if dp.opts.Env != nil {
		st["env"] = dp.opts.Env
	}
	return st
}

// responseStateAsMaps is responseState as maps.
func responseStateAsMaps(dp *Dataplane, code int, headers map[string]any) map[string]any {
	st := map[string]any{"response": map[string]any{"code": code, "headers": headers}}
	if dp.opts.Env != nil {
		st["env"] = dp.opts.Env
	}
	return st
}

// snapshotStrings are header names, values, hosts and paths that test
// the JSON writer: escapes, HTML characters, invalid UTF-8, U+2028,
// non-ASCII names (lowered as strings.ToLower does), case and repeats.
var snapshotStrings = []string{
	"a", "X-Multi", "x-multi", "Authorization", "authorization", "X-API-Key", "ÄÖÜ-Name", "İstanbul",
	"Cookie", "set-cookie", "Set-Cookie", "Proxy-Authorization", "x-tenant-token", "X-TENANT-TOKEN",
	"Bearer sk-<tok>&en", "Basic dXNlcjpwYXNz", "a=1; b=<2>", "id=x&y; Expires=Wed, 21 Oct 2015 07:28:00 GMT; Path=/; HttpOnly",
	"<script>&amp;</script>", "quote\"back\\slash", "tab\tnew\nline", "\x00\x1f\x7f", "bad\xff\xfeutf8",
	"line\u2028sep\u2029", "é", "", strings.Repeat("long-", 60), "日本語",
}

// TestRequestStateMatchesMaps: request and response snapshots written
// straight to JSON are, byte for byte, what encoding/json writes for the
// same snapshots built as maps, over random requests: repeated and mixed
// case headers, credential headers (redacted, without redaction, in clear
// but for a configured one), escapes and invalid UTF-8 everywhere,
// percent-encoded and absolute-form URIs, TLS, IPv4 and IPv6 clients, with
// and without a backend and a cluster identity, and more headers and
// longer names than the writer sorts on the stack.
func TestRequestStateMatchesMaps(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 2026))
	pick := func() string { return snapshotStrings[r.IntN(len(snapshotStrings))] }
	key := []byte("snapshot test key")
	redactions := []*tracing.Redaction{
		nil,
		tracing.NewRedaction(redact.New(redact.Options{Key: key, EscapeHTML: true, Extra: []string{"X-Tenant-Token", "ÄÖÜ-Name"}}), false),
		tracing.NewRedaction(redact.New(redact.Options{Key: key, EscapeHTML: true, NoDefaults: true, Extra: []string{"x-tenant-token"}}), true),
	}
	be := &backend{name: "default/<httpbin>", traceType: "ai"}
	addrs := []net.Addr{
		&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 5000},
		&net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 443},
		&net.UnixAddr{Name: "@sock", Net: "unix"},
	}
	uris := []string{"/", "/a%20b/c?x=1&y=<2>", "/p%zz?", "http://other.example/abs?q=1", "/日本?é=1", "*", "/a?b?c", "/%2F%3F?"}
	for i := range 3000 {
		dp := &Dataplane{}
		if r.IntN(2) == 0 {
			dp.opts.Env = map[string]any{"podName": pick(), "namespace": "gw<ns>", "gateway": map[string]any{"name": pick()}}
		}
		var req fasthttp.Request
		req.Header.DisableNormalizing()
		req.Header.SetMethod([]string{"GET", "POST", "PüT", "X<Y>"}[r.IntN(4)])
		req.SetRequestURI(uris[r.IntN(len(uris))])
		req.Header.SetHost(pick())
		n := r.IntN(6)
		if i%100 == 0 {
			n = 40 // more than the stack holds
		}
		for range n {
			req.Header.Add(pick(), pick())
		}
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, addrs[r.IntN(len(addrs))], nil)
		tr := new(tracing.Tracer)
		var b *backend
		if r.IntN(2) == 0 {
			b = be
		}
		rd := redactions[r.IntN(len(redactions))]
		tr.SetRedaction(rd)
		c := dp.captureRequest(&ctx, tr, trace.StageInitialRequest, b)
		c.Flag = r.IntN(2) == 0
		got := appendRequestState(nil, tr, c)

		rq := &ctx.Request
		info := requestInfoOf(string(rq.Header.Method()), string(rq.Header.RequestURI()), string(rq.Header.Host()),
			string(rq.Header.Protocol()), c.Flag, headerMap(&rq.Header), tr.StartTime())
		want, err := json.Marshal(stateAsMaps(dp, info, rd, ctx.RemoteAddr(), b))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("request %d: requestState\n got %s\nwant %s", i, got, want)
		}
		if !json.Valid(got) {
			t.Fatalf("request %d: not JSON: %s", i, got)
		}

		var resp fasthttp.Response
		resp.Header.DisableNormalizing()
		resp.SetStatusCode(100 + r.IntN(500))
		for range n {
			resp.Header.Add(pick(), pick())
		}
		rc := dp.captureResponse(tr, trace.StageFinalResponse, resp.StatusCode(), &resp.Header, false)
		gotResp := dp.appendResponseState(nil, tr, rc)
		wantResp, err := json.Marshal(responseStateAsMaps(dp, rc.Code, redactedAsMaps(headerMap(&resp.Header), rd)))
		if err != nil {
			t.Fatal(err)
		}
		if string(gotResp) != string(wantResp) {
			t.Fatalf("response %d: requestState\n got %s\nwant %s", i, gotResp, wantResp)
		}
	}
}

// routeReasonsAsMaps is routeSelection's reasons as maps, as refproxy
// built them before it wrote them straight to JSON: the reference
// routeReasons is held to.
func routeReasonsAsMaps(sel routing.Selection) ([]any, int) {
	closest, _ := sel.Closest()
	reasons := make([]any, 0, min(len(sel.Verdicts), maxRouteReasons+2))
	omitted := 0
	for i, v := range sel.Verdicts {
		if i >= maxRouteReasons && v.Result != routing.Selected && &sel.Verdicts[i] != closest {
			omitted++
			continue
		}
		r := map[string]any{"route": v.Route.Key, "result": string(v.Result), "reason": v.Reason()}
		if len(v.Route.Matches) > 1 {
			r["match"] = v.Match
		}
		if v.Result == routing.NoMatch {
			c := v.Failed
			r["condition"], r["want"], r["got"] = string(c.Kind), c.Want, c.Got
			if c.Name != "" {
				r["name"] = c.Name
			}
			if c.Missing {
				r["missing"] = true
			}
		}
		reasons = append(reasons, r)
	}
	return reasons, omitted
}

// reasonsConfig has routes of every kind of condition: listeners by
// hostname, several matches, paths, methods, headers and query
// parameters, each present, absent and different.
const reasonsConfig = `
binds:
- port: 0
  listeners:
  - hostname: "*.example"
    routes:
    - name: multi
      matches:
      - {path: {exact: "/a<b>"}, method: POST}
      - {path: {pathPrefix: /multi}, headers: [{name: x-team, value: {exact: "blue&red"}}]}
      - {path: {regex: "/r[0-9]+"}, query: [{name: q, value: {exact: "1"}}]}
    - name: hosts
      hostnames: [a.example, "é.example"]
      matches: [{path: {pathPrefix: /h}}]
    - name: hdr
      matches: [{path: {pathPrefix: /}, headers: [{name: x-env, value: {regex: "pro?d"}}]}]
    - name: auth
      matches: [{path: {pathPrefix: /auth}, headers: [{name: Authorization, value: {exact: "Bearer <admin>&1"}}]}]
  - hostname: other.test
    routes:
    - name: other
      backends: [{host: "127.0.0.1:1"}]
`

// TestRouteReasonsMatchMaps: routeSelection's reasons written straight
// to JSON are, byte for byte, what encoding/json writes for the maps they
// stand for, over random requests to routes failing on every kind of
// condition (strings with escapes and invalid UTF-8 among the values; an
// authorization the route does not take, redacted), and with more routes
// than maxRouteReasons (reasonsOmitted).
func TestRouteReasonsMatchMaps(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 2026))
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	check := func(t *testing.T, dp *Dataplane, n int) {
		t.Helper()
		bt := dp.table.Load().binds[0]
		for i := range n {
			req := routing.Request{
				Method: pick("GET", "POST", "PUT"),
				Path:   pick("/a<b>", "/multi/x", "/r12", "/rx", "/h", "/", "/bad\xff", "/x\u2028", "/auth"),
				Host:   pick("a.example", "b.example", "é.example", "other.test", "nowhere", "\"q\""),
				Query:  pick("", "q=1", "q=2", "z=1"),
			}
			hs := map[string]string{}
			for _, k := range []string{"x-team", "x-env"} {
				if r.IntN(3) > 0 {
					hs[k] = pick("blue&red", "green", "prod", "pod", "<x>", "\xfe")
				}
			}
			const token = "sk-route-<token>&x"
			if r.IntN(2) > 0 {
				hs["authorization"] = pick("Bearer "+token, "Bearer <admin>&1", token)
			}
			sel := bt.routing.Explain(&req, func(name string) (string, bool) { v, ok := hs[strings.ToLower(name)]; return v, ok })
			redactSelection(&sel, dp.table.Load().redaction)
			for _, v := range sel.Verdicts {
				if strings.Contains(v.Failed.Got, token) || strings.Contains(v.Reason(), token) {
					t.Fatalf("request %d: the route's reason shows the request's credential: %+v", i, v)
				}
			}
			got, gotOmitted := appendRouteReasons(nil, sel)
			want, wantOmitted := routeReasonsAsMaps(sel)
			wantJSON, err := json.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(wantJSON) || gotOmitted != wantOmitted {
				t.Fatalf("request %d %+v: reasons (%d omitted)\n got %s\nwant %s (%d omitted)", i, req, gotOmitted, got, wantJSON, wantOmitted)
			}
			// The event's members, as the stream sends them.
			evaluated := []string{}
			if sel.Evaluated != nil {
				evaluated = sel.Evaluated
			}
			fields := map[string]any{"evaluatedRoutes": evaluated, "reasons": want, "selectedRoute": nil}
			if wantOmitted > 0 {
				fields["reasonsOmitted"] = wantOmitted
			}
			if sel.Route != nil {
				fields["selectedRoute"] = sel.Route.Key
			}
			if sel.Listener != nil {
				fields["listener"] = sel.Listener.Key
			}
			wantFields, err := json.Marshal(fields)
			if err != nil {
				t.Fatal(err)
			}
			if gotFields := "{" + string(appendRouteSelection(nil, sel)) + "}"; gotFields != string(wantFields) {
				t.Fatalf("request %d %+v: routeSelection\n got %s\nwant %s", i, req, gotFields, wantFields)
			}
		}
	}
	dp, _ := newBenchHandlerFor(t, false, reasonsConfig)
	check(t, dp, 2000)
	// More routes than the reasons bound: the selected route and the
	// closest miss are kept, the others past it counted.
	var b strings.Builder
	b.WriteString("binds:\n- port: 0\n  listeners:\n  - routes:\n")
	for i := range maxRouteReasons + 30 {
		fmt.Fprintf(&b, "    - name: r%03d\n      matches: [{path: {exact: /r%03d}, method: GET}]\n      backends: [{host: \"127.0.0.1:1\"}]\n", i, i)
	}
	dpMany, _ := newBenchHandlerFor(t, false, b.String())
	check(t, dpMany, 200)
}
