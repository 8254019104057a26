package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientportforward "k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	streamhttp "k8s.io/streaming/pkg/httpstream"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/cli/internal/connect"
	"github.com/gwdiag/gwdiag/clusters/controller"
	"github.com/gwdiag/gwdiag/clusters/kube"
	"github.com/gwdiag/gwdiag/clusters/kube/node"
	"github.com/gwdiag/gwdiag/clusters/toolbin"
	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/steps/targets"
	"github.com/gwdiag/gwdiag/steps/targets/cluster"
	"github.com/gwdiag/gwdiag/steps/tracecheck"
)

// nodeFixture is one scenario on a real local node (clusters/kube/node),
// deployed by the conformance suite's cluster target: the reference
// controller runs refproxy in a pod for Gateway "gwdiag", with one route
// "httpbin" to an echo backend in the mock pool's pod.
type nodeFixture struct {
	scenario   cluster.Scenario
	kubeconfig string
	client     client.Client
	ns, gw     string
	pod        string // the proxy pod
	backend    string // the echo backend's pod endpoint, as the proxy calls it
	listener   string // the test's own forward to the proxy's listener
}

// TestCLIOnLocalNode runs the built gwdiag in cluster mode against real
// pods: a kubelet, containerd and runc on this machine, the proxy deployed
// by the reference controller. The node starts once for every subtest (a
// start takes about 15 s, and one node runs per machine at a time).
func TestCLIOnLocalNode(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("skipped: the local node needs root (containerd, runc, a network bridge, cgroups); the CLI against real pods is not tested")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f := startNodeFixture(t, ctx)

	t.Run("trace inject", func(t *testing.T) { testNodeInject(t, f) })
	t.Run("trace watch, the only Gateway", func(t *testing.T) { testNodeWatch(t, f) })
	t.Run("config", func(t *testing.T) { testNodeConfig(t, f) })
	t.Run("port-forward protocols", func(t *testing.T) { testNodeDialers(t, ctx, f) })
	t.Run("no ready pod", func(t *testing.T) { testNodeNoReadyPod(t, ctx, f) })
	t.Run("viewer in tmux", func(t *testing.T) { testNodeTUI(t, f) })
	t.Run("explain cites the API server", func(t *testing.T) { testNodeExplain(t, ctx, f) })
}

// startNodeFixture starts the cluster target on a local node, configures
// the scenario and registers the clean-up: Stop, then a check that the
// node left nothing behind.
func startNodeFixture(t *testing.T, ctx context.Context) *nodeFixture {
	t.Helper()
	bins := t.TempDir()
	if err := toolbin.BuildStatic(ctx, "", bins+"/", "github.com/gwdiag/gwdiag/refproxy/cmd/refproxy"); err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	tgt := cluster.New(cluster.Options{LocalNode: true, RefproxyBinary: filepath.Join(bins, "refproxy"),
		// gwdiag serves the mocks itself, as the CLI's --cluster local-node does.
		MockBinary: gwdiagBin, MockArgs: []string{"conformance", "mockbackend"}, Output: &progress})
	began := time.Now()
	err := tgt.Start(ctx)
	switch {
	case errors.Is(err, node.ErrNotRoot), errors.Is(err, kube.ErrNoNetwork):
		t.Skipf("skipped: %v", err)
	case err != nil:
		t.Fatalf("start the local node: %v\n%s", err, progress.String())
	}
	started := time.Since(began)
	f := &nodeFixture{kubeconfig: filepath.Join(t.TempDir(), "kubeconfig")}
	var state string
	t.Cleanup(func() {
		if err := tgt.Stop(context.Background()); err != nil {
			t.Errorf("stop the cluster target: %v", err)
		}
		assertNodeGone(t, state)
	})
	if err := tgt.WriteKubeconfig(f.kubeconfig); err != nil {
		t.Fatal(err)
	}
	state = nodeState(t, f.kubeconfig)
	began = time.Now()
	dep, err := tgt.Configure(ctx, targets.Setup{
		Backends: []targets.Backend{{Name: "echo", Kind: targets.BackendEcho}},
		Listeners: []targets.Listener{{Name: "http", Routes: []targets.Route{
			{Name: "httpbin", PathPrefix: "/", Backend: "echo"}}}},
	})
	if err != nil {
		t.Fatalf("configure the scenario: %v", err)
	}
	t.Cleanup(func() {
		if err := dep.Stop(context.Background()); err != nil {
			t.Errorf("stop the scenario: %v", err)
		}
	})
	configured := time.Since(began)
	f.scenario = dep.(cluster.Scenario)
	f.ns, f.gw = f.scenario.Namespace(), f.scenario.Gateway()
	if f.backend, err = dep.BackendAddr("echo"); err != nil {
		t.Fatal(err)
	}
	if f.listener, err = dep.ListenerAddr("http"); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if f.client, err = controller.NewClient(cfg); err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := f.client.List(ctx, &pods, client.InNamespace(f.ns), client.MatchingLabels{connect.GatewayNameLabel: f.gw}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("proxy pods of gateway %s/%s: %d, %v; want one", f.ns, f.gw, len(pods.Items), err)
	}
	f.pod = pods.Items[0].Name
	t.Logf("%scluster target started in %s (images packed, node Ready, controller running); scenario served in %s (namespace %s, proxy pod %s)",
		progress.String(), started.Round(100*time.Millisecond), configured.Round(100*time.Millisecond), f.ns, f.pod)
	return f
}

// nodeState is the local node's state directory (gwdiag-localnode-*),
// found from the kubeconfig's CA file, which lives in it.
func nodeState(t *testing.T, kubeconfig string) string {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range kc.Clusters {
		for dir := c.CertificateAuthority; dir != "/" && dir != "."; dir = filepath.Dir(dir) {
			if strings.HasPrefix(filepath.Base(dir), "gwdiag-localnode-") {
				return dir
			}
		}
	}
	t.Fatalf("kubeconfig %s: no CA file under a gwdiag-localnode-* directory", kubeconfig)
	return ""
}

// assertNodeGone fails when anything of the node whose state directory is
// state is left: the directory, a process started from it (every one of
// the node's is), its bridge (gwdn + the first 8 bytes of the id). Only
// this node's things are looked at: another test may start a node as soon
// as this one released the machine.
func assertNodeGone(t *testing.T, state string) {
	t.Helper()
	if state == "" {
		return
	}
	if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the node's state directory %s is left (stat: %v)", state, err)
	}
	id := strings.TrimPrefix(filepath.Base(state), "gwdiag-localnode-")
	if _, err := os.Stat("/sys/class/net/gwdn" + id[:min(len(id), 8)]); err == nil {
		t.Errorf("the node's bridge gwdn%s is left", id[:min(len(id), 8)])
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(state)) {
			t.Errorf("a process of the node is left: %s", bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
}

// env is the environment naming the fixture's kubeconfig.
func (f *nodeFixture) env() []string { return []string{"KUBECONFIG=" + f.kubeconfig} }

// checkNodeTrace checks a trace taken from the proxy pod: the conformance
// suite's trace checks, the route in the cluster form, the backend the
// echo pod, status 200, host the one asked for, and the pod's identity in
// every snapshot (spec 2.1).
func checkNodeTrace(t *testing.T, f *nodeFixture, events []trace.Event, host string) {
	t.Helper()
	for _, v := range tracecheck.Check(events) {
		t.Errorf("trace check: %s", v)
	}
	if t.Failed() {
		return
	}
	if rs, _ := tracecheck.Find(events, string(trace.RouteSelection)); rs.Message["selectedRoute"] != f.ns+"/httpbin.00.http" {
		t.Errorf("selectedRoute = %v, want %s/httpbin.00.http", rs.Message["selectedRoute"], f.ns)
	}
	if bs, _ := tracecheck.Find(events, string(trace.BackendCallStart)); bs.Message["target"] != f.backend {
		t.Errorf("backendCallStart.target = %v, want the echo pod's endpoint %s", bs.Message["target"], f.backend)
	}
	if br, _ := tracecheck.Find(events, string(trace.BackendCallResult)); fmt.Sprint(br.Message["status"]) != "200" {
		t.Errorf("backendCallResult.status = %v, want 200", br.Message["status"])
	}
	initial, _ := tracecheck.Find(events, "requestSnapshot (initial request)")
	st := tracecheck.State(initial)
	if got, _ := tracecheck.Lookup(st, "request.host"); got != host {
		t.Errorf("initial request host = %v, want %s", got, host)
	}
	// A port-forward reaches the pod's loopback: the client is 127.0.0.1
	// inside the pod, not an address of the bridge.
	if got, _ := tracecheck.Lookup(st, "source.address"); got != "127.0.0.1" {
		t.Errorf("initial request source.address = %v, want 127.0.0.1 (a port-forward inside the pod)", got)
	}
	want := map[string]any{"podName": f.pod, "namespace": f.ns, "gateway": f.gw}
	for i, ev := range events {
		if ev.Type() != trace.RequestSnapshot && ev.Type() != trace.ResponseSnapshot {
			continue
		}
		env, _ := tracecheck.State(ev)["env"].(map[string]any)
		if fmt.Sprint(env) != fmt.Sprint(want) {
			t.Errorf("event %d (%s): env = %v, want %v", i+1, tracecheck.Name(ev), env, want)
		}
	}
}

// testNodeInject: inject mode with kubectl's dialer (websocket tunnel
// first), with curl and with the built-in client: two forwards, the
// request sent through the listener's, its Host from the URL.
func testNodeInject(t *testing.T, f *nodeFixture) {
	clients := map[string][]string{"builtin": {noCurlPATH(t)}}
	if hasCurl() {
		clients["curl"] = nil
	}
	for _, name := range []string{"curl", "builtin"} {
		extra, ok := clients[name]
		if !ok {
			t.Logf("curl not on PATH: only the built-in client is tested")
			continue
		}
		t.Run(name, func(t *testing.T) {
			before, err := f.scenario.BackendRequests(t.Context(), "echo")
			if err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			r := gwdiag(t, append(f.env(), extra...), nil, "trace", "gateway/"+f.gw, "-n", f.ns, "--raw", "--port", "8080", "--",
				"http://node.example/anything/"+name, "-X", "POST", "-H", "x-test: node", "-d", "a=b")
			took := time.Since(began)
			if r.code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
			}
			t.Logf("gwdiag trace (inject, %s) through the real pod: %s", name, took.Round(time.Millisecond))
			events := parseRaw(t, r.stdout)
			checkNodeTrace(t, f, events, "node.example")
			if got := tracedPath(events); got != "/anything/"+name {
				t.Errorf("traced path = %q, want /anything/%s", got, name)
			}
			initial, _ := tracecheck.Find(events, "requestSnapshot (initial request)")
			if m, _ := tracecheck.Lookup(tracecheck.State(initial), "request.method"); m != "POST" {
				t.Errorf("traced method = %v, want POST (the curl args)", m)
			}
			after, err := f.scenario.BackendRequests(t.Context(), "echo")
			if err != nil {
				t.Fatal(err)
			}
			if after != before+1 {
				t.Errorf("the echo pod counted %d requests, want 1", after-before)
			}
		})
	}
}

// testNodeWatch: watch mode, no resource (the namespace's only Gateway),
// traces a request another client sends through its own forward.
func testNodeWatch(t *testing.T, f *nodeFixture) {
	httpc := &http.Client{Timeout: 5 * time.Second}
	r := watchSending(t, f.env(), func(i int) {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/watched/%d", f.listener, i), nil)
		req.Host = "watch.example"
		if resp, err := httpc.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}, "trace", "-n", f.ns, "--raw")
	if r.code != 0 {
		t.Fatalf("watch: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	events := parseRaw(t, r.stdout)
	checkNodeTrace(t, f, events, "watch.example")
	if !strings.HasPrefix(tracedPath(events), "/watched/") {
		t.Errorf("traced path = %q, want one of the watched requests", tracedPath(events))
	}
}

// testNodeConfig: config all and backends through the admin forward show
// what the controller configured: the route in the cluster form and the
// echo pod's endpoint with the requests it took.
func testNodeConfig(t *testing.T, f *nodeFixture) {
	r := gwdiag(t, f.env(), nil, "config", "all", "gateway/"+f.gw+"."+f.ns, "-o", "yaml")
	if r.code != 0 || !strings.Contains(r.stdout, f.ns+"/httpbin.00.http") || !strings.Contains(r.stdout, f.backend) {
		t.Errorf("config all: exit %d, stderr %q; want the route %s/httpbin.00.http and the endpoint %s in:\n%s", r.code, r.stderr, f.ns, f.backend, r.stdout)
	}
	r = gwdiag(t, f.env(), nil, "config", "backends", "gateway/"+f.gw, "-n", f.ns)
	if r.code != 0 {
		t.Fatalf("config backends: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	rows := lines(cells(r.stdout))
	if len(rows) != 2 || rows[0] != "TYPE | NAME | NAMESPACE | ENDPOINT | HEALTH | REQUESTS | LATENCY" {
		t.Fatalf("config backends: want a header and one row, got:\n%s", r.stdout)
	}
	row := strings.Split(rows[1], " | ")
	if len(row) != 7 || row[3] != f.backend || row[4] != "1.00" || row[5] == "0" {
		t.Errorf("config backends row %q: want endpoint %s, health 1.00 and the requests of the earlier subtests", rows[1], f.backend)
	}
}

// testNodeDialers takes a whole trace through cli/internal/connect with each
// port-forward protocol alone, against the real API server and kubelet:
// SPDY tunnelled over a websocket (what kubectl's dialer uses first, and
// the only one a 1.36 server gets from gwdiag), and plain SPDY (its
// fallback for older servers), for both the admin and the listener
// forward.
func testNodeDialers(t *testing.T, ctx context.Context, f *nodeFixture) {
	dialers := []struct {
		name string
		dial connect.DialFunc
	}{
		{"websocket tunnel", func(cfg *rest.Config, u *url.URL) (streamhttp.Dialer, error) {
			return clientportforward.NewSPDYOverWebsocketDialerForStreaming(u, cfg)
		}},
		{"SPDY", func(cfg *rest.Config, u *url.URL) (streamhttp.Dialer, error) {
			transport, upgrader, err := spdy.RoundTripperFor(cfg)
			if err != nil {
				return nil, err
			}
			return spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, http.MethodPost, u), nil
		}},
	}
	for _, d := range dialers {
		t.Run(d.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			c := &connect.Cluster{Resource: &connect.Resource{Kind: "gateway", Name: f.gw}, Namespace: f.ns, Kubeconfig: f.kubeconfig, Dial: d.dial}
			defer c.Close()
			admin, err := c.AdminURL(ctx)
			if err != nil {
				t.Fatalf("AdminURL: %v", err)
			}
			listener, err := c.Listener(ctx, 8080)
			if err != nil {
				t.Fatalf("Listener: %v", err)
			}
			s, err := sse.OpenURL(ctx, http.DefaultClient, admin, "")
			if err != nil {
				t.Fatalf("open the trace stream: %v", err)
			}
			defer s.Close()
			host := strings.ReplaceAll(strings.ToLower(d.name), " ", "-") + ".example"
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+listener+"/dialer", nil)
			req.Host = host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("request through the listener forward: %v", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status %d, want 200", resp.StatusCode)
			}
			tr, err := sse.ReadTrace(sse.NewReader(s.Response.Body))
			if err != nil {
				t.Fatalf("read the trace: %v", err)
			}
			checkNodeTrace(t, f, tr.Events, host)
		})
	}
}

// testNodeNoReadyPod: the errors of cluster mode for a Gateway without a
// ready pod, on the real node: pods that do not become ready (a failing
// readiness probe, a missing image), a Gateway no controller serves, a
// Gateway whose Deployment cannot create pods (a quota of 0 pods), and no
// Gateway at all. Each says which gateway and namespace, and what it found.
func testNodeNoReadyPod(t *testing.T, ctx context.Context, f *nodeFixture) {
	stuck := f.namespace(t, ctx, nil)
	f.gateway(t, ctx, stuck, "stuck", "nobody")
	label := map[string]string{connect.GatewayNameLabel: "stuck"}
	f.create(t, ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: stuck, Name: "stuck-a", Labels: label},
		Spec: corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false), TerminationGracePeriodSeconds: ptr.To(int64(0)),
			Containers: []corev1.Container{{Name: "mock", Image: cluster.MockImage, ImagePullPolicy: corev1.PullNever,
				// Nothing listens on port 9: never ready.
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 1,
					ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9)}}}}}}})
	f.create(t, ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: stuck, Name: "stuck-b", Labels: label},
		Spec: corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false), TerminationGracePeriodSeconds: ptr.To(int64(0)),
			Containers: []corev1.Container{{Name: "proxy", Image: "gwdiag/absent:dev", ImagePullPolicy: corev1.PullNever}}}})
	f.waitPod(t, ctx, stuck, "stuck-a", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	f.waitPod(t, ctx, stuck, "stuck-b", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == "ErrImageNeverPull"
	})

	starved := f.namespace(t, ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}})
	f.gateway(t, ctx, starved, "starved", "gwdiag")
	f.waitProgrammedReason(t, ctx, starved, "starved", string(gwv1.GatewayReasonNoResources))

	label0 := "(label gateway.networking.k8s.io/gateway-name="
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"pods not ready: trace", []string{"trace", "gateway/stuck", "-n", stuck, "--raw"}, []string{
			`Error: no ready pod for gateway "stuck" in namespace "` + stuck + `" ` + label0 + `stuck): ` +
				`stuck-a: Running, not ready (container mock not ready, 0 restarts); stuck-b: Pending (container proxy waiting: ErrImageNeverPull `}},
		{"pods not ready: inject", []string{"trace", "gateway/stuck." + stuck, "--port", "8080", "--", "http://x.example/"},
			[]string{`Error: no ready pod for gateway "stuck" in namespace "` + stuck + `"`}},
		{"pods not ready: config", []string{"config", "backends", "-n", stuck},
			[]string{`Error: no ready pod for gateway "stuck" in namespace "` + stuck + `"`}},
		{"Deployment cannot create pods", []string{"trace", "gateway/starved", "-n", starved, "--raw"}, []string{
			`Error: no pods found for gateway "starved" in namespace "` + starved + `" ` + label0 + `starved): ` +
				`Gateway ` + starved + `/starved is Programmed=False (NoResources: Deployment ` + starved + `/starved-refproxy cannot create its pods: `,
			"exceeded quota: no-pods"}},
		{"no Gateway", []string{"config", "all", "gateway/missing", "-n", f.ns}, []string{
			`Error: no pods found for gateway "missing" in namespace "` + f.ns + `" ` + label0 + `missing): there is no Gateway "missing" in namespace "` + f.ns + `"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := gwdiag(t, f.env(), nil, tt.args...)
			t.Logf("gwdiag %s\n%s", strings.Join(tt.args, " "), r.stderr)
			for _, w := range tt.want {
				if r.code != 1 || !strings.Contains(r.stderr, w) {
					t.Errorf("gwdiag %v: exit %d, stderr:\n%s\nwant exit 1 and %q", tt.args, r.code, r.stderr, w)
				}
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
		})
	}

	// A Gateway no controller serves: no pods, and the CRD's default status.
	f.gateway(t, ctx, stuck, "unserved", "nobody")
	r := gwdiag(t, f.env(), nil, "trace", "gateway/unserved", "-n", stuck, "--raw")
	want := `Error: no pods found for gateway "unserved" in namespace "` + stuck + `" ` + label0 + `unserved): Gateway ` + stuck + `/unserved is Programmed=Unknown (Pending: Waiting for controller)`
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("unserved Gateway: exit %d, stderr:\n%s\nwant exit 1 and %q", r.code, r.stderr, want)
	}
}

// namespace creates a namespace for the test, with obj (a quota) in it,
// and waits for its default ServiceAccount, without which no pod is
// admitted. The node's Stop removes it with everything else.
func (f *nodeFixture) namespace(t *testing.T, ctx context.Context, obj client.Object) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gwdiag-cli-"}}
	f.create(t, ctx, ns)
	if obj != nil {
		obj.SetNamespace(ns.Name)
		f.create(t, ctx, obj)
	}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = f.client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{})
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("namespace %s: no default ServiceAccount within 30s: %v", ns.Name, last)
	}
	return ns.Name
}

// gateway creates a Gateway of class with one HTTP listener.
func (f *nodeFixture) gateway(t *testing.T, ctx context.Context, ns, name, class string) {
	t.Helper()
	f.create(t, ctx, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(class),
			Listeners: []gwv1.Listener{{Name: "http", Port: 8080, Protocol: gwv1.HTTPProtocolType}}}})
}

func (f *nodeFixture) create(t *testing.T, ctx context.Context, obj client.Object) {
	t.Helper()
	if err := f.client.Create(ctx, obj); err != nil {
		t.Fatalf("create %T %s/%s: %v", obj, obj.GetNamespace(), obj.GetName(), err)
	}
}

// waitPod polls pod ns/name until ok holds, for at most a minute.
func (f *nodeFixture) waitPod(t *testing.T, ctx context.Context, ns, name string, ok func(*corev1.Pod) bool) {
	t.Helper()
	p := &corev1.Pod{}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := f.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
			return false, nil
		}
		return ok(p), nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s never reached the state the test needs; last status %+v", ns, name, p.Status)
	}
}

// waitProgrammedReason polls Gateway ns/name until its Programmed
// condition has reason, for at most a minute.
func (f *nodeFixture) waitProgrammedReason(t *testing.T, ctx context.Context, ns, name, reason string) {
	t.Helper()
	gw := &gwv1.Gateway{}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := f.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, gw); err != nil {
			return false, nil
		}
		for _, c := range gw.Status.Conditions {
			if c.Type == string(gwv1.GatewayConditionProgrammed) && c.Reason == reason {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("Gateway %s/%s: Programmed never had reason %s; conditions %+v", ns, name, reason, gw.Status.Conditions)
	}
}

// testNodeTUI runs the viewer in cluster mode in a real terminal against
// the real pod.
func testNodeTUI(t *testing.T, f *nodeFixture) {
	s := newTmux(t, fmt.Sprintf("KUBECONFIG=%s %s trace gateway/%s.%s --port 8080 -- http://tmux.node/tui -H 'x-from: tmux'",
		f.kubeconfig, gwdiagBin, f.gw, f.ns))
	s.waitScreen("stream complete, press q to exit", "Request Start", "status=200", `selected "`+f.ns+`/httpbin.00.http"`)
	s.run("send-keys", "-t", "gw", "Down", "s")
	s.waitScreen("initial request (requestSnapshot)", "host: tmux.node", "podName: "+f.pod)
	s.run("send-keys", "-t", "gw", "q")
	if code := s.waitExit(); code != 0 {
		t.Errorf("exit status %d after q, want 0; screen:\n%s", code, s.screen())
	}
}
