package cluster

import (
	"fmt"
	"slices"
	"time"

	"github.com/gwdiag/gwdiag/steps/targets"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// clusterGatewayName is the one Gateway of a scenario ("the Gateway").
const clusterGatewayName = "gwdiag"

// clusterBackendPort is the Service port of every mock backend. Without a
// data plane nothing listens behind it (no pods run), the controller only
// checks the Service exists; with one, it leads to the backend's port in
// the scenario's mock pod (mockPlan).
const clusterBackendPort = 8000

// clusterListenerPort is the port of the first listener; the next ones
// take the following ports.
const clusterListenerPort = 8080

// clusterManifests turns a scenario's setup into the Gateway API objects
// and policies that express it, in creation order: the Gateway, the
// backend Services, the HTTPRoutes, then the policies (a controller that
// reads its dependencies when it first reconciles then writes the settled
// status at once).
//
// With a data plane (plan not nil) each Service selects the scenario's mock
// pod, on the backend's port there.
func clusterManifests(setup targets.Setup, ns, class string, policy schema.GroupVersionKind, plan *mockPlan) ([]client.Object, error) {
	gw := &gwv1.Gateway{
		TypeMeta:   metav1.TypeMeta{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway"},
		ObjectMeta: metav1.ObjectMeta{Name: clusterGatewayName, Namespace: ns},
		Spec:       gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(class)},
	}
	for i, l := range setup.Listeners {
		gw.Spec.Listeners = append(gw.Spec.Listeners, gwv1.Listener{
			Name: gwv1.SectionName(l.Name), Port: gwv1.PortNumber(clusterListenerPort + i), Protocol: gwv1.HTTPProtocolType})
	}
	objs := []client.Object{gw}
	for _, b := range setup.Backends {
		svc := &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: ns, Labels: map[string]string{"gwdiag.dev/backend-kind": string(b.Kind)}},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: clusterBackendPort}}},
		}
		if plan != nil {
			port, ok := plan.ports[b.Name]
			if !ok {
				return nil, fmt.Errorf("backend %q has no port in the mock pod", b.Name)
			}
			svc.Spec.Selector = mockSelector
			svc.Spec.Ports[0].TargetPort = intstr.FromInt32(int32(port))
			svc.Spec.Ports[0].Protocol = corev1.ProtocolTCP
		}
		objs = append(objs, svc)
	}
	var policies []client.Object
	for _, l := range setup.Listeners {
		for _, r := range l.Routes {
			match := gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To(r.PathPrefix)}}
			if r.Method != "" {
				match.Method = ptr.To(gwv1.HTTPMethod(r.Method))
			}
			if h := r.Header; h != nil {
				match.Headers = []gwv1.HTTPHeaderMatch{{Name: gwv1.HTTPHeaderName(h.Name), Value: h.Value}}
			}
			objs = append(objs, &gwv1.HTTPRoute{
				TypeMeta:   metav1.TypeMeta{APIVersion: gwv1.GroupVersion.String(), Kind: "HTTPRoute"},
				ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: ns},
				Spec: gwv1.HTTPRouteSpec{
					CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{
						Name: clusterGatewayName, SectionName: ptr.To(gwv1.SectionName(l.Name))}}},
					Rules: []gwv1.HTTPRouteRule{{
						Matches: []gwv1.HTTPRouteMatch{match},
						BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
							Name: gwv1.ObjectName(r.Backend), Port: ptr.To(gwv1.PortNumber(clusterBackendPort))}}}},
					}},
				},
			})
			if len(r.Limits) > 0 {
				// The policy of a route is named after the route (targets.ConditionReader).
				p, err := policyObject(policy, ns, targets.Policy{Name: r.Name, TargetKind: "HTTPRoute", TargetName: r.Name, Limits: r.Limits})
				if err != nil {
					return nil, err
				}
				policies = append(policies, p)
			}
		}
	}
	for _, sp := range setup.Policies {
		p, err := policyObject(policy, ns, sp)
		if err != nil {
			return nil, err
		}
		policies = append(policies, p)
	}
	return append(objs, policies...), nil
}

// policyObject is the policy resource of spec part 2.3, of whatever kind
// the implementation names it (GatewayPolicy, AgentgatewayPolicy, ...).
func policyObject(gvk schema.GroupVersionKind, ns string, p targets.Policy) (*unstructured.Unstructured, error) {
	var local []any
	for i, l := range p.Limits {
		unit, ok := map[time.Duration]string{time.Second: "Seconds", time.Minute: "Minutes", time.Hour: "Hours"}[l.Unit]
		if !ok {
			return nil, fmt.Errorf("policy %s: limit %d: unit %s is not a second, minute or hour", p.Name, i, l.Unit)
		}
		if l.Shadow {
			return nil, fmt.Errorf("policy %s: limit %d: the policy resource has no shadow mode", p.Name, i)
		}
		e := map[string]any{string(l.Kind): int64(l.Amount), "unit": unit}
		if l.Burst > 0 {
			e["burst"] = int64(l.Burst)
		}
		if k := l.KeyExpr(); k != "" {
			// spec.traffic.rateLimit.local[].key: the controller gives it
			// to the proxy as the standalone config's key.
			e["key"] = k
		}
		local = append(local, e)
	}
	ref := map[string]any{"group": gwv1.GroupName, "kind": p.TargetKind, "name": p.TargetName}
	if p.TargetKind == "Gateway" {
		// A gateway limit names the listener; the scenario has one Gateway.
		ref["name"], ref["sectionName"] = clusterGatewayName, p.TargetName
	}
	spec := map[string]any{"targetRefs": []any{ref}}
	if len(local) > 0 {
		spec["traffic"] = map[string]any{"rateLimit": map[string]any{"local": local}}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetName(p.Name)
	u.SetNamespace(ns)
	return u, nil
}

// The scenario's mock pod: every backend of the scenario in one pod, one
// port each (as the container target runs them), which costs one pod
// start per scenario however many backends it has.
const (
	mockPodName = "gwdiag-mocks"
	// firstMockPort is the first backend's port in the mock pod; the next
	// ones take the following ports.
	firstMockPort = 8000
	// unreachablePort is a port of the mock pod where nothing listens: the
	// proxy's connection is refused, a transport error, and the endpoint is
	// a real ready pod address, so the controller and the proxy treat it
	// like any other (no name to resolve; the local node has no DNS).
	unreachablePort = 9
)

// mockSelector selects the mock pod of a scenario's namespace.
var mockSelector = map[string]string{"gwdiag.dev/role": "mock-backends"}

// mockPlan is where each backend of a scenario is served in the mock pod.
type mockPlan struct {
	// ports is each backend's port in the pod (unreachablePort for an
	// unreachable one).
	ports map[string]int
	// args are the mock command's flags (mock.Command).
	args []string
	// probe is a port that serves, for the readiness probe.
	probe int
}

// planMocks assigns the backends their ports in the mock pod.
func planMocks(backends []targets.Backend) (*mockPlan, error) {
	p := &mockPlan{ports: map[string]int{}}
	var echo, llm []string
	for i, b := range backends {
		port := firstMockPort + i
		switch b.Kind {
		case targets.BackendEcho:
			echo = append(echo, "--echo-addr", fmt.Sprintf(":%d", port))
		case targets.BackendLLM:
			llm = append(llm, "--llm-addr", fmt.Sprintf(":%d", port))
		case targets.BackendUnreachable:
			p.ports[b.Name] = unreachablePort
			continue
		default:
			return nil, fmt.Errorf("backend %q: unknown kind %q", b.Name, b.Kind)
		}
		p.ports[b.Name] = port
		if p.probe == 0 {
			p.probe = port
		}
	}
	if p.probe == 0 {
		// Only unreachable backends: the pod still serves one echo, so it
		// gets ready and its address is an endpoint nothing answers on 9.
		echo, p.probe = []string{"--echo-addr", fmt.Sprintf(":%d", firstMockPort)}, firstMockPort
	}
	// An empty flag disables a kind the scenario does not use (its default
	// would listen on loopback for nothing).
	if len(echo) == 0 {
		echo = []string{"--echo-addr", ""}
	}
	if len(llm) == 0 {
		llm = []string{"--llm-addr", ""}
	}
	p.args = append(echo, llm...)
	return p, nil
}

// mockPod runs the scenario's mock backends.
func mockPod(ns, image string, pull corev1.PullPolicy, plan *mockPlan) *corev1.Pod {
	var ports []corev1.ContainerPort
	for _, port := range plan.ports {
		if port != unreachablePort && !slices.ContainsFunc(ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == int32(port) }) {
			ports = append(ports, corev1.ContainerPort{ContainerPort: int32(port), Protocol: corev1.ProtocolTCP})
		}
	}
	slices.SortFunc(ports, func(a, b corev1.ContainerPort) int { return int(a.ContainerPort - b.ContainerPort) })
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: mockPodName, Namespace: ns, Labels: mockSelector},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			// The mocks hold no state worth a graceful stop, and as PID 1
			// they may not take SIGTERM at all: the namespace goes at once.
			TerminationGracePeriodSeconds: ptr.To(int64(1)),
			RestartPolicy:                 corev1.RestartPolicyAlways,
			Containers: []corev1.Container{{
				Name:            "mocks",
				Image:           image,
				ImagePullPolicy: pull,
				Args:            plan.args,
				Ports:           ports,
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(plan.probe))}},
					PeriodSeconds: 1, FailureThreshold: 3,
				},
			}},
		},
	}
}
