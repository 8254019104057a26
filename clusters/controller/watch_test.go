package controller

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/api/v1alpha1"
)

// TestGatewaysAChangeConcerns: a policy or an EndpointSlice brings in the
// Gateways whose data plane it changes, and no other (the scenarios of a
// run share the controller: each change used to re-translate them all).
func TestGatewaysAChangeConcerns(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	route := func(ns, name string, parents []gwv1.ParentReference, backends ...gwv1.BackendObjectReference) *gwv1.HTTPRoute {
		r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		r.Spec.ParentRefs = parents
		for _, b := range backends {
			r.Spec.Rules = append(r.Spec.Rules, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: b}}}})
		}
		return r
	}
	parent := func(name string, ns ...string) gwv1.ParentReference {
		p := gwv1.ParentReference{Name: gwv1.ObjectName(name)}
		if len(ns) > 0 {
			p.Namespace = ptr.To(gwv1.Namespace(ns[0]))
		}
		return p
	}
	svc := func(name string, ns ...string) gwv1.BackendObjectReference {
		b := gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: ptr.To[gwv1.PortNumber](80)}
		if len(ns) > 0 {
			b.Namespace = ptr.To(gwv1.Namespace(ns[0]))
		}
		return b
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		route("a", "r1", []gwv1.ParentReference{parent("gw"), parent("shared", "infra")}, svc("echo")),
		route("a", "r2", []gwv1.ParentReference{parent("gw2")}, svc("llm", "backends")),
		route("b", "r1", []gwv1.ParentReference{parent("gw")}, svc("echo")),
	).Build()
	r := &gatewayReconciler{base{client: c}}
	req := func(ns, name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
	}
	policy := func(ns string, targets ...v1alpha1.PolicyTargetReference) *v1alpha1.GatewayPolicy {
		return &v1alpha1.GatewayPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}, Spec: v1alpha1.GatewayPolicySpec{TargetRefs: targets}}
	}
	target := func(kind, name string) v1alpha1.PolicyTargetReference {
		return v1alpha1.PolicyTargetReference{Group: gwv1.GroupName, Kind: gwv1.Kind(kind), Name: gwv1.ObjectName(name)}
	}
	slice := func(ns, service string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: service + "-x", Labels: map[string]string{discoveryv1.LabelServiceName: service}}}
	}
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		got  []reconcile.Request
		want []reconcile.Request
	}{
		{"policy on a Gateway", r.gatewaysOfPolicy(ctx, policy("a", target("Gateway", "gw"))), []reconcile.Request{req("a", "gw")}},
		{"policy on a route: its parents", r.gatewaysOfPolicy(ctx, policy("a", target("HTTPRoute", "r1"))), []reconcile.Request{req("a", "gw"), req("infra", "shared")}},
		{"policy on two targets", r.gatewaysOfPolicy(ctx, policy("a", target("HTTPRoute", "r2"), target("Gateway", "gw3"))), []reconcile.Request{req("a", "gw2"), req("a", "gw3")}},
		{"policy on a missing route", r.gatewaysOfPolicy(ctx, policy("a", target("HTTPRoute", "none"))), nil},
		{"endpoints of a Service two routes name", r.gatewaysOfEndpoints(ctx, slice("a", "echo")), []reconcile.Request{req("a", "gw"), req("infra", "shared")}},
		{"endpoints in another namespace", r.gatewaysOfEndpoints(ctx, slice("b", "echo")), []reconcile.Request{req("b", "gw")}},
		{"endpoints a route names across namespaces", r.gatewaysOfEndpoints(ctx, slice("backends", "llm")), []reconcile.Request{req("a", "gw2")}},
		{"endpoints no route names", r.gatewaysOfEndpoints(ctx, slice("a", "llm")), nil},
		{"a slice without a Service", r.gatewaysOfEndpoints(ctx, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "x"}}), nil},
	} {
		if diff := cmp.Diff(tt.want, tt.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}
