package whatif

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/cli/admin"
	"github.com/gwdiag/gwdiag/golden/configdump"
	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/refproxy/refproxytest"
)

// agreementConfig exercises every condition routing knows: listeners by
// hostname (exact, wildcard, none), route hostnames, exact, prefix and
// regex paths, methods, headers (exact, regex, missing), query
// parameters, several matches per route, and precedence ties.
const agreementConfig = `
binds:
- port: 0
  listeners:
  - name: any
    routes:
    - name: root
      backends: [{host: "%[1]s"}]
    - name: api
      matches: [{path: {pathPrefix: /api}}]
      backends: [{host: "%[1]s"}]
    - name: api-exact
      matches: [{path: {exact: /api/v1}}]
      backends: [{host: "%[1]s"}]
    - name: api-post
      matches: [{path: {pathPrefix: /api}, method: POST}]
      backends: [{host: "%[1]s"}]
    - name: api-blue
      matches: [{path: {pathPrefix: /api}, method: POST, headers: [{name: X-Tenant, value: {exact: blue}}]}]
      backends: [{host: "%[1]s"}]
    - name: versions
      matches: [{path: {regex: "/v[0-9]+/[a-z]+"}, headers: [{name: x-ver, value: {regex: "[0-9]+"}}]}]
      backends: [{host: "%[1]s"}]
    - name: search
      matches: [{path: {pathPrefix: /search}, query: [{name: q, value: {exact: go}}]}]
      backends: [{host: "%[1]s"}]
    - name: two
      matches: [{path: {exact: /two}}, {path: {pathPrefix: /deux}, method: PUT}]
      backends: [{host: "%[1]s"}]
    - name: hosted
      hostnames: [api.example.com, "*.wild.example"]
      matches: [{path: {pathPrefix: /api}}]
      backends: [{host: "%[1]s"}]
    - name: tie-b
      matches: [{path: {pathPrefix: /tie}}]
      backends: [{host: "%[1]s"}]
    - name: tie-a
      matches: [{path: {pathPrefix: /tie}}]
      backends: [{host: "%[1]s"}]
  - name: exact-host
    hostname: only.example.com
    routes:
    - name: only
      matches: [{path: {pathPrefix: /only}}]
      backends: [{host: "%[1]s"}]
  - name: wild-host
    hostname: "*.corp.example"
    routes:
    - name: corp
      matches: [{path: {exact: /corp}}]
      backends: [{host: "%[1]s"}]
`

// TestAgreesWithTheDataPlane: for every request, the what-if over
// refproxy's own /config_dump selects what the data plane selected for the
// same request (its trace's selectedRoute), lists the same evaluated
// routes, and gives each route the same verdict. Both run golden/routing;
// this proves the dump carries all selection needs (the matches as
// written, hostnames, listeners) through the dump's shape and back.
func TestAgreesWithTheDataPlane(t *testing.T) {
	be := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(be.Close)
	p := refproxytest.Start(t, fmt.Sprintf(agreementConfig, be.Listener.Addr().String()))
	adminURL := "http://" + p.AdminAddr()
	raw, err := (&admin.Client{BaseURL: adminURL}).ConfigDump(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d, err := configdump.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	type req struct {
		method, host, target string
		header               []string
	}
	reqs := []req{
		{"GET", "gw", "/", nil}, {"GET", "gw", "/api/x", nil}, {"GET", "gw", "/api/v1", nil}, {"POST", "gw", "/api/v1", nil},
		{"POST", "gw", "/api/x", nil}, {"POST", "gw", "/api/x", []string{"X-Tenant", "blue"}}, {"POST", "gw", "/api/x", []string{"x-tenant", "red"}},
		{"GET", "gw", "/v2/abc", []string{"X-Ver", "12"}}, {"GET", "gw", "/v2/abc", []string{"X-Ver", "x"}}, {"GET", "gw", "/v2/abc/d", nil},
		{"GET", "gw", "/search?q=go", nil}, {"GET", "gw", "/search?q=rust&x=1", nil}, {"GET", "gw", "/search?q=%67o", nil},
		{"GET", "gw", "/two", nil}, {"PUT", "gw", "/deux/x", nil}, {"GET", "gw", "/deux", nil},
		{"GET", "api.example.com", "/api/x", nil}, {"GET", "a.b.wild.example", "/api", nil}, {"GET", "wild.example", "/api", nil},
		{"GET", "gw", "/tie", nil}, {"GET", "only.example.com", "/only/x", nil}, {"GET", "only.example.com", "/", nil},
		{"GET", "x.corp.example", "/corp", nil}, {"GET", "x.corp.example", "/corp/x", nil}, {"GET", "GW:8080", "/api%2Fx", nil},
	}
	for _, r := range reqs {
		name := fmt.Sprintf("%s %s%s %v", r.method, r.host, r.target, r.header)
		t.Run(name, func(t *testing.T) {
			sel := traceSelection(t, adminURL, p.BindAddrs()[0], r.method, r.host, r.target, r.header)
			path, query, _ := strings.Cut(r.target, "?")
			if p, err := url.PathUnescape(path); err == nil {
				path = p
			}
			h := http.Header{}
			for i := 0; i+1 < len(r.header); i += 2 {
				h.Add(r.header[i], r.header[i+1])
			}
			res, err := Evaluate(d, Request{Method: r.method, Host: r.host, Path: path, Query: query, Header: h})
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if res.Selection.Route != nil {
				got = res.Selection.Route.Key
			}
			if got != sel.selected {
				t.Errorf("what-if selected %q, the data plane %q", got, sel.selected)
			}
			if !slices.Equal(res.Selection.Evaluated, sel.evaluated) {
				t.Errorf("evaluated routes:\nwhat-if %q\ntrace   %q", res.Selection.Evaluated, sel.evaluated)
			}
			reasons := map[string]string{}
			for _, v := range res.Selection.Verdicts {
				reasons[v.Route.Key] = string(v.Result) + ": " + v.Reason()
			}
			for k, want := range sel.reasons {
				if reasons[k] != want {
					t.Errorf("route %s:\nwhat-if %s\ntrace   %s", k, reasons[k], want)
				}
			}
			if len(reasons) != len(sel.reasons) {
				t.Errorf("what-if has %d verdicts, the trace %d", len(reasons), len(sel.reasons))
			}
		})
	}
}

type traced struct {
	selected  string
	evaluated []string
	reasons   map[string]string
}

// traceSelection sends one request through the proxy and returns its
// trace's route selection.
func traceSelection(t *testing.T, adminURL, bind, method, host, target string, header []string) traced {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := sse.OpenURL(ctx, http.DefaultClient, adminURL, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	req, _ := http.NewRequestWithContext(ctx, method, "http://"+bind+target, nil)
	req.Host = host
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	tr, err := sse.ReadTrace(sse.NewReader(s.Response.Body))
	if err != nil {
		t.Fatal(err)
	}
	var out traced
	for _, e := range tr.Events {
		if e.Type() != trace.RouteSelection {
			continue
		}
		out.selected, _ = e.Message["selectedRoute"].(string)
		ev, _ := e.Message["evaluatedRoutes"].([]any)
		for _, k := range ev {
			out.evaluated = append(out.evaluated, k.(string))
		}
		out.reasons = map[string]string{}
		rs, _ := e.Message["reasons"].([]any)
		for _, r := range rs {
			m := r.(map[string]any)
			out.reasons[m["route"].(string)] = m["result"].(string) + ": " + m["reason"].(string)
		}
	}
	return out
}

// TestRealDumps: the real proxy's dumps (cli/internal/configcmd/testdata/agentgateway,
// sources in its README) evaluate without error.
func TestRealDumps(t *testing.T) {
	for _, tt := range []struct {
		file, host, path string
		want             string
	}{
		{"standalone-docs.dump.json", "localhost:3000", "/headers", "default/default/bind/3000/listener0/default/httpbin"},
		{"k8s-docs-fragments.assembled-dump.json", "timeout.example", "/delay/2", "httpbin/httpbin-timeout.0.0.http"},
		{"k8s-docs-fragments.assembled-dump.json", "retry.example", "/x", "httpbin/retry.0.0.http"},
		{"k8s-docs-fragments.assembled-dump.json", "other.example", "/x", ""},
	} {
		t.Run(tt.file+" "+tt.host+tt.path, func(t *testing.T) {
			raw, err := os.ReadFile("../configcmd/testdata/agentgateway/" + tt.file)
			if err != nil {
				t.Fatal(err)
			}
			d, err := configdump.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Evaluate(d, Request{Method: "GET", Host: tt.host, Path: tt.path, Header: http.Header{}})
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if res.Route != nil {
				got = res.Route.Key
			}
			if got != tt.want {
				t.Errorf("route %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPickBind(t *testing.T) {
	d := &configdump.Dump{Binds: []configdump.Bind{{Key: "bind/3000", Address: "[::]:3000"}, {Key: "bind/8080"}}}
	for _, tt := range []struct {
		port, hint int
		want, err  string
	}{
		{3000, 0, "bind/3000", ""},
		{0, 8080, "bind/8080", ""},
		{0, 0, "", "the dump has 2 binds (ports 3000, 8080): pass --port"},
		{9, 0, "", "the dump has no bind on port 9 (ports: 3000, 8080)"},
	} {
		t.Run(strconv.Itoa(tt.port)+"/"+strconv.Itoa(tt.hint), func(t *testing.T) {
			b, err := pickBind(d, Request{Port: tt.port, PortHint: tt.hint})
			switch {
			case tt.err != "" && (err == nil || err.Error() != tt.err):
				t.Errorf("error %v, want %s", err, tt.err)
			case tt.err == "" && (err != nil || b.Key != tt.want):
				t.Errorf("bind %v, %v; want %s", b, err, tt.want)
			}
		})
	}
}
