package refproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/golden/configdump"
	"github.com/gwdiag/gwdiag/refproxy/config"
	"github.com/gwdiag/gwdiag/refproxy/internal/admin"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

func adminDo(t *testing.T, p *Proxy, method, path string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+p.AdminAddr()+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestConfigDump(t *testing.T) {
	be := backendServer(t, "a", nil)
	p := startProxy(t, `
binds:
- port: 0
  listeners:
  - routes:
    - name: httpbin
      matches: [{path: {regex: "/a+"}, method: GET, headers: [{name: x-a, value: {exact: b}}]}]
      policies:
        localRateLimit: [{maxTokens: 5, tokensPerFill: 5, fillInterval: 1s}]
      backends: [{host: "`+be+`"}]
    - name: fallback
      backends: [{host: "`+be+`"}]
policies:
- name: {name: p, namespace: default}
  target: {route: {name: fallback, namespace: default}}
  policy:
    localRateLimit: [{maxTokens: 5, tokensPerFill: 5, fillInterval: 1s}]
`)
	for range 3 {
		get(t, "http://"+p.BindAddrs()[0]+"/x")
	}
	// Stats are recorded once the response has gone out, just after the client has it.
	var resp *http.Response
	var body string
	eventually(t, "3 requests in the dump", func() bool {
		resp, body = adminDo(t, p, http.MethodGet, "/config_dump")
		return strings.Contains(body, `"total_requests": 3`)
	})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("config_dump: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sch, err := jsonschema.NewCompiler().Compile("config/testdata/schema/config_dump.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("config_dump does not follow the reference schema:\n%v\n%s", err, body)
	}
	// The open parts in the reference's shapes (shared/real-world/agentgateway/README.md).
	var dump struct {
		Binds []struct {
			Address string
		}
		Policies []struct {
			Key    string
			Name   struct{ Name, Namespace string }
			Target struct{ Route struct{ Name string } }
			Policy struct {
				Traffic struct {
					Phase          string
					LocalRateLimit []struct{ FillInterval string }
				}
			}
		}
		Backends []struct {
			Backend struct {
				Host struct {
					Name, Namespace, Target string
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &dump); err != nil {
		t.Fatal(err)
	}
	if len(dump.Policies) != 1 || dump.Policies[0].Name.Name != "p" || dump.Policies[0].Target.Route.Name != "fallback" ||
		dump.Policies[0].Key != "traffic/default/p:localRateLimit:default/fallback" || dump.Policies[0].Policy.Traffic.Phase != "route" ||
		len(dump.Policies[0].Policy.Traffic.LocalRateLimit) != 1 || dump.Policies[0].Policy.Traffic.LocalRateLimit[0].FillInterval != "1s" {
		t.Errorf("policies = %+v, want policy p on route fallback, phase route, with fillInterval 1s", dump.Policies)
	}
	// The address the bind really listens on, not a wildcard.
	if len(dump.Binds) != 1 || dump.Binds[0].Address != p.BindAddrs()[0] {
		t.Errorf("binds = %+v, want one bind at %s", dump.Binds, p.BindAddrs()[0])
	}
	if h := dump.Backends; len(h) != 1 || h[0].Backend.Host.Name != be || h[0].Backend.Host.Namespace != "default" || h[0].Backend.Host.Target != be {
		t.Errorf("backends = %+v, want one host backend %s in default", h, be)
	}
	// The statistics, read as the CLI reads them.
	d, err := configdump.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	eps := d.Endpoints()
	if len(eps) != 1 {
		t.Fatalf("endpoints = %+v, want one", eps)
	}
	if e := eps[0]; e.Type != configdump.TypeBackend || e.Name != be || e.Namespace != "default" || e.Endpoint != be ||
		e.Info.Requests() != 3 || e.Info.Health != 1 || e.Info.Latency() <= 0 || e.Info.Latency() > 10 {
		t.Errorf("endpoint %+v (latency %vs), want Backend %s default at %s with 3 healthy requests and a latency in seconds", e, e.Info.Latency(), be, be)
	}
}

// TestConfigDumpServices: the endpoints of a Service (as the reference
// controller configures them) are listed under services[] with their
// statistics, and routes refer to the Service, as the reference does in a
// cluster; the dump still follows the published schema.
func TestConfigDumpServices(t *testing.T) {
	a, b := backendServer(t, "a", nil), backendServer(t, "b", nil)
	p := startProxy(t, `
binds:
- port: 0
  listeners:
  - routes:
    - name: httpbin
      key: team/httpbin.00.http
      namespace: team
      backends:
      - {host: "`+a+`", serviceOf: {name: httpbin, namespace: team, port: 8000}}
      - {host: "`+b+`", serviceOf: {name: httpbin, namespace: team, port: 8000}}
`)
	for range 4 {
		get(t, "http://"+p.BindAddrs()[0]+"/x")
	}
	var body string
	eventually(t, "4 requests in the dump", func() bool {
		_, body = adminDo(t, p, http.MethodGet, "/config_dump")
		d, err := configdump.Parse([]byte(body))
		if err != nil {
			return false
		}
		var n uint64
		for _, e := range d.Endpoints() {
			n += e.Info.Requests()
		}
		return n == 4
	})
	sch, err := jsonschema.NewCompiler().Compile("config/testdata/schema/config_dump.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("config_dump does not follow the reference schema:\n%v\n%s", err, body)
	}
	d, err := configdump.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Backends) != 0 || len(d.Services) != 1 || d.Services[0].Name != "httpbin" || d.Services[0].Namespace != "team" ||
		d.Services[0].Hostname != "httpbin.team.svc.cluster.local" {
		t.Fatalf("backends %+v, services %+v; want no backends and the Service team/httpbin", d.Backends, d.Services)
	}
	var got []string
	for _, e := range d.Endpoints() {
		if e.Type != configdump.TypeService || e.Name != "httpbin" || e.Namespace != "team" || e.Info.Health != 1 {
			t.Errorf("endpoint %+v, want a healthy endpoint of Service team/httpbin", e)
		}
		got = append(got, e.Endpoint)
	}
	if want := []string{min(a, b), max(a, b)}; !slices.Equal(got, want) {
		t.Errorf("endpoints %v, want %v", got, want)
	}
	var route configdump.Route
	for _, l := range d.Binds[0].Listeners {
		route = l.Routes["team/httpbin.00.http"]
	}
	if len(route.Backends) != 1 || route.Backends[0].Service == nil || route.Backends[0].Service.Name != "team/httpbin.team.svc.cluster.local" ||
		route.Backends[0].Service.Port != 8000 {
		t.Errorf("route backends %+v, want one reference to team/httpbin.team.svc.cluster.local port 8000", route.Backends)
	}
}

func TestEndpointHealthCountsFailures(t *testing.T) {
	be := backendServer(t, "a", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(500)
		}
	})
	p := startProxy(t, oneRoute(be))
	for _, path := range []string{"/ok", "/fail", "/ok", "/ok"} {
		get(t, "http://"+p.BindAddrs()[0]+path)
	}
	var body string
	eventually(t, "4 requests in the dump", func() bool {
		_, body = adminDo(t, p, http.MethodGet, "/config_dump")
		return strings.Contains(body, `"total_requests": 4`)
	})
	d, err := configdump.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if eps := d.Endpoints(); len(eps) != 1 || eps[0].Info.Health != 0.75 {
		t.Errorf("endpoints %+v, want one with health 0.75 (3 of 4 succeeded)", eps)
	}
}

func TestAdminEndpoints(t *testing.T) {
	p := startProxy(t, oneRoute(backendServer(t, "a", nil)))
	tests := []struct {
		method, path string
		wantCode     int
		wantBody     string // prefix
		wantAllow    string
	}{
		{"GET", "/logging", 200, "current log level is info\n", ""},
		{"POST", "/logging?level=warn,refproxy::trace=debug", 200, "current log level is warn,refproxy::trace=debug\n", ""},
		{"GET", "/logging", 200, "current log level is warn,refproxy::trace=debug\n", ""},
		{"POST", "/logging?level=refproxy=loud", 400, `invalid level: invalid level "loud" for module "refproxy"`, ""},
		{"POST", "/logging", 400, "missing query parameter level", ""},
		{"DELETE", "/logging", 405, "", "GET, POST"},
		{"GET", "/debug/pprof/profile?seconds=0", 400, `seconds must be an integer from 1 to 300, got "0"`, ""},
		{"GET", "/debug/pprof/profile?seconds=301", 400, "seconds must be", ""},
		{"GET", "/debug/pprof/profile?seconds=abc", 400, "seconds must be", ""},
		{"GET", "/debug/pprof/profile?seconds=1&frequency=0", 400, `frequency must be an integer from 1 to 1000, got "0"`, ""},
		{"GET", "/debug/pprof/profile?seconds=1&frequency=1001", 400, "frequency must be", ""},
		{"POST", "/debug/pprof/profile", 405, "", "GET"},
		{"POST", "/config_dump", 405, "", "GET"},
		{"PUT", "/debug/trace", 405, "", "GET, POST"},
		{"POST", "/memory", 405, "", "GET"},
		{"POST", "/debug/tasks", 405, "", "GET"},
		{"POST", "/debug/pprof/heap", 405, "", "GET"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			resp, body := adminDo(t, p, tt.method, tt.path)
			if resp.StatusCode != tt.wantCode || !strings.HasPrefix(body, tt.wantBody) {
				t.Errorf("got %d %q, want %d %q...", resp.StatusCode, body, tt.wantCode, tt.wantBody)
			}
			if tt.wantAllow != "" && resp.Header.Get("Allow") != tt.wantAllow {
				t.Errorf("Allow = %q, want %q", resp.Header.Get("Allow"), tt.wantAllow)
			}
		})
	}
}

func TestAdminJSONAndProfiles(t *testing.T) {
	p := startProxy(t, oneRoute(backendServer(t, "a", nil)))
	var mem struct {
		Allocator map[string]uint64
		Process   map[string]uint64
	}
	_, body := adminDo(t, p, http.MethodGet, "/memory")
	if err := json.Unmarshal([]byte(body), &mem); err != nil || mem.Allocator["allocated"] == 0 || mem.Process["residentBytes"] == 0 {
		t.Errorf("/memory = %s (%v); want allocator and process stats", body, err)
	}
	var tasks struct {
		Goroutines int
		Groups     []struct {
			Labels map[string]string
			Count  int
		}
	}
	_, body = adminDo(t, p, http.MethodGet, "/debug/tasks")
	if err := json.Unmarshal([]byte(body), &tasks); err != nil || tasks.Goroutines == 0 {
		t.Fatalf("/debug/tasks = %s (%v)", body, err)
	}
	// Proxies of earlier tests may still have goroutines winding down, so
	// this one's listener must have a group; others may too.
	found := map[string]bool{}
	for _, g := range tasks.Groups {
		found[g.Labels["component"]] = true
		if g.Labels["component"] == "dataplane" && g.Labels["listener"] == p.BindAddrs()[0] {
			found["this listener"] = true
		}
	}
	if !found["dataplane"] || !found["admin"] || !found["this listener"] {
		t.Errorf("task groups %v, want dataplane (with listener %s) and admin components", found, p.BindAddrs()[0])
	}
	resp, body := adminDo(t, p, http.MethodGet, "/debug/pprof/heap")
	if resp.StatusCode != 200 || len(body) == 0 {
		t.Errorf("heap: %d, %d bytes", resp.StatusCode, len(body))
	}
	resp, body = adminDo(t, p, http.MethodGet, "/debug/pprof/profile?seconds=1")
	// A pprof profile is gzip-compressed protobuf.
	if resp.StatusCode != 200 || !strings.HasPrefix(body, "\x1f\x8b") {
		t.Errorf("profile: %d, %d bytes, want a gzip pprof profile", resp.StatusCode, len(body))
	}
}

// TestProfilesTakeTurns: the runtime profiles one at a time, so a profile
// asked while another runs (of this proxy or of another in the same
// process) waits its turn and is served, not refused.
func TestProfilesTakeTurns(t *testing.T) {
	a := startProxy(t, oneRoute(backendServer(t, "a", nil)))
	b := startProxy(t, oneRoute(backendServer(t, "b", nil)))
	type answer struct {
		code int
		body string
	}
	answers := make(chan answer, 3)
	for _, p := range []*Proxy{a, a, b} {
		go func() {
			resp, err := http.Get("http://" + p.AdminAddr() + "/debug/pprof/profile?seconds=1")
			if err != nil {
				answers <- answer{body: err.Error()}
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			answers <- answer{resp.StatusCode, string(body)}
		}()
	}
	for range 3 {
		if got := <-answers; got.code != 200 || !strings.HasPrefix(got.body, "\x1f\x8b") {
			t.Errorf("profile asked while others ran: %d %.80q, want 200 and a gzip pprof profile", got.code, got.body)
		}
	}
}

func TestAdminAddressMustBeLoopback(t *testing.T) {
	tests := []struct {
		addr   string
		remote bool
		ok     bool
	}{
		{"127.0.0.1:15000", false, true},
		{"localhost:15000", false, true},
		{"[::1]:15000", false, true},
		{"0.0.0.0:15000", false, false},
		{":15000", false, false},
		{"10.1.2.3:15000", false, false},
		{"0.0.0.0:15000", true, true},
	}
	for _, tt := range tests {
		err := admin.CheckAddr(tt.addr, tt.remote)
		if (err == nil) != tt.ok {
			t.Errorf("CheckAddr(%q, %v) = %v, want ok=%v", tt.addr, tt.remote, err, tt.ok)
		}
	}
	cfg, _ := config.Parse("r.yaml", []byte("config: {adminAddr: \"0.0.0.0:0\"}\n"))
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "--admin-allow-remote") {
		t.Errorf("New with a non-loopback admin address: %v, want a refusal naming --admin-allow-remote", err)
	}
}

// TestStartWarnings: refproxy warns at start, naming the address, when
// its admin server (which streams the trace of every request) listens
// beyond loopback, and when traces show credentials in clear, naming what
// they show; neither on loopback with the defaults. (The address beyond
// loopback is listened on at loopback: tests use no other network.)
func TestStartWarnings(t *testing.T) {
	loopback := func(o *options) {
		o.listen = func(network, _ string) (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") }
	}
	for _, tc := range []struct {
		name      string
		cfg       string
		opts      []Option
		want, not []string
	}{
		{"loopback, redacted", "binds: []\n", nil, nil, []string{"level=WARN"}},
		{"beyond loopback", "config: {adminAddr: \"0.0.0.0:15999\"}\nbinds: []\n", []Option{WithAdminAllowRemote(true), loopback},
			[]string{"level=WARN", "beyond loopback", "addr=0.0.0.0:15999", "/debug/trace"}, []string{"in clear"}},
		{"in clear", "config: {sensitiveHeaders: [X-Tenant-Token, cookie]}\nbinds: []\n", []Option{WithTraceCredentialsInClear(true)},
			[]string{"level=WARN", "credentials in clear", "authorization", "x-api-key", "AI backends' API keys", "redacted=\"[X-Tenant-Token cookie]\""},
			[]string{"beyond loopback", "shown=\"[authorization cookie"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse("w.yaml", []byte(tc.cfg))
			if err != nil {
				t.Fatal(err)
			}
			var logs syncBuffer
			opts := append([]Option{WithAdminAddr("127.0.0.1:0"), WithLogOutput(&logs), WithEnv("", "", "")}, tc.opts...)
			if strings.Contains(tc.cfg, "adminAddr") {
				opts = opts[1:] // the config's address
			}
			p, err := New(cfg, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Shutdown(context.Background()) })
			out := logs.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("start logs lack %q:\n%s", w, out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("start logs hold %q:\n%s", n, out)
				}
			}
		})
	}
}

// syncBuffer is a bytes.Buffer logs may write from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// acceptWatcher is a listener whose first Accept records what the logs
// held then: the moment the admin server begins to serve.
type acceptWatcher struct {
	net.Listener
	logs  *syncBuffer
	once  sync.Once
	atFst chan string
}

func (l *acceptWatcher) Accept() (net.Conn, error) {
	l.once.Do(func() { l.atFst <- l.logs.String() })
	return l.Listener.Accept()
}

// TestStartLineBeforeAdminServes: the start line (and the start
// warnings) are written before the admin server accepts its first
// connection. A client that got in first could set a log level
// (POST /logging?level=warn) that filters them out: under load, the
// process target's output then held nothing (the clean-clone run of
// 2026-11-30, "POST /logging sets a level filter" on the process
// target: no proxy.log in the failure bundle).
func TestStartLineBeforeAdminServes(t *testing.T) {
	var logs syncBuffer
	w := &acceptWatcher{logs: &logs, atFst: make(chan string, 1)}
	listen := func(o *options) {
		o.listen = func(network, _ string) (net.Listener, error) {
			ln, err := net.Listen(network, "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			w.Listener = ln
			return w, nil
		}
	}
	cfg, err := config.Parse("s.yaml", []byte("binds: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(cfg, WithLogOutput(&logs), WithEnv("", "", ""), listen)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	select {
	case before := <-w.atFst:
		if !strings.Contains(before, "refproxy started") {
			t.Errorf("the admin server accepted before the start line was written; logs then:\n%q", before)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the admin server never called Accept")
	}
}
