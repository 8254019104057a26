package cluster

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/gwdiag/gwdiag/steps/targets"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// clusterGatewayName is the one Gateway of a scenario ("the Gateway").
const clusterGatewayName = "gwdiag"

// clusterBackendPort is the Service port of every mock backend. Without a
// data plane nothing listens behind it (no pods run), the controller only
// checks the Service exists; with one, the backend's EndpointSlice leads
// it to the backend's server in the run's mock pool (mocks.go).
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
// With a data plane (endpoints not nil) each Service has no selector, and
// an EndpointSlice per backend leads it to the backend's endpoint. The
// slices come last: the backends' endpoints appear only once every route
// and policy exists, so a proxy config that has the endpoints was made
// from the whole scenario (serve relies on it).
func clusterManifests(setup targets.Setup, ns, class string, policy schema.GroupVersionKind, endpoints map[string]netip.AddrPort) ([]client.Object, error) {
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
		objs = append(objs, svc)
	}
	var slices []client.Object
	if endpoints != nil {
		for _, b := range setup.Backends {
			ep, ok := endpoints[b.Name]
			if !ok {
				return nil, fmt.Errorf("backend %q has no endpoint in the mock pool", b.Name)
			}
			slices = append(slices, endpointSlice(ns, b.Name, ep))
		}
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
	return append(append(objs, policies...), slices...), nil
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
