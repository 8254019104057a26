package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubepods "github.com/gwdiag/gwdiag/clusters/kube/pods"
	"github.com/gwdiag/gwdiag/clusters/kube/portforward"
	"github.com/gwdiag/gwdiag/steps/await"
	"github.com/gwdiag/gwdiag/steps/targets"
)

// gatewayNameLabel is how a Gateway's proxy pods are found (agctl's
// selector; the reference controller sets it).
const gatewayNameLabel = "gateway.networking.k8s.io/gateway-name"

// serve waits until the scenario's data plane serves it and opens the
// forwards the steps use: the Gateway is Programmed, a proxy pod is ready,
// and the proxy's config names every backend endpoint. Each wait is
// bounded by what is left of ServeTimeout and its error says what it saw
// last.
func (d *clusterDeployment) serve(ctx context.Context, setup targets.Setup) error {
	deadline := time.Now().Add(time.Duration(d.c.opts.ServeTimeout))
	if err := d.waitProgrammed(ctx, deadline); err != nil {
		return err
	}
	proxy, err := waitPod(ctx, deadline, "proxy pod in namespace "+d.ns, time.Duration(d.c.opts.ServeTimeout), d.changes.Next, d.proxyPod)
	if err != nil {
		return err
	}
	d.proxyPodName = proxy.Name
	d.serving = true
	if d.admin, err = d.forward(ctx, proxy, d.c.opts.AdminPort); err != nil {
		return err
	}
	d.listeners = map[string]string{}
	for i, l := range setup.Listeners {
		if d.listeners[l.Name], err = d.forward(ctx, proxy, clusterListenerPort+i); err != nil {
			return err
		}
	}
	return d.waitConfig(ctx, deadline, proxy)
}

// waitServiceAccount waits for the namespace's default ServiceAccount,
// without which the API server refuses pods.
func waitServiceAccount(ctx context.Context, c client.Client, ns string, timeout time.Duration) error {
	err := await.Until(ctx, timeout, 50*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{}); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s: no default ServiceAccount (is kube-controller-manager running?): %w", ns, err)
	}
	return nil
}

// waitPod calls get until it returns a pod, up to deadline: at each change
// (a nil changed polls every 100 ms). get returns why it is not there yet,
// or an error, which the timeout reports; what names the pod, timeout the
// option the deadline came from.
func waitPod(ctx context.Context, deadline time.Time, what string, timeout time.Duration, changed func() <-chan struct{}, get func(context.Context) (*corev1.Pod, string, error)) (*corev1.Pod, error) {
	var pod *corev1.Pod
	interval := 100 * time.Millisecond
	if changed != nil {
		interval = changeFallback
	}
	err := await.UntilChanged(ctx, time.Until(deadline), interval, changed, func(ctx context.Context) (bool, string, error) {
		readCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		p, why, err := get(readCtx)
		switch {
		case apierrors.IsNotFound(err):
			return false, "not created yet", nil
		case err != nil:
			return false, err.Error(), nil
		case p != nil:
			pod = p
			return true, "", nil
		default:
			return false, why, nil
		}
	})
	if err != nil {
		return nil, fmt.Errorf("%s not ready within the serve timeout %s: %w", what, timeout, err)
	}
	return pod, nil
}

// proxyPod returns the Gateway's first ready proxy pod by name, as the
// CLI picks it, or what the pods are doing.
func (d *clusterDeployment) proxyPod(ctx context.Context) (*corev1.Pod, string, error) {
	var list corev1.PodList
	if err := d.c.client.List(ctx, &list, client.InNamespace(d.ns), client.MatchingLabels{gatewayNameLabel: clusterGatewayName}); err != nil {
		return nil, "", err
	}
	if len(list.Items) == 0 {
		return nil, fmt.Sprintf("no pod labelled %s=%s", gatewayNameLabel, clusterGatewayName), nil
	}
	p, seen := kubepods.FirstReady(list.Items)
	return p, seen, nil
}

// waitProgrammed waits until the Gateway's Programmed condition is True at
// its current generation: with a data plane, the controller says so only
// once a proxy replica is ready.
func (d *clusterDeployment) waitProgrammed(ctx context.Context, deadline time.Time) error {
	err := await.UntilChanged(ctx, time.Until(deadline), changeFallback, d.changes.Next, func(ctx context.Context) (bool, string, error) {
		conds, seen := d.readGateway(ctx)
		return programmed(conds) != nil, seen, nil
	})
	if err != nil {
		return fmt.Errorf("Gateway %s/%s not Programmed within the serve timeout %s: %w", d.ns, clusterGatewayName, time.Duration(d.c.opts.ServeTimeout), err)
	}
	return nil
}

// readGateway reads the Gateway's conditions for a wait: those written at
// its current generation (nil otherwise), and what the read saw.
func (d *clusterDeployment) readGateway(ctx context.Context) ([]targets.Condition, string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conds, current, err := d.read(ctx, "Gateway", clusterGatewayName)
	switch {
	case err != nil:
		return nil, err.Error()
	case !current:
		return nil, fmt.Sprintf("conditions not yet written at the current generation: %+v", conds)
	}
	return conds, fmt.Sprintf("conditions %+v", conds)
}

// programmed returns the condition Programmed=True among conds, or nil.
func programmed(conds []targets.Condition) *targets.Condition {
	for i, c := range conds {
		if c.Type == "Programmed" && c.Status == "True" {
			return &conds[i]
		}
	}
	return nil
}

// forward opens a port-forward to port of pod, closed at Stop.
func (d *clusterDeployment) forward(ctx context.Context, pod *corev1.Pod, port int) (string, error) {
	f, err := portforward.Start(ctx, d.c.cfg, nil, pod.Namespace, pod.Name, port)
	if err != nil {
		return "", err
	}
	d.forwards = append(d.forwards, f)
	return f.Addr(), nil
}

// configSuccesses is how many reads of /config_dump in a row must name
// every endpoint: one reload that a later one undoes is not "serving".
const configSuccesses = 2

// waitConfig waits until the proxy's /config_dump names every backend
// endpoint of the scenario. Since the EndpointSlices, which carry the
// endpoints, are created after every route and policy, a controller
// that translates what it reads has then put the whole scenario in the
// config; and the proxy has loaded it, binds included. The kubelet's
// ConfigMap refresh makes most of this wait.
func (d *clusterDeployment) waitConfig(ctx context.Context, deadline time.Time, proxy *corev1.Pod) error {
	var want []string
	for _, a := range d.backends {
		want = append(want, a)
	}
	sort.Strings(want)
	httpc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	streak := 0
	err := await.Until(ctx, time.Until(deadline), 200*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		dump, rejected, err := configDump(ctx, httpc, d.admin)
		if err != nil {
			streak = 0
			return false, err.Error(), nil
		}
		if missing := missingAddrs(dump, want); len(missing) > 0 {
			streak = 0
			seen := fmt.Sprintf("config_dump (%d bytes) does not name %s", len(dump), strings.Join(missing, ", "))
			if rejected != "" {
				seen += "; the proxy refused its last config: " + rejected
			}
			return false, seen, nil
		}
		streak++
		return streak >= configSuccesses, fmt.Sprintf("config_dump names every endpoint (%d time(s) in a row)", streak), nil
	})
	if err != nil {
		return fmt.Errorf("proxy pod %s/%s not serving the scenario within the serve timeout %s: %w", proxy.Namespace, proxy.Name, time.Duration(d.c.opts.ServeTimeout), err)
	}
	return nil
}

// configDump reads /config_dump, and the reference proxy's header telling
// a refused reload.
func configDump(ctx context.Context, httpc *http.Client, admin string) (dump []byte, rejected string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/config_dump", nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("GET /config_dump: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, "", fmt.Errorf("GET /config_dump: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("GET /config_dump: %s: %s", resp.Status, bytes.TrimSpace(b[:min(len(b), 200)]))
	}
	return b, resp.Header.Get("X-Config-Rejected"), nil
}

// missingAddrs returns the addresses of want that dump does not name as a
// whole (10.0.0.1:80 is not named by 10.0.0.1:8000 or 110.0.0.1:80).
func missingAddrs(dump []byte, want []string) []string {
	var out []string
	for _, a := range want {
		re := regexp.MustCompile(`(^|[^0-9.])` + regexp.QuoteMeta(a) + `($|[^0-9])`)
		if !re.Match(dump) {
			out = append(out, a)
		}
	}
	return out
}

// ListenerAddr implements targets.Deployment: a forward to the listener's
// port of the proxy pod.
func (d *clusterDeployment) ListenerAddr(listener string) (string, error) {
	if !d.serving {
		return "", errNoDataPlane
	}
	return targets.Named(d.listeners, "listener", listener)
}

// AdminAddr implements targets.Deployment: a forward to the proxy pod's
// admin port.
func (d *clusterDeployment) AdminAddr() string { return d.admin }

// BackendAddr implements targets.Deployment: the mock pool pod's IP and
// the backend's server's port there, the endpoint the proxy calls.
func (d *clusterDeployment) BackendAddr(backend string) (string, error) {
	if !d.serving {
		return "", errNoDataPlane
	}
	return targets.Named(d.backends, "backend", backend)
}

// control is the address of a mock's control endpoint, through the
// forward to the pool.
func (d *clusterDeployment) control(backend string) (string, error) {
	if !d.serving {
		return "", errNoDataPlane
	}
	return targets.Named(d.controls, "mock backend", backend)
}

func (d *clusterDeployment) controlError(backend, addr string, err error) error {
	return fmt.Errorf("mock backend %q (in the mock pool pod %s, at %s): %w", backend, d.poolPod, addr, err)
}
