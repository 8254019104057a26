package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gwdiag/gwdiag/cli/internal/connect/connecttest"
	"github.com/gwdiag/gwdiag/golden/trace"
)

// parseRaw parses --raw output line by line: every line one event object.
func parseRaw(t *testing.T, out string) []trace.Event {
	t.Helper()
	var events []trace.Event
	for i, l := range lines(out) {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &obj); err != nil {
			t.Fatalf("line %d is not a JSON object: %v\n%s", i+1, err, l)
		}
		for _, k := range []string{"eventStart", "eventEnd", "severity", "message"} {
			if _, ok := obj[k]; !ok {
				t.Errorf("line %d lacks %q: %s", i+1, k, l)
			}
		}
		ev, err := trace.Parse([]byte(l))
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		events = append(events, ev)
	}
	return events
}

// checkTrace checks the event order rules of spec part 3 that hold for every
// trace: it starts and finishes, eventEnd never decreases, and the route was
// selected.
func checkTrace(t *testing.T, events []trace.Event) {
	t.Helper()
	if len(events) < 4 {
		t.Fatalf("got %d events, want a whole trace", len(events))
	}
	if events[0].Type() != trace.RequestStarted || events[len(events)-1].Type() != trace.RequestFinished {
		t.Errorf("trace runs %s .. %s, want requestStarted .. requestFinished", events[0].Type(), events[len(events)-1].Type())
	}
	var route string
	for i, ev := range events {
		if i > 0 && ev.EventEnd < events[i-1].EventEnd {
			t.Errorf("eventEnd decreases at event %d: %d < %d", i+1, ev.EventEnd, events[i-1].EventEnd)
		}
		if ev.Type() == trace.RouteSelection {
			route, _ = ev.Message["selectedRoute"].(string)
		}
	}
	if !strings.HasSuffix(route, "/httpbin") {
		t.Errorf("selectedRoute = %q, want the httpbin route", route)
	}
}

// tracedPath returns request.path of the initial request snapshot.
func tracedPath(events []trace.Event) string {
	for _, ev := range events {
		if ev.Type() == trace.RequestSnapshot {
			if st, ok := ev.Message["requestState"].(map[string]any); ok {
				if r, ok := st["request"].(map[string]any); ok {
					p, _ := r["path"].(string)
					return p
				}
			}
		}
	}
	return ""
}

func TestInjectRaw(t *testing.T) {
	p := startProxy(t)
	clients := []struct {
		name string
		env  []string
	}{{"builtin", []string{noCurlPATH(t)}}}
	if hasCurl() {
		clients = append(clients, struct {
			name string
			env  []string
		}{"curl", nil})
	} else {
		t.Log("curl not on PATH: only the built-in client is tested")
	}
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			before := len(p.backend.requests())
			r := gwdiag(t, c.env, nil, "trace", "--local", "--admin-url", p.adminURL, "--raw",
				"--port", fmt.Sprint(p.port), "--", "http://httpbin.example/anything/"+c.name+"?q=1",
				"-X", "PUT", "-H", "x-test: one", "-d", "a=b")
			if r.code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
			}
			events := parseRaw(t, r.stdout)
			checkTrace(t, events)
			if got, want := tracedPath(events), "/anything/"+c.name; got != want {
				t.Errorf("traced path = %q, want %q", got, want)
			}
			seen := p.backend.requests()
			if len(seen) != before+1 {
				t.Fatalf("backend got %d requests, want 1", len(seen)-before)
			}
			got := seen[len(seen)-1]
			if got.Method != "PUT" || got.Body != "a=b" || got.Header.Get("x-test") != "one" || got.Path != "/anything/"+c.name+"?q=1" {
				t.Errorf("backend saw %s %s body %q x-test %q; want PUT /anything/%s?q=1 body \"a=b\" x-test \"one\"",
					got.Method, got.Path, got.Body, got.Header.Get("x-test"), c.name)
			}
			if got.Host != "httpbin.example" {
				t.Errorf("backend saw Host %q, want httpbin.example (the URL host, never resolved)", got.Host)
			}
			// The client that sent it: curl found on the user's PATH (which
			// gwdiag empties while its libraries initialise, and restores),
			// else the built-in one.
			wantUA := map[string]string{"builtin": "gwdiag", "curl": "curl/"}[c.name]
			if ua := got.Header.Get("User-Agent"); !strings.HasPrefix(ua, wantUA) {
				t.Errorf("backend saw User-Agent %q, want %s...: the %s client sent it", ua, wantUA, c.name)
			}
		})
	}
}

// TestAdminAddressSources injects a request with the admin server named in
// each supported way.
func TestAdminAddressSources(t *testing.T) {
	p := startProxy(t)
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgFile, []byte("config:\n  adminAddr: "+p.AdminAddr()+"\nbinds: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  []string
		args []string
	}{
		{"proxy-admin-port", nil, []string{"--proxy-admin-port", p.adminPort(t)}},
		{"config file", nil, []string{"-c", cfgFile}},
		{"ADMIN_ADDR", []string{"ADMIN_ADDR=" + p.AdminAddr()}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"trace", "--local", "--raw"}, tt.args...)
			args = append(args, "--port", fmt.Sprint(p.port), "--", "http://h.example/src")
			r := gwdiag(t, append(tt.env, noCurlPATH(t)), nil, args...)
			if r.code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
			}
			checkTrace(t, parseRaw(t, r.stdout))
		})
	}
}

// watch runs `gwdiag trace` in watch mode and, until it exits, sends a
// request through the proxy every few milliseconds: nothing tells an outside
// observer when the watcher is registered, and watch mode traces whichever
// request comes next.
func watch(t *testing.T, p *proxy, paths func(i int) string, args ...string) result {
	t.Helper()
	return watchSending(t, nil, func(i int) { p.get(t, paths(i)) }, args...)
}

// watchSending runs gwdiag with args and env added to the environment,
// calling send(i) every few milliseconds until it exits (bounded).
func watchSending(t *testing.T, env []string, send func(i int), args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, gwdiagBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case err := <-done:
			r := result{stdout: out.String(), stderr: errb.String()}
			if err != nil {
				r.code = cmd.ProcessState.ExitCode()
			}
			if ctx.Err() != nil {
				t.Fatalf("watch did not finish in time; stderr:\n%s", r.stderr)
			}
			return r
		case <-tick.C:
			send(i)
		}
	}
}

func TestWatchRaw(t *testing.T) {
	p := startProxy(t)
	r := watch(t, p, func(i int) string { return fmt.Sprintf("/watched/%d", i) },
		"trace", "--local", "--admin-url", p.adminURL, "--raw")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	events := parseRaw(t, r.stdout)
	checkTrace(t, events)
	if !strings.HasPrefix(tracedPath(events), "/watched/") {
		t.Errorf("traced path = %q, want one of the watched requests", tracedPath(events))
	}
}

func TestWatchExpression(t *testing.T) {
	p := startProxy(t)
	r := watch(t, p, func(i int) string {
		if i%3 == 2 {
			return fmt.Sprintf("/wanted/%d", i)
		}
		return fmt.Sprintf("/other/%d", i)
	}, "trace", "--local", "--admin-url", p.adminURL, "--raw", "--expression", `request.path.startsWith("/wanted/")`)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	events := parseRaw(t, r.stdout)
	checkTrace(t, events)
	if !strings.HasPrefix(tracedPath(events), "/wanted/") {
		t.Errorf("traced path = %q, want a request matching the expression", tracedPath(events))
	}
}

func TestTraceErrors(t *testing.T) {
	p := startProxy(t)
	closed := closedURL(t)
	broken := fakeAdmin(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ": ready\n\ndata: {\"eventStart\":null,\"eventEnd\":1,\"severity\":\"info\",\"message\":{\"type\":\"requestStarted\"}}\n\n")
	})
	failing := fakeAdmin(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "tracing disabled", http.StatusServiceUnavailable)
	})
	tests := []struct {
		name      string
		args      []string
		wantCode  int
		wantErr   string
		wantLines int
	}{
		{"unreachable admin", []string{"trace", "--local", "--raw", "--admin-url", closed}, 1,
			"Error: cannot reach the admin server at " + closed, 0},
		{"admin answers an error", []string{"trace", "--local", "--raw", "--admin-url", failing}, 1,
			"Error: admin server answered 503 Service Unavailable for " + failing + "/debug/trace: tracing disabled", 0},
		{"stream breaks before requestFinished", []string{"trace", "--local", "--raw", "--admin-url", broken}, 1,
			"Error: trace failed: trace stream ended before requestFinished (after 1 events)", 1},
		{"bad expression", []string{"trace", "--local", "--raw", "--admin-url", p.adminURL, "--expression", "request.path ==="}, 1,
			"Error: admin server answered 400 Bad Request", 0},
		{"request fails", []string{"trace", "--local", "--raw", "--admin-url", p.adminURL, "--port", portOf(t, closed), "--", "http://x/"}, 1,
			"Error: sending the request", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := gwdiag(t, []string{noCurlPATH(t)}, nil, tt.args...)
			if r.code != tt.wantCode || !strings.Contains(r.stderr, tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", r.code, r.stderr, tt.wantCode, tt.wantErr)
			}
			if n := len(lines(r.stdout)); n != tt.wantLines {
				t.Errorf("stdout has %d lines, want %d:\n%s", n, tt.wantLines, r.stdout)
			}
		})
	}
}

func TestFlagErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"two resources", []string{"trace", "gateway/a", "gateway/b"}, "accepts at most 1 resource arg, received 2"},
		{"local with resource", []string{"trace", "--local", "gateway/a"}, "--local does not accept a resource argument"},
		{"url without port", []string{"trace", "--local", "--", "http://x/"}, "a request URL requires --port"},
		{"port without url", []string{"trace", "--local", "--port", "3000"}, "--port requires a request URL after --"},
		{"args without url", []string{"trace", "--local", "--port", "3000", "--", "-X", "POST", "x.example"}, "request args after -- must include at least one http:// or https:// URL"},
		{"port out of range", []string{"trace", "--local", "--port", "70000", "--", "http://x/"}, "invalid --port 70000: want 1-65535"},
		{"bad resource", []string{"trace", "deployment/x"}, `invalid resource "deployment/x": unsupported type "deployment" (supported: gateway)`},
		{"resource without name", []string{"trace", "gateway"}, `invalid resource "gateway": want type/name[.namespace], e.g. gateway/my-gateway`},
		{"file with local", []string{"trace", "-f", "x.jsonl", "--local"}, "--file replays a saved trace and cannot be combined with --local"},
		{"file with port", []string{"trace", "-f", "x.jsonl", "--port", "1", "--", "http://x/"}, "--file replays a saved trace and cannot be combined with --port"},
		{"admin url without local", []string{"trace", "--admin-url", "http://127.0.0.1:1"}, "--admin-url applies to a standalone proxy: add --local"},
		{"admin url and port", []string{"trace", "--local", "--admin-url", "http://127.0.0.1:1", "--proxy-admin-port", "2"}, "--admin-url and --proxy-admin-port both name the admin server: pass only one"},
		{"namespace with local", []string{"trace", "--local", "-n", "prod"}, "--namespace and --kubeconfig apply to cluster mode and cannot be combined with --local"},
		{"bad admin url", []string{"trace", "--local", "--admin-url", "127.0.0.1:15000"}, `invalid --admin-url "127.0.0.1:15000": want http://host:port`},
		{"unknown flag", []string{"trace", "--nope"}, "unknown flag: --nope"},
		{"diff arity", []string{"trace", "diff", "a.jsonl"}, "diff takes two trace files, received 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := gwdiag(t, nil, nil, tt.args...)
			if r.code == 0 || !strings.Contains(r.stderr, "Error: "+tt.want) {
				t.Errorf("gwdiag %v: exit %d, stderr %q; want non-zero and %q", tt.args, r.code, r.stderr, "Error: "+tt.want)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
		})
	}
}

// TestClusterMode runs the built binary against a real local API server.
// No kubelet runs here, so the port-forward itself fails; the forwarding
// is tested through an in-process kubelet in cli/internal/tracecmd and
// cli/internal/configcmd.
func TestClusterMode(t *testing.T) {
	api := connecttest.StartAPIServer(t)
	api.Namespace(t, "prod")
	api.Gateway(t, "prod", "gw")
	api.Pod(t, "prod", "gw-0", "gw", corev1.PodRunning)
	api.Namespace(t, "two")
	api.Gateway(t, "two", "a")
	api.Gateway(t, "two", "b")
	api.Namespace(t, "down")
	api.Gateway(t, "down", "gw")
	api.Pod(t, "down", "gw-0", "gw", corev1.PodPending)
	kc := "KUBECONFIG=" + api.KubeconfigPath
	forwardErr := "Error: port-forward to pod prod/gw-0 port 15000 through the API server at " + strings.TrimSuffix(api.Config.Host, "/") + " failed: "
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no gateway", []string{kc}, []string{"trace", "--raw"}, `Error: no Gateways found in namespace "default"; pass a resource explicitly`},
		{"several gateways", []string{kc}, []string{"trace", "-n", "two", "--raw"}, `Error: found 2 Gateways in namespace "two" (a, b); pass one explicitly, e.g. gateway/a`},
		{"no ready pod", []string{kc}, []string{"config", "all", "gateway/gw.down"}, `Error: no ready pod for gateway "gw" in namespace "down" (label gateway.networking.k8s.io/gateway-name=gw): gw-0: Pending`},
		{"trace: forward fails", []string{kc}, []string{"trace", "gateway/gw", "-n", "prod", "--raw"}, forwardErr},
		{"inject: forward fails", nil, []string{"trace", "gw/gw.prod", "-k", api.KubeconfigPath, "--port", "8080", "--", "http://x/"}, forwardErr},
		{"config backends: forward fails", []string{kc}, []string{"config", "backends", "-n", "prod"}, forwardErr},
		{"no kubeconfig", []string{"KUBECONFIG=", "HOME=" + t.TempDir()}, []string{"trace", "gateway/gw", "--raw"}, "Error: cluster mode: no kubeconfig found at $KUBECONFIG or ~/.kube/config (pass -k/--kubeconfig, or use --local for a standalone proxy)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := gwdiag(t, tt.env, nil, tt.args...)
			if r.code != 1 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("gwdiag %v: exit %d, stderr %q; want exit 1 and %q", tt.args, r.code, r.stderr, tt.want)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
		})
	}
}

// TestClusterTraceThroughAPIServer runs the built binary in cluster mode
// the whole way: the pod is found through a real API server and the admin
// and listener port-forwards go through it, with kubectl's dialer, to the
// in-process kubelet of the pod's node, which serves them from an
// in-process reference proxy. The injected request's Host comes from the URL.
func TestClusterTraceThroughAPIServer(t *testing.T) {
	f := connecttest.StartFixture(t)
	env := []string{"KUBECONFIG=" + f.Kubeconfig}
	r := gwdiag(t, env, nil, "trace", "gateway/gw", "-n", f.Namespace, "--raw", "--port", "8080", "--",
		"http://cluster.example/get", "-H", "x-test: cluster")
	if r.code != 0 {
		t.Fatalf("gwdiag trace: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	events := parseRaw(t, r.stdout)
	checkTrace(t, events)
	for _, ev := range events {
		if ev.Type() != trace.RequestSnapshot || ev.Stage() != "initial request" {
			continue
		}
		state, _ := ev.Message["requestState"].(map[string]any)
		req, _ := state["request"].(map[string]any)
		env, _ := state["env"].(map[string]any)
		if req["host"] != "cluster.example" || env["podName"] != f.Pod || env["gateway"] != f.Gateway {
			t.Errorf("initial request host %v, env %v; want host cluster.example, pod %s, gateway %s", req["host"], env, f.Pod, f.Gateway)
		}
	}
	if got := f.Kubelet.Served(); len(got) != 2 || got[0] != f.KubeletPath() || got[1] != f.KubeletPath() {
		t.Errorf("kubelet served %v, want two port-forwards to %s (admin and listener)", got, f.KubeletPath())
	}
	// A pod port nothing listens on: the kubelet's refusal reaches the user.
	r = gwdiag(t, env, nil, "config", "all", "-n", f.Namespace, "--proxy-admin-port", "9")
	for _, want := range []string{"pod has no listener on port 9",
		"(port-forwarded to pod gwdiag/gw-0 port 9: does the proxy's admin server listen there? set --proxy-admin-port)"} {
		if r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("config all --proxy-admin-port 9: exit %d, stderr %q; want exit 1 and %q", r.code, r.stderr, want)
		}
	}
	// config all through the same path.
	r = gwdiag(t, env, nil, "config", "all", "-n", f.Namespace, "-o", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"httpbin"`) {
		t.Errorf("gwdiag config all: exit %d, stdout %q, stderr %q; want the route httpbin", r.code, r.stdout, r.stderr)
	}
}

func TestReplayRaw(t *testing.T) {
	want, err := os.ReadFile("testdata/trace.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	r := gwdiag(t, nil, nil, "trace", "-f", "testdata/trace.jsonl", "--raw")
	if r.code != 0 || r.stdout != string(want) {
		t.Errorf("replay from file: exit %d stderr %q; stdout differs from the file:\n%s", r.code, r.stderr, r.stdout)
	}
	r = gwdiag(t, nil, bytes.NewReader(want), "trace", "--file", "-", "--raw")
	if r.code != 0 || r.stdout != string(want) {
		t.Errorf("replay from stdin: exit %d stderr %q; stdout differs from the file:\n%s", r.code, r.stderr, r.stdout)
	}
	r = gwdiag(t, nil, strings.NewReader("{\"eventEnd\":1}\nnot json\n"), "trace", "-f", "-", "--raw")
	// The valid events first, then each bad line named, as agctl does.
	if r.code != 1 || r.stdout != "{\"eventEnd\":1}\n" || !strings.Contains(r.stderr, "Error: stdin: 1 line is not a trace event:\n  stdin:2: not a JSON trace event") {
		t.Errorf("bad replay: exit %d stdout %q stderr %q; want the first event, exit 1 and stdin:2", r.code, r.stdout, r.stderr)
	}
}

func TestViewerNeedsTerminal(t *testing.T) {
	for _, args := range [][]string{
		{"trace", "--local", "--admin-url", "http://127.0.0.1:1"},
		{"trace", "-f", "testdata/trace.jsonl"},
	} {
		r := gwdiag(t, nil, nil, args...)
		want := "Error: the interactive viewer needs a terminal on stdin and stdout; use --raw for JSON Lines"
		if r.code != 2 || !strings.Contains(r.stderr, want) {
			t.Errorf("gwdiag %v without a terminal: exit %d, stderr %q; want exit 2 and %q", args, r.code, r.stderr, want)
		}
	}
}

// TestInterruptedWatch checks Ctrl-C (SIGINT) ends a waiting watch quietly.
func TestInterruptedWatch(t *testing.T) {
	p := startProxy(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, gwdiagBin, "trace", "--local", "--raw", "--admin-url", p.adminURL)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt once gwdiag is waiting: its connection to the admin server
	// is open (by then its signal handler is installed).
	waitConnected(t, p.AdminAddr())
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 || errb.Len() != 0 {
		t.Errorf("after SIGINT: exit %d (%v), stderr %q; want 130 and no error text", code, err, errb.String())
	}
}

// waitConnected polls /proc/net/tcp until some socket has an established
// connection to addr (127.0.0.1:port); only the gwdiag under test connects
// to this test's admin server.
func waitConnected(t *testing.T, addr string) {
	t.Helper()
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("no /proc/net/tcp: cannot tell when gwdiag is connected")
	}
	_, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	want := fmt.Sprintf("0100007F:%04X", port)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile("/proc/net/tcp")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(l)
			// f[2] is the remote address, f[3] the state (01 = established).
			if len(f) > 3 && f[2] == want && f[3] == "01" {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("gwdiag never connected to the admin server at %s", addr)
}
