package connecttest

import (
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gwdiag/gwdiag/refproxy"
	"github.com/gwdiag/gwdiag/refproxy/config/configtest"
	"github.com/gwdiag/gwdiag/refproxy/refproxytest"
	"github.com/gwdiag/gwdiag/steps/mock"
)

// Pod ports of the Fixture's proxy pod. OtherAdminPort serves the admin
// server too, for --proxy-admin-port.
const (
	AdminPort      = 15000
	OtherAdminPort = 19000
	listenerPort   = 8080
)

// Fixture is a gateway "gw" in namespace "gwdiag" of a real local API
// server, with one Running proxy pod "gw-0" on Node "node-0". The node's
// kubelet is an in-process Kubelet that serves the pod's admin port (15000)
// and listener port (8080) from an in-process reference proxy routing
// everything to an echo backend. A port-forward with the default dialer
// thus goes through the real API server; only the kubelet is a stand-in.
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

	backend := httptest.NewServer(mock.NewEcho())
	t.Cleanup(backend.Close)
	p := refproxytest.Start(t, configtest.OneRoute(backend.Listener.Addr().String()), refproxy.WithEnv(f.Pod, f.Namespace, f.Gateway))
	f.Proxy = p
	f.Kubelet = NewKubelet(map[int]string{AdminPort: p.AdminAddr(), OtherAdminPort: p.AdminAddr(), listenerPort: p.BindAddrs()[0]})
	t.Cleanup(f.Kubelet.Close)
	f.API.Node(t, "node-0", f.Kubelet)
	f.API.PodOnNode(t, f.Namespace, f.Pod, f.Gateway, "node-0", corev1.PodRunning)
	return f
}

// KubeletPath is the path at which the API server asks the Kubelet to
// port-forward to the Fixture's pod.
func (f *Fixture) KubeletPath() string {
	return "/portForward/" + f.Namespace + "/" + f.Pod
}
