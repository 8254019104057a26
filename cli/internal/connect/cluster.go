package connect

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/kube/pods"
	"github.com/gwdiag/gwdiag/clusters/kube/portforward"
)

// GatewayNameLabel is the label by which a Gateway's proxy pods are found
// (agctl's selector; Gateway API implementations set it on their pods).
const GatewayNameLabel = "gateway.networking.k8s.io/gateway-name"

// defaultAdminPort is the proxy's admin port when none is given.
const defaultAdminPort = 15000

// DialFunc opens the streaming connection of a port-forward
// (portforward.DialFunc): tests forward through an in-process server.
type DialFunc = portforward.DialFunc

// Cluster reaches a gateway's proxy pod in a Kubernetes cluster through
// port-forwards. The selection rules are agctl's: `gateway/<n>` picks the
// pods labelled gateway.networking.k8s.io/gateway-name=<n> and uses the
// first ready one by name; no resource means the only Gateway in the
// namespace. The pod is resolved once, on first use; every port gets its
// own forward on a free loopback port, all closed by Close.
type Cluster struct {
	Resource *Resource // nil: the only Gateway in the namespace
	// Namespace is -n; empty means the kubeconfig context's namespace
	// (default "default"). A namespace in Resource wins over both.
	Namespace string
	// Kubeconfig is -k; empty means $KUBECONFIG, then ~/.kube/config.
	Kubeconfig string
	// AdminPort is --proxy-admin-port; 0 means DefaultAdminPort.
	AdminPort int
	// Dial opens port-forward connections; nil means DialKubernetes.
	Dial DialFunc

	mu       sync.Mutex
	cfg      *rest.Config
	client   client.Client
	pod      *corev1.Pod
	ns, gw   string // the Gateway the pod serves
	forwards []*portforward.Forward
	admin    string
	closed   bool
}

// Client returns a client of the cluster (core and Gateway API types;
// others, such as policies, read as unstructured), the Gateway's
// namespace and its name, resolving the proxy pod first as the forwards do.
func (c *Cluster) Client(ctx context.Context) (client.Client, string, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.podLocked(ctx); err != nil {
		return nil, "", "", err
	}
	return c.client, c.ns, c.gw, nil
}

// AdminURL resolves the pod and forwards a free local port to its admin
// port; later calls return the same URL.
func (c *Cluster) AdminURL(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.admin != "" {
		return c.admin, nil
	}
	port := c.AdminPort
	if port == 0 {
		port = defaultAdminPort
	}
	addr, err := c.forwardLocked(ctx, port)
	if err != nil {
		return "", err
	}
	c.admin = "http://" + addr
	return c.admin, nil
}

// Listener forwards a free local port to the pod's listener port, so an
// injected request reaches the proxy exactly as in standalone mode.
func (c *Cluster) Listener(ctx context.Context, port int) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.forwardLocked(ctx, port)
}

// AdminHint names the forward behind the admin URL, for errors.
func (c *Cluster) AdminHint() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pod == nil {
		return ""
	}
	port := c.AdminPort
	if port == 0 {
		port = defaultAdminPort
	}
	return fmt.Sprintf("port-forwarded to pod %s/%s port %d: does the proxy's admin server listen there? set --proxy-admin-port", c.pod.Namespace, c.pod.Name, port)
}

// Close stops every forward and waits until its listener is closed.
func (c *Cluster) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, f := range c.forwards {
		f.Close()
	}
	c.forwards = nil
	return nil
}

// Pod resolves the proxy pod the forwards go to (once) and returns it.
func (c *Cluster) Pod(ctx context.Context) (*corev1.Pod, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.podLocked(ctx)
}

func (c *Cluster) podLocked(ctx context.Context) (*corev1.Pod, error) {
	if c.pod != nil {
		return c.pod, nil
	}
	cfg, ns, err := c.loadConfig()
	if err != nil {
		return nil, err
	}
	cl, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	name := ""
	if c.Resource != nil {
		name = c.Resource.Name
	} else if name, err = onlyGateway(ctx, cl, ns); err != nil {
		return nil, err
	}
	pod, err := gatewayPod(ctx, cl, ns, name)
	if err != nil {
		return nil, err
	}
	c.cfg, c.client, c.pod, c.ns, c.gw = cfg, cl, pod, ns, name
	return pod, nil
}

// loadConfig reads the kubeconfig and picks the namespace: the resource's,
// then -n, then the context's.
func (c *Cluster) loadConfig() (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if c.Kubeconfig != "" {
		rules.ExplicitPath = c.Kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		where := "$KUBECONFIG or ~/.kube/config"
		if c.Kubeconfig != "" {
			where = c.Kubeconfig
		}
		if clientcmd.IsEmptyConfig(err) {
			return nil, "", fmt.Errorf("cluster mode: no kubeconfig found at %s (pass -k/--kubeconfig, or use --local for a standalone proxy)", where)
		}
		return nil, "", fmt.Errorf("cluster mode: reading kubeconfig (%s): %w (pass -k/--kubeconfig, or use --local for a standalone proxy)", where, err)
	}
	ns := c.Namespace
	if c.Resource != nil && c.Resource.Namespace != "" {
		ns = c.Resource.Namespace
	}
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, "", fmt.Errorf("cluster mode: namespace of the kubeconfig context: %w", err)
		}
	}
	return cfg, ns, nil
}

func newClient(cfg *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := gwv1.Install(scheme); err != nil {
		return nil, err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("cluster mode: client for %s: %w", cfg.Host, err)
	}
	return cl, nil
}

// onlyGateway returns the name of the one Gateway in ns.
func onlyGateway(ctx context.Context, cl client.Client, ns string) (string, error) {
	var list gwv1.GatewayList
	if err := cl.List(ctx, &list, client.InNamespace(ns)); err != nil {
		if meta.IsNoMatchError(err) {
			return "", fmt.Errorf("listing Gateways in namespace %q: the cluster has no Gateway API CRDs (%v); pass a resource explicitly", ns, err)
		}
		return "", fmt.Errorf("listing Gateways in namespace %q: %w", ns, err)
	}
	switch len(list.Items) {
	case 0:
		return "", fmt.Errorf("no Gateways found in namespace %q; pass a resource explicitly", ns)
	case 1:
		return list.Items[0].Name, nil
	}
	names := make([]string, len(list.Items))
	for i, g := range list.Items {
		names[i] = g.Name
	}
	sort.Strings(names)
	return "", fmt.Errorf("found %d Gateways in namespace %q (%s); pass one explicitly, e.g. gateway/%s", len(names), ns, strings.Join(names, ", "), names[0])
}

// gatewayPod returns the first ready pod, by name, of Gateway name: a pod
// that is not ready may not serve its config yet, or be shutting down, so
// its trace would mislead. Without one, the error says what was found: each
// pod's state, or, with no pod at all, the Gateway's Programmed condition.
func gatewayPod(ctx context.Context, cl client.Client, ns, name string) (*corev1.Pod, error) {
	var list corev1.PodList
	sel := client.MatchingLabels{GatewayNameLabel: name}
	if err := cl.List(ctx, &list, client.InNamespace(ns), sel); err != nil {
		return nil, fmt.Errorf("listing pods of gateway %q in namespace %q: %w", name, ns, err)
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("no pods found for gateway %q in namespace %q (label %s=%s): %s", name, ns, GatewayNameLabel, name, gatewayState(ctx, cl, ns, name))
	}
	p, seen := pods.FirstReady(list.Items)
	if p == nil {
		return nil, fmt.Errorf("no ready pod for gateway %q in namespace %q (label %s=%s): %s", name, ns, GatewayNameLabel, name, seen)
	}
	return p, nil
}

// gatewayState says, for a Gateway without pods, what its status tells:
// whether it exists, and its Programmed condition, where a controller
// says why its proxy does not run.
func gatewayState(ctx context.Context, cl client.Client, ns, name string) string {
	const fallback = "is the Gateway programmed and its proxy deployed?"
	var gw gwv1.Gateway
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &gw); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("there is no Gateway %q in namespace %q", name, ns)
		}
		return fallback // no Gateway API, or not allowed to read it
	}
	c := meta.FindStatusCondition(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed))
	if c == nil {
		return fmt.Sprintf("Gateway %s/%s has no Programmed condition: does a controller serve its GatewayClass %q?", ns, name, gw.Spec.GatewayClassName)
	}
	return fmt.Sprintf("Gateway %s/%s is Programmed=%s (%s: %s)", ns, name, c.Status, c.Reason, c.Message)
}

// forwardLocked forwards a free loopback port to port of the pod and
// returns 127.0.0.1:<local>.
func (c *Cluster) forwardLocked(ctx context.Context, port int) (string, error) {
	if c.closed {
		return "", errors.New("cluster connection is closed")
	}
	pod, err := c.podLocked(ctx)
	if err != nil {
		return "", err
	}
	f, err := portforward.Start(ctx, c.cfg, c.Dial, pod.Namespace, pod.Name, port)
	if err != nil {
		return "", err
	}
	c.forwards = append(c.forwards, f)
	return f.Addr(), nil
}
