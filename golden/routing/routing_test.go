package routing

import (
	"encoding/json"
	"strings"
	"testing"
)

func str(s string) *string { return &s }

func prefix(p string) MatchSpec { return MatchSpec{Path: &PathSpec{PathPrefix: str(p)}} }

func mustRoute(t *testing.T, key string, hosts []string, specs ...MatchSpec) *Route {
	t.Helper()
	r, err := NewRoute(key, 0, hosts, specs)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// headers is a request's headers for tests, by lower-case name.
func headers(kv ...string) Headers {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[strings.ToLower(kv[i])] = kv[i+1]
	}
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// TestSelect: the reference's selection (agentgateway's route.rs and
// RouteSet): the listener by hostname, then route matches in precedence
// order, the route key breaking ties.
func TestSelect(t *testing.T) {
	l := NewListener("l", "", []*Route{
		mustRoute(t, "a-root", nil, prefix("/")),
		mustRoute(t, "b-api", nil, prefix("/api")),
		mustRoute(t, "c-api-exact", nil, MatchSpec{Path: &PathSpec{Exact: str("/api/v1")}}),
		mustRoute(t, "d-api-post", nil, MatchSpec{Path: &PathSpec{PathPrefix: str("/api")}, Method: "POST"}),
		mustRoute(t, "e-api-tenant", nil, MatchSpec{Path: &PathSpec{PathPrefix: str("/api")}, Method: "POST",
			Headers: []ValueSpec{{Name: "X-Tenant", Value: StringSpec{Exact: str("blue")}}}}),
		mustRoute(t, "f-host", []string{"api.example.com"}, prefix("/")),
		mustRoute(t, "g-wild", []string{"*.example.com"}, prefix("/")),
		mustRoute(t, "h-regex", nil, MatchSpec{Path: &PathSpec{Regex: str("/v2/[a-z]+")}}),
		mustRoute(t, "i-query", nil, MatchSpec{Path: &PathSpec{PathPrefix: str("/q")},
			Query: []ValueSpec{{Name: "v", Value: StringSpec{Regex: str("[0-9]+")}}}}),
		mustRoute(t, "j-tie", nil, prefix("/tie")),
		mustRoute(t, "i-tie", nil, prefix("/tie")),
	})
	b := &Bind{Listeners: []*Listener{l}}
	tests := []struct {
		name, method, path, host, query string
		h                               Headers
		want                            string
	}{
		{"longest prefix", "GET", "/api/x", "x", "", nil, "b-api"},
		{"exact before prefix", "GET", "/api/v1", "x", "", nil, "c-api-exact"},
		{"method before no method", "POST", "/api/x", "x", "", nil, "d-api-post"},
		{"more headers first", "POST", "/api/x", "x", "", headers("x-tenant", "blue"), "e-api-tenant"},
		{"header value mismatch falls back", "POST", "/api/x", "x", "", headers("x-tenant", "red"), "d-api-post"},
		{"exact host before routes without hostnames", "GET", "/api/x", "api.example.com", "", nil, "f-host"},
		{"wildcard host", "GET", "/api", "a.b.example.com", "", nil, "g-wild"},
		{"wildcard needs a label", "GET", "/other", "example.com", "", nil, "a-root"},
		{"regex is anchored", "GET", "/v2/abc/d", "x", "", nil, "a-root"},
		{"regex", "GET", "/v2/abc", "x", "", nil, "h-regex"},
		{"query", "GET", "/q", "x", "a=1&v=42", nil, "i-query"},
		{"query decoded", "GET", "/q", "x", "v=%34%32", nil, "i-query"},
		{"query mismatch", "GET", "/q", "x", "v=x", nil, "a-root"},
		{"prefix is segment-wise", "GET", "/apix", "x", "", nil, "a-root"},
		{"trailing slash", "GET", "/api/", "x", "", nil, "b-api"},
		{"tie broken by key", "GET", "/tie", "x", "", nil, "i-tie"},
		{"pseudo-header", "POST", "/api", "x", "", nil, "d-api-post"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Request{Method: tt.method, Path: tt.path, Host: tt.host, Query: tt.query}
			got, _ := b.Select(r, tt.h)
			if got == nil || got.Key != tt.want {
				t.Errorf("Select = %v, want %s", got, tt.want)
			}
			// Explain selects the same route.
			if s := b.Explain(r, tt.h); s.Route != got {
				t.Errorf("Explain selected %v, Select %v", s.Route, got)
			}
		})
	}
}

// TestListenerByHostname: the exact hostname, else the longest wildcard,
// else a listener without hostname; only that listener's routes.
func TestListenerByHostname(t *testing.T) {
	b := &Bind{Listeners: []*Listener{
		NewListener("any", "", []*Route{mustRoute(t, "any-r", nil, prefix("/"))}),
		NewListener("wild", "*.example.com", []*Route{mustRoute(t, "wild-r", nil, prefix("/only"))}),
		NewListener("wilder", "*.b.example.com", []*Route{mustRoute(t, "wilder-r", nil, prefix("/"))}),
		NewListener("exact", "api.example.com", []*Route{mustRoute(t, "exact-r", nil, prefix("/"))}),
	}}
	for host, want := range map[string]string{
		"api.example.com": "exact-r", "x.b.example.com": "wilder-r", "x.example.com": "", "other": "any-r",
	} {
		got, _ := b.Select(&Request{Method: "GET", Path: "/x", Host: host}, nil)
		if (got == nil && want != "") || (got != nil && got.Key != want) {
			t.Errorf("host %s: selected %v, want %q", host, got, want)
		}
	}
	s := b.Explain(&Request{Method: "GET", Path: "/x", Host: "x.example.com"}, nil)
	if s.Listener == nil || s.Listener.Key != "wild" || s.Route != nil {
		t.Fatalf("Explain: listener %v route %v, want listener wild and no route", s.Listener, s.Route)
	}
	reasons := map[string]string{}
	for _, v := range s.Verdicts {
		reasons[v.Route.Key] = v.Reason()
	}
	want := map[string]string{
		"wild-r":   `path "/x" does not match prefix "/only"`,
		"any-r":    `host "x.example.com" is not for the route's listener, which serves every host`,
		"wilder-r": `host "x.example.com" is not for the route's listener, which serves *.b.example.com`,
		"exact-r":  `host "x.example.com" is not for the route's listener, which serves api.example.com`,
	}
	for k, w := range want {
		if reasons[k] != w {
			t.Errorf("%s: reason %q, want %q", k, reasons[k], w)
		}
	}
}

// TestExplain: each route's verdict and the first condition it failed,
// with what it wanted and what came.
func TestExplain(t *testing.T) {
	l := NewListener("l", "", []*Route{
		mustRoute(t, "post-only", nil, MatchSpec{Path: &PathSpec{PathPrefix: str("/api")}, Method: "POST"}),
		mustRoute(t, "tenant", nil, MatchSpec{Path: &PathSpec{PathPrefix: str("/api")},
			Headers: []ValueSpec{{Name: "x-tenant", Value: StringSpec{Exact: str("blue")}}}}),
		mustRoute(t, "status", nil, MatchSpec{Path: &PathSpec{Exact: str("/status")}}),
		mustRoute(t, "hosted", []string{"api.example.com"}, prefix("/")),
		mustRoute(t, "two", nil, prefix("/nope"), MatchSpec{Path: &PathSpec{PathPrefix: str("/api")}, Query: []ValueSpec{{Name: "v", Value: StringSpec{Exact: str("2")}}}}),
	})
	b := &Bind{Listeners: []*Listener{l}}
	s := b.Explain(&Request{Method: "GET", Path: "/api/x", Host: "gw", Query: "v=1"}, headers("x-tenant", "red"))
	if s.Route != nil {
		t.Fatalf("selected %s, want none", s.Route.Key)
	}
	want := map[string]struct {
		kind Kind
		why  string
	}{
		"post-only": {KindMethod, "method is GET, the route wants POST"},
		"tenant":    {KindHeader, `header x-tenant is "red", the route wants exact "blue"`},
		"status":    {KindPath, `path "/api/x" does not match exact "/status"`},
		"hosted":    {KindHostname, `host "gw" is not among the route's hostnames (api.example.com)`},
		"two":       {KindQuery, `matches[1]: query parameter v is "1", the route wants exact "2"`},
	}
	if len(s.Verdicts) != len(want) {
		t.Errorf("%d verdicts, want %d", len(s.Verdicts), len(want))
	}
	for _, v := range s.Verdicts {
		w := want[v.Route.Key]
		if v.Result != NoMatch || v.Failed.Kind != w.kind || v.Reason() != w.why {
			t.Errorf("%s: %s %s %q, want noMatch %s %q", v.Route.Key, v.Result, v.Failed.Kind, v.Reason(), w.kind, w.why)
		}
	}
	if got := strings.Join(s.Evaluated, ","); got != "post-only,status,tenant,two" {
		t.Errorf("evaluated %s: want the routes registered for the host, sorted", got)
	}
	if c, n := s.Closest(); c == nil || c.Route.Key != "two" || n != 5 {
		t.Errorf("closest %v of %d, want two (it failed on the query) of 5", c, n)
	}
	missing := b.Explain(&Request{Method: "GET", Path: "/api/x", Host: "gw"}, nil)
	for _, v := range missing.Verdicts {
		if v.Route.Key == "tenant" && v.Reason() != `header x-tenant is missing, the route wants exact "blue"` {
			t.Errorf("missing header: %q", v.Reason())
		}
	}
	shadow := b.Explain(&Request{Method: "POST", Path: "/api/x", Host: "gw"}, headers("x-tenant", "blue"))
	got := map[string]string{}
	for _, v := range shadow.Verdicts {
		got[v.Route.Key] = string(v.Result) + ": " + v.Reason()
	}
	if got["post-only"] != `selected: matched path prefix "/api", method POST` ||
		got["tenant"] != `shadowed: matches too (path prefix "/api", header x-tenant exact "blue"), but post-only goes first` {
		t.Errorf("verdicts %q", got)
	}
}

// TestSelectAllocatesNothing: the data plane's path, with header, query
// and regex conditions, builds nothing.
func TestSelectAllocatesNothing(t *testing.T) {
	l := NewListener("l", "", []*Route{
		mustRoute(t, "a", []string{"*.example.com"}, MatchSpec{Path: &PathSpec{Regex: str("/v[0-9]/.*")}, Method: "GET",
			Headers: []ValueSpec{{Name: "x-a", Value: StringSpec{Exact: str("1")}}},
			Query:   []ValueSpec{{Name: "q", Value: StringSpec{Exact: str("2")}}}}),
		mustRoute(t, "b", nil, prefix("/")),
	})
	b := &Bind{Listeners: []*Listener{l}}
	r := &Request{Method: "GET", Path: "/v1/x", Host: "a.example.com", Query: "z=1&q=2"}
	var got *Route
	h := headers("x-a", "1")
	if n := testing.AllocsPerRun(100, func() { got, _ = b.Select(r, h) }); n != 0 {
		t.Errorf("Select allocates %v times, want 0", n)
	}
	if got == nil || got.Key != "a" {
		t.Errorf("selected %v, want a", got)
	}
}

// TestDumpShapes: the dump's matches (schema config_dump.schema.json,
// including "invalid") read into MatchSpec and written back unchanged.
func TestDumpShapes(t *testing.T) {
	in := `[{"path":{"pathPrefix":"/a"},"method":"GET","headers":[{"name":"x","value":{"regex":"b.*"}}],"query":[{"name":"q","value":{"exact":"1"}}]},` +
		`{"path":"invalid"},{"path":{"exact":"/e"},"headers":[{"name":"y","value":"invalid"}]}]`
	var specs []MatchSpec
	if err := json.Unmarshal([]byte(in), &specs); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(specs)
	if err != nil || string(out) != in {
		t.Fatalf("round trip:\ngot  %s (%v)\nwant %s", out, err, in)
	}
	r, err := NewRoute("k", 0, nil, specs)
	if err != nil {
		t.Fatal(err)
	}
	b := &Bind{Listeners: []*Listener{NewListener("l", "", []*Route{r})}}
	if got, _ := b.Select(&Request{Method: "GET", Path: "/e", Host: "h"}, headers("y", "anything")); got != nil {
		t.Errorf("an invalid header match took the request")
	}
	if got, _ := b.Select(&Request{Method: "GET", Path: "/a/1", Host: "h", Query: "q=1"}, headers("x", "bee")); got == nil {
		t.Errorf("the first match did not take the request")
	}
}

func TestCompileErrors(t *testing.T) {
	for _, s := range []MatchSpec{
		{Path: &PathSpec{Regex: str("(")}},
		{Headers: []ValueSpec{{Name: "", Value: StringSpec{Exact: str("x")}}}},
		{Query: []ValueSpec{{Name: "q", Value: StringSpec{Regex: str("[")}}}},
	} {
		if _, err := Compile(s); err == nil {
			t.Errorf("Compile(%+v): no error", s)
		}
	}
}

// TestShowHeaderValues: a route can show the values its header conditions
// want as a data plane shows credentials (every reason that quotes one:
// a miss, a match, a shadowed match), and matches as before.
func TestShowHeaderValues(t *testing.T) {
	auth := MatchSpec{Path: &PathSpec{PathPrefix: str("/")}, Headers: []ValueSpec{
		{Name: "Authorization", Value: StringSpec{Exact: str("Bearer sk-route-secret")}},
		{Name: "x-key", Value: StringSpec{Regex: str("k-[0-9]+")}},
		{Name: "x-team", Value: StringSpec{Exact: str("blue")}},
	}}
	r := mustRoute(t, "auth", nil, auth)
	r.ShowHeaderValues(func(name, value string) string {
		if name == "x-team" {
			return value
		}
		return "<" + name + ">"
	})
	b := &Bind{Listeners: []*Listener{NewListener("l", "", []*Route{r, mustRoute(t, "first", nil, MatchSpec{Path: &PathSpec{Exact: str("/x")}})})}}
	for _, tc := range []struct {
		path string
		hdr  []string
		want string
	}{
		{"/y", []string{"authorization", "Bearer other"}, `header authorization is "Bearer other", the route wants exact "<authorization>"`},
		{"/y", []string{"authorization", "Bearer sk-route-secret", "x-key", "z"}, `header x-key is "z", the route wants regex "<x-key>"`},
		{"/y", []string{"authorization", "Bearer sk-route-secret", "x-key", "k-1", "x-team", "blue"}, `matched path prefix "/", header authorization exact "<authorization>", header x-key regex "<x-key>", header x-team exact "blue"`},
		{"/x", []string{"authorization", "Bearer sk-route-secret", "x-key", "k-1", "x-team", "blue"}, `matches too (path prefix "/", header authorization exact "<authorization>", header x-key regex "<x-key>", header x-team exact "blue"), but first goes first`},
	} {
		s := b.Explain(&Request{Method: "GET", Path: tc.path, Host: "gw"}, headers(tc.hdr...))
		for _, v := range s.Verdicts {
			if got := v.Reason(); v.Route.Key == "auth" && (got != tc.want || strings.Contains(got, "sk-route-secret")) {
				t.Errorf("%s %v: %q, want %q", tc.path, tc.hdr, got, tc.want)
			}
		}
	}
}
