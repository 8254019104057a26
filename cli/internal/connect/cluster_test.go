package connect

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	streamhttp "k8s.io/streaming/pkg/httpstream"

	"github.com/gwdiag/gwdiag/cli/internal/connect/connecttest"
	gwportforward "github.com/gwdiag/gwdiag/clusters/kube/portforward"
)

// TestClusterAgainstAPIServer resolves gateways and pods through a real
// kube-apiserver (clusters/kube). No kubelet runs, so pods are given a
// phase through the status subresource.
func TestClusterAgainstAPIServer(t *testing.T) {
	api := connecttest.StartAPIServer(t)
	kc := api.KubeconfigPath
	// one: one Gateway, pods a-stopped (Pending), b-run and c-run (Running).
	api.Namespace(t, "one")
	api.Gateway(t, "one", "gw")
	api.Pod(t, "one", "a-stopped", "gw", corev1.PodPending)
	api.Pod(t, "one", "c-run", "gw", corev1.PodRunning)
	api.Pod(t, "one", "b-run", "gw", corev1.PodRunning)
	api.Pod(t, "one", "other", "not-gw", corev1.PodRunning)
	// two: two Gateways.
	api.Namespace(t, "two")
	api.Gateway(t, "two", "beta")
	api.Gateway(t, "two", "alpha")
	api.Pod(t, "two", "alpha-0", "alpha", corev1.PodRunning)
	// empty: no Gateway.
	api.Namespace(t, "empty")
	// down: a Gateway whose pods do not run.
	api.Namespace(t, "down")
	api.Gateway(t, "down", "gw")
	api.Pod(t, "down", "gw-0", "gw", corev1.PodPending)
	api.Pod(t, "down", "gw-1", "gw", corev1.PodSucceeded)
	api.Pod(t, "down", "gw-2", "gw", "") // the API server defaults the phase to Pending
	api.PodWithStatus(t, "down", "gw-3", "gw", "", corev1.PodStatus{Phase: corev1.PodRunning,
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "proxy", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, RestartCount: 2}}})
	api.PodWithStatus(t, "down", "gw-4", "gw", "", corev1.PodStatus{Phase: corev1.PodPending,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "proxy", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "image not present"}}}}})
	// ctx: the kubeconfig context's namespace.
	api.Namespace(t, "ctx")
	api.Gateway(t, "ctx", "gw")
	api.Pod(t, "ctx", "ctx-pod", "gw", corev1.PodRunning)
	ctxKubeconfig := api.KubeconfigWithNamespace(t, "ctx")

	gw := func(name, ns string) *Resource { return &Resource{Kind: "gateway", Name: name, Namespace: ns} }
	tests := []struct {
		name    string
		c       *Cluster
		env     string // $KUBECONFIG
		wantPod string // namespace/name
		wantErr string
	}{
		{"explicit: first running by name", &Cluster{Resource: gw("gw", ""), Namespace: "one", Kubeconfig: kc}, "", "one/b-run", ""},
		{"namespace in the resource wins over -n", &Cluster{Resource: gw("gw", "one"), Namespace: "two", Kubeconfig: kc}, "", "one/b-run", ""},
		{"implicit: the only gateway", &Cluster{Namespace: "one", Kubeconfig: kc}, "", "one/b-run", ""},
		{"implicit: none", &Cluster{Namespace: "empty", Kubeconfig: kc}, "", "",
			`no Gateways found in namespace "empty"; pass a resource explicitly`},
		{"implicit: several", &Cluster{Namespace: "two", Kubeconfig: kc}, "", "",
			`found 2 Gateways in namespace "two" (alpha, beta); pass one explicitly, e.g. gateway/alpha`},
		{"explicit among several", &Cluster{Resource: gw("alpha", ""), Namespace: "two", Kubeconfig: kc}, "", "two/alpha-0", ""},
		{"no ready pod", &Cluster{Resource: gw("gw", "down"), Kubeconfig: kc}, "", "",
			`no ready pod for gateway "gw" in namespace "down" (label gateway.networking.k8s.io/gateway-name=gw): gw-0: Pending; gw-1: Succeeded; gw-2: Pending; ` +
				`gw-3: Running, not ready (container proxy not ready, 2 restarts); gw-4: Pending (container proxy waiting: ErrImageNeverPull image not present)`},
		{"no pods, no gateway", &Cluster{Resource: gw("missing", "one"), Kubeconfig: kc}, "", "",
			`no pods found for gateway "missing" in namespace "one" (label gateway.networking.k8s.io/gateway-name=missing): there is no Gateway "missing" in namespace "one"`},
		{"no pods, gateway not programmed", &Cluster{Resource: gw("beta", "two"), Kubeconfig: kc}, "", "",
			`no pods found for gateway "beta" in namespace "two" (label gateway.networking.k8s.io/gateway-name=beta): Gateway two/beta is Programmed=Unknown (Pending: Waiting for controller)`},
		{"namespace from the kubeconfig context", &Cluster{Kubeconfig: ctxKubeconfig}, "", "ctx/ctx-pod", ""},
		{"-n wins over the context", &Cluster{Namespace: "one", Kubeconfig: ctxKubeconfig}, "", "one/b-run", ""},
		{"kubeconfig from $KUBECONFIG", &Cluster{}, ctxKubeconfig, "ctx/ctx-pod", ""},
		{"context without namespace means default", &Cluster{Kubeconfig: kc}, "", "",
			`no Gateways found in namespace "default"; pass a resource explicitly`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tt.env)
			if tt.env == "" {
				t.Setenv("HOME", t.TempDir()) // no ~/.kube/config to fall back on
			}
			pod, err := tt.c.Pod(t.Context())
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error:\ngot  %v\nwant %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Pod: %v", err)
			}
			if got := pod.Namespace + "/" + pod.Name; got != tt.wantPod {
				t.Errorf("pod = %s, want %s", got, tt.wantPod)
			}
		})
	}

	// The real dialer (websocket, then SPDY) makes the port-forward request
	// to the API server; with no kubelet behind it, it fails, and the
	// error says where and why.
	t.Run("port-forward through the API server fails clearly", func(t *testing.T) {
		c := &Cluster{Resource: gw("gw", "one"), Kubeconfig: kc, AdminPort: 15000}
		defer c.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		_, err := c.AdminURL(ctx)
		want := "port-forward to pod one/b-run port 15000 through the API server at " + strings.TrimSuffix(api.Config.Host, "/") + " failed: error upgrading connection: "
		if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "does not have a host assigned") {
			t.Fatalf("AdminURL error:\ngot  %v\nwant %s...does not have a host assigned...", err, want)
		}
	})

	// kubectl's fallback, plain SPDY, reaches the API server too.
	t.Run("plain SPDY port-forward through the API server fails clearly", func(t *testing.T) {
		spdyOnly := func(cfg *rest.Config, u *url.URL) (streamhttp.Dialer, error) {
			transport, upgrader, err := spdy.RoundTripperFor(cfg)
			if err != nil {
				return nil, err
			}
			return spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, http.MethodPost, u), nil
		}
		c := &Cluster{Resource: gw("gw", "one"), Kubeconfig: kc, AdminPort: 15000, Dial: spdyOnly}
		defer c.Close()
		_, err := c.Listener(t.Context(), 8080)
		want := "port-forward to pod one/b-run port 8080 through the API server at " + strings.TrimSuffix(api.Config.Host, "/") +
			" failed: error upgrading connection: unable to upgrade connection: pod b-run does not have a host assigned"
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("Listener error:\ngot  %v\nwant %s...", err, want)
		}
	})

	t.Run("bad kubeconfig", func(t *testing.T) {
		c := &Cluster{Kubeconfig: "/nonexistent/kubeconfig"}
		_, err := c.AdminURL(t.Context())
		want := "cluster mode: reading kubeconfig (/nonexistent/kubeconfig): "
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("error:\ngot  %v\nwant %s...", err, want)
		}
	})

	// The forwarding logic end to end with an in-process kubelet: the pod's
	// admin port and listener port lead to two local servers.
	t.Run("forwards through the port-forward protocol", func(t *testing.T) {
		admin := serve(t, "admin")
		listener := serve(t, "listener")
		k := connecttest.NewKubelet(map[int]string{15000: admin, 8080: listener})
		defer k.Close()
		c := &Cluster{Resource: gw("gw", "one"), Kubeconfig: kc, AdminPort: 15000, Dial: k.Dial}
		u, err := c.AdminURL(t.Context())
		if err != nil {
			t.Fatalf("AdminURL: %v", err)
		}
		if u2, _ := c.AdminURL(t.Context()); u2 != u {
			t.Errorf("second AdminURL = %s, want the same forward %s", u2, u)
		}
		l, err := c.Listener(t.Context(), 8080)
		if err != nil {
			t.Fatalf("Listener: %v", err)
		}
		for _, tc := range []struct{ url, want string }{{u + "/x", "admin /x"}, {"http://" + l + "/y", "listener /y"}} {
			if got := get(t, tc.url); got != tc.want {
				t.Errorf("GET %s = %q, want %q", tc.url, got, tc.want)
			}
		}
		wantPaths := "/api/v1/namespaces/one/pods/b-run/portforward"
		if got := k.Paths(); len(got) != 2 || got[0] != wantPaths || got[1] != wantPaths {
			t.Errorf("portforward paths = %v, want 2 x %s", got, wantPaths)
		}
		// A pod port with nothing behind it: the kubelet's error reaches
		// the client as a broken connection.
		bad, err := c.Listener(t.Context(), 9999)
		if err != nil {
			t.Fatalf("Listener 9999: %v", err)
		}
		if _, err := http.Get("http://" + bad + "/"); err == nil {
			t.Errorf("GET through a forward to a closed pod port succeeded")
		}
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if _, err := http.Get(u + "/x"); err == nil {
			t.Errorf("admin forward %s still answers after Close", u)
		}
		if _, err := c.Listener(t.Context(), 8080); err == nil {
			t.Errorf("Listener after Close succeeded")
		}
	})
}

// serve starts an HTTP server answering "<name> <path>".
func serve(t *testing.T, name string) string {
	t.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", name, r.URL.Path)
	})}
	ln := listen(t)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func get(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return string(b)
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// TestClusterForwardThroughAPIServer runs the whole production path: the
// real dialers to a real kube-apiserver, which proxies the port-forward to
// the kubelet of the pod's Node, here an in-process one in front of a local
// server. Only the kubelet is a stand-in.
func TestClusterForwardThroughAPIServer(t *testing.T) {
	api := connecttest.StartAPIServer(t)
	admin := serve(t, "admin")
	k := connecttest.NewKubelet(map[int]string{15000: admin})
	defer k.Close()
	api.Node(t, "node-a", k)
	api.Namespace(t, "ns")
	api.Gateway(t, "ns", "gw")
	api.PodOnNode(t, "ns", "gw-0", "gw", "node-a", corev1.PodRunning)
	tests := []struct {
		name string
		dial DialFunc
	}{
		{"kubectl's fallback dialer (nil: the default)", nil},
		{"websocket tunnel only", func(cfg *rest.Config, u *url.URL) (streamhttp.Dialer, error) {
			return portforward.NewSPDYOverWebsocketDialerForStreaming(u, cfg)
		}},
		{"SPDY only", func(cfg *rest.Config, u *url.URL) (streamhttp.Dialer, error) {
			transport, upgrader, err := spdy.RoundTripperFor(cfg)
			if err != nil {
				return nil, err
			}
			return spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, http.MethodPost, u), nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(k.Served())
			c := &Cluster{Namespace: "ns", Kubeconfig: api.KubeconfigPath, Dial: tt.dial} // AdminPort 0: 15000
			defer c.Close()
			u, err := c.AdminURL(t.Context())
			if err != nil {
				t.Fatalf("AdminURL: %v", err)
			}
			if got := get(t, u+"/config_dump"); got != "admin /config_dump" {
				t.Errorf("GET through the API server = %q, want %q", got, "admin /config_dump")
			}
			if got := k.Served()[before:]; len(got) != 1 || got[0] != "/portForward/ns/gw-0" {
				t.Errorf("kubelet served %v, want one /portForward/ns/gw-0", got)
			}
		})
	}
}

// TestDialKubernetesFallsBackToSPDY dials, with kubectl's dialer, a server
// that refuses the websocket upgrade (as API servers before 1.30 do): the
// forward must still work, over SPDY.
func TestDialKubernetesFallsBackToSPDY(t *testing.T) {
	admin := serve(t, "admin")
	k := connecttest.NewKubelet(map[int]string{15000: admin})
	defer k.Close()
	cfg, u, err := k.Direct("/portForward/ns/pod")
	if err != nil {
		t.Fatal(err)
	}
	d, err := gwportforward.DialKubernetes(cfg, u)
	if err != nil {
		t.Fatal(err)
	}
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddressesForStreaming(d, []string{"127.0.0.1"}, []string{"0:15000"}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("ForwardPorts: %v", err)
	}
	defer func() { close(stop); <-done }()
	ports, err := pf.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, fmt.Sprintf("http://127.0.0.1:%d/x", ports[0].Local)); got != "admin /x" {
		t.Errorf("GET through the forward = %q, want %q", got, "admin /x")
	}
	// One refused websocket attempt, then the SPDY connection.
	if got := k.Served(); len(got) != 2 {
		t.Errorf("kubelet saw %d requests %v, want 2 (websocket refused, then SPDY)", len(got), got)
	}
}
