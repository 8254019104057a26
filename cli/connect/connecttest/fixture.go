package connecttest

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gwdiag/gwdiag/refproxy"
	"github.com/gwdiag/gwdiag/refproxy/config"
	"github.com/gwdiag/gwdiag/refproxy/mock"
)

// Pod ports of the Fixture's proxy pod.
const (
	AdminPort    = 15000
	ListenerPort = 8080
)

// Fixture is a gateway "gw" in namespace "gwdiag" of a real local API
// server, with one Running proxy pod "gw-0" whose admin port (15000) and
// listener port (8080) are served, through an in-process Kubelet, by an
// in-process reference proxy routing everything to an echo backend.
type Fixture struct {
	API        *APIServer
	Kubelet    *Kubelet
	Proxy      *refproxy.Proxy
	Kubeconfig string
	Namespace  string
	Gateway    string
	Pod        string
}

// StartFixture starts everything for the rest of the test.
func StartFixture(t *testing.T) *Fixture {
	t.Helper()
	f := &Fixture{API: StartAPIServer(t), Namespace: "gwdiag", Gateway: "gw", Pod: "gw-0"}
	f.Kubeconfig = f.API.KubeconfigPath
	f.API.Namespace(t, f.Namespace)
	f.API.Gateway(t, f.Namespace, f.Gateway)
	f.API.Pod(t, f.Namespace, f.Pod, f.Gateway, corev1.PodRunning)

	backend := httptest.NewServer(mock.NewEcho())
	t.Cleanup(backend.Close)
	cfg, err := config.Parse("cluster-proxy.yaml", fmt.Appendf(nil, `
binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: httpbin
      matches: [{path: {pathPrefix: /}}]
      backends: [{host: %q}]
`, backend.Listener.Addr().String()))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	p, err := refproxy.New(cfg, refproxy.WithAdminAddr("127.0.0.1:0"), refproxy.WithLogOutput(io.Discard),
		refproxy.WithEnv(f.Pod, f.Namespace, f.Gateway))
	if err != nil {
		t.Fatalf("refproxy.New: %v", err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	f.Proxy = p
	f.Kubelet = NewKubelet(map[int]string{AdminPort: p.AdminAddr(), ListenerPort: p.BindAddrs()[0]})
	t.Cleanup(f.Kubelet.Close)
	return f
}

// PortForwardPath is the portforward subresource of the Fixture's pod.
func (f *Fixture) PortForwardPath() string {
	return "/api/v1/namespaces/" + f.Namespace + "/pods/" + f.Pod + "/portforward"
}
