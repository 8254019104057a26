package connecttest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/kube"
	"github.com/gwdiag/gwdiag/clusters/kube/kubetest"
)

// gatewayNameLabel is connect.GatewayNameLabel, repeated so that this
// package does not import the package it tests.
const gatewayNameLabel = "gateway.networking.k8s.io/gateway-name"

// APIServer is a real local kube-apiserver (clusters/kube) with a client
// for creating the objects the connector looks up.
type APIServer struct {
	*kube.Local
	Client client.Client
}

// StartAPIServer starts a local API server with the Gateway API CRDs for
// the rest of the test (skipped only when it cannot be built).
func StartAPIServer(tb testing.TB) *APIServer {
	tb.Helper()
	l := kubetest.Start(tb)
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		tb.Fatal(err)
	}
	if err := gwv1.Install(scheme); err != nil {
		tb.Fatal(err)
	}
	cl, err := client.New(l.Config, client.Options{Scheme: scheme})
	if err != nil {
		tb.Fatalf("client: %v", err)
	}
	return &APIServer{Local: l, Client: cl}
}

// Namespace creates namespace name.
func (a *APIServer) Namespace(tb testing.TB, name string) {
	tb.Helper()
	if err := a.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		tb.Fatalf("create namespace %s: %v", name, err)
	}
}

// Gateway creates a Gateway with one HTTP listener.
func (a *APIServer) Gateway(tb testing.TB, ns, name string) {
	tb.Helper()
	gw := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwv1.GatewaySpec{
			GatewayClassName: "gwdiag",
			Listeners:        []gwv1.Listener{{Name: "http", Port: 8080, Protocol: gwv1.HTTPProtocolType}},
		},
	}
	if err := a.Client.Create(context.Background(), gw); err != nil {
		tb.Fatalf("create gateway %s/%s: %v", ns, name, err)
	}
}

// Pod creates a proxy pod of Gateway gateway and sets its phase through
// the status subresource, as a kubelet would ("" leaves it unset). It is
// on no node: the API server refuses to port-forward to it.
func (a *APIServer) Pod(tb testing.TB, ns, name, gateway string, phase corev1.PodPhase) {
	tb.Helper()
	a.PodOnNode(tb, ns, name, gateway, "", phase)
}

// PodOnNode is Pod, placed on node. A Running pod is also Ready, as a
// kubelet reports a pod whose containers all passed their readiness probe.
func (a *APIServer) PodOnNode(tb testing.TB, ns, name, gateway, node string, phase corev1.PodPhase) {
	tb.Helper()
	st := corev1.PodStatus{Phase: phase}
	if phase == corev1.PodRunning {
		st.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	a.PodWithStatus(tb, ns, name, gateway, node, st)
}

// PodWithStatus creates a proxy pod of Gateway gateway on node and sets
// its status through the status subresource (an empty phase leaves it
// unset: the API server defaults it to Pending).
func (a *APIServer) PodWithStatus(tb testing.TB, ns, name, gateway, node string, st corev1.PodStatus) {
	tb.Helper()
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{gatewayNameLabel: gateway}},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "proxy", Image: "gwdiag/refproxy"}}},
	}
	if err := a.Client.Create(ctx, p); err != nil {
		tb.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	if st.Phase == "" {
		return
	}
	p.Status = st
	if err := a.Client.Status().Update(ctx, p); err != nil {
		tb.Fatalf("set pod %s/%s status %+v: %v", ns, name, st, err)
	}
}

// Node creates a Node whose kubelet is k, so that the API server sends
// port-forwards of the pods placed on it to k.
func (a *APIServer) Node(tb testing.TB, name string, k *Kubelet) {
	tb.Helper()
	ctx := context.Background()
	host, port := k.Endpoint()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := a.Client.Create(ctx, n); err != nil {
		tb.Fatalf("create node %s: %v", name, err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: host}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	if err := a.Client.Status().Update(ctx, n); err != nil {
		tb.Fatalf("set node %s status: %v", name, err)
	}
}

// KubeconfigWithNamespace writes a copy of the server's kubeconfig whose
// current context has namespace ns, and returns its path.
func (a *APIServer) KubeconfigWithNamespace(tb testing.TB, ns string) string {
	tb.Helper()
	cfg, err := clientcmd.LoadFromFile(a.KubeconfigPath)
	if err != nil {
		tb.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		tb.Fatalf("kubeconfig %s has no current context", a.KubeconfigPath)
	}
	ctx.Namespace = ns
	path := filepath.Join(tb.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		tb.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		tb.Fatal(err)
	}
	return path
}
