package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubepods "github.com/gwdiag/gwdiag/clusters/kube/pods"
	"github.com/gwdiag/gwdiag/steps/mock"
	"github.com/gwdiag/gwdiag/steps/targets"
)

// The mock backends of a run with a data plane: one pod, started at the
// first scenario and kept for the run, serves a mock.Pool, and each
// scenario asks it for a server of its own per backend (its own port, its
// own counter), as the container target does with its one container. A
// scenario's backend Services have no selector; the EndpointSlice the
// target writes beside each leads to the pool pod's address and the
// server's port. One pod start per run, where a pod per scenario cost a
// pod start (sandbox, network, containers, probes) every scenario.
const (
	poolPodName = "gwdiag-mocks"
	// poolPort is the pool's control API in its pod (mock.Command's
	// --pool-addr).
	poolPort = 7999
	// unreachablePort is a port of the pool pod where nothing listens: the
	// proxy's connection is refused, a transport error, and the endpoint is
	// a real ready pod address, so the controller and the proxy treat it
	// like any other (no name to resolve; the local node has no DNS).
	unreachablePort = 9
	// endpointSliceManager marks the EndpointSlices the target writes
	// (endpointslice.kubernetes.io/managed-by), so that no controller of
	// the cluster takes them for its own.
	endpointSliceManager = "gwdiag-conformance"
)

// managedBy labels every namespace the target creates.
var managedBy = map[string]string{"app.kubernetes.io/managed-by": "gwdiag-conformance"}

// mockPool is the run's pool pod: started once, by the first scenario that
// needs it, and its namespace deleted at Stop.
type mockPool struct {
	mu  sync.Mutex
	ns  string
	pod *corev1.Pod
	// err is why the pod did not start, kept so that each later scenario
	// fails at once with it instead of waiting again.
	err error
}

// pool returns the run's ready pool pod, starting it first if no scenario
// has. Its wait is bounded by ServeTimeout.
func (c *Cluster) pool(ctx context.Context) (*corev1.Pod, error) {
	p := &c.mocks
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pod != nil || p.err != nil {
		return p.pod, p.err
	}
	pod, err := c.startPool(ctx)
	if err != nil && ctx.Err() == nil {
		p.err = err
	}
	p.pod = pod
	return pod, err
}

func (c *Cluster) startPool(ctx context.Context) (*corev1.Pod, error) {
	p := &c.mocks
	if p.ns == "" {
		labels := map[string]string{"gwdiag.dev/role": "mock-backends"}
		for k, v := range managedBy {
			labels[k] = v
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gwdiag-mocks-", Labels: labels}}
		if err := c.client.Create(ctx, ns); err != nil {
			return nil, fmt.Errorf("create the mock backends' namespace: %w", err)
		}
		p.ns = ns.Name
		if err := waitServiceAccount(ctx, c.client, p.ns, time.Duration(c.opts.ConditionTimeout)); err != nil {
			return nil, err
		}
		if err := c.client.Create(ctx, poolPod(p.ns, c.opts.MockImage, c.mockPull())); err != nil {
			return nil, fmt.Errorf("create the mock backends' pod %s/%s: %w", p.ns, poolPodName, err)
		}
	}
	return waitPod(ctx, time.Now().Add(time.Duration(c.opts.ServeTimeout)), fmt.Sprintf("mock backends' pod %s/%s", p.ns, poolPodName),
		time.Duration(c.opts.ServeTimeout), nil, func(ctx context.Context) (*corev1.Pod, string, error) {
			pod := &corev1.Pod{}
			if err := c.client.Get(ctx, client.ObjectKey{Namespace: p.ns, Name: poolPodName}, pod); err != nil {
				return nil, "", err
			}
			if kubepods.Ready(pod) && pod.Status.PodIP != "" {
				return pod, "", nil
			}
			return nil, kubepods.Describe(pod), nil
		})
}

// stopPool deletes the pool's namespace.
func (c *Cluster) stopPool() error {
	p := &c.mocks
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ns == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.ns}}
	if err := c.client.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the mock backends' namespace %s: %w", p.ns, err)
	}
	p.ns, p.pod, p.err = "", nil, nil
	return nil
}

// poolPod serves the run's mock backends (mock.Command with --pool-addr).
func poolPod(ns, image string, pull corev1.PullPolicy) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: poolPodName, Namespace: ns, Labels: map[string]string{"gwdiag.dev/role": "mock-backends"}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			// The mocks hold no state worth a graceful stop, and as PID 1
			// they may not take SIGTERM at all: the namespace goes at once.
			TerminationGracePeriodSeconds: ptr.To(int64(1)),
			// A restarted pool has lost its servers: the scenarios that
			// used them fail, and say so, rather than a run that hangs.
			RestartPolicy: corev1.RestartPolicyAlways,
			Containers: []corev1.Container{{
				Name:            "mocks",
				Image:           image,
				ImagePullPolicy: pull,
				Args:            []string{"--pool-addr", fmt.Sprintf(":%d", poolPort)},
				Ports:           []corev1.ContainerPort{{Name: "pool", ContainerPort: poolPort, Protocol: corev1.ProtocolTCP}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(poolPort)}},
					PeriodSeconds: 1, FailureThreshold: 3,
				},
			}},
		},
	}
}

// mockBackends asks the pool for a server per backend of the scenario,
// through a forward to the pool's control API that lives as long as the
// scenario, and returns the endpoint of each backend: the pool pod's
// address and the server's port (unreachablePort for an unreachable one).
func (d *clusterDeployment) mockBackends(ctx context.Context, backends []targets.Backend) (map[string]netip.AddrPort, error) {
	pod, err := d.c.pool(ctx)
	if err != nil {
		return nil, err
	}
	ip, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil {
		return nil, fmt.Errorf("mock backends' pod %s/%s: address %q: %w", pod.Namespace, pod.Name, pod.Status.PodIP, err)
	}
	d.poolPod = pod.Namespace + "/" + pod.Name
	if d.pool, err = d.forward(ctx, pod, poolPort); err != nil {
		return nil, fmt.Errorf("forward to the mock backends' pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	eps := map[string]netip.AddrPort{}
	d.controls = map[string]string{}
	for _, b := range backends {
		if b.Kind == targets.BackendUnreachable {
			eps[b.Name] = netip.AddrPortFrom(ip, unreachablePort)
			continue
		}
		port, err := mock.PoolAdd(ctx, d.pool, string(b.Kind))
		if err != nil {
			return nil, fmt.Errorf("backend %q: the mock backends' pod %s/%s: %w", b.Name, pod.Namespace, pod.Name, err)
		}
		d.poolPorts = append(d.poolPorts, port)
		eps[b.Name] = netip.AddrPortFrom(ip, uint16(port))
		d.controls[b.Name] = mock.PoolControl(d.pool, port)
	}
	return eps, nil
}

// releaseMocks closes the scenario's servers in the pool, dropping their
// connections (held streams included).
func (d *clusterDeployment) releaseMocks(ctx context.Context) error {
	if len(d.poolPorts) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var errs []error
	for _, port := range d.poolPorts {
		if err := mock.PoolRemove(ctx, d.pool, port); err != nil {
			errs = append(errs, fmt.Errorf("cluster target: close mock server %d in the pool: %w", port, err))
		}
	}
	d.poolPorts = nil
	return errors.Join(errs...)
}

// endpointSlice leads the selector-less Service of a backend to its
// endpoint, ready (the server listens before the slice exists).
func endpointSlice(ns, service string, ep netip.AddrPort) *discoveryv1.EndpointSlice {
	family := discoveryv1.AddressTypeIPv4
	if ep.Addr().Is6() && !ep.Addr().Is4In6() {
		family = discoveryv1.AddressTypeIPv6
	}
	return &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: discoveryv1.SchemeGroupVersion.String(), Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: service, Namespace: ns, Labels: map[string]string{
			discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: endpointSliceManager}},
		AddressType: family,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{ep.Addr().Unmap().String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(ep.Port())), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
}
