package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/api/v1alpha1"
	"github.com/gwdiag/gwdiag/clusters/controller"
	"github.com/gwdiag/gwdiag/clusters/kube/kubetest"
)

// awaitTimeout bounds each wait for the controller; it reconciles in
// milliseconds, the margin is for a loaded machine.
const awaitTimeout = 20 * time.Second

type fixture struct {
	t  *testing.T
	c  client.Client
	ns string
}

func (f *fixture) create(objs ...client.Object) {
	f.t.Helper()
	for _, o := range objs {
		if o.GetNamespace() == "" && !isClusterScoped(o) {
			o.SetNamespace(f.ns)
		}
		if err := f.c.Create(context.Background(), o); err != nil {
			f.t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

func isClusterScoped(o client.Object) bool {
	switch o.(type) {
	case *gwv1.GatewayClass, *corev1.Namespace:
		return true
	}
	return false
}

// want is an expected condition; an empty Reason or Message is not checked.
type want struct{ typ, status, reason, message string }

// await polls obj until conditions(obj) holds every wanted condition at
// the object's current generation, and fails with what it saw last.
func (f *fixture) await(obj client.Object, conditions func() []metav1.Condition, wants ...want) {
	f.t.Helper()
	var last []metav1.Condition
	var lastErr error
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, awaitTimeout, true, func(ctx context.Context) (bool, error) {
		if lastErr = f.c.Get(ctx, client.ObjectKeyFromObject(obj), obj); lastErr != nil {
			return false, nil
		}
		last = conditions()
		for _, w := range wants {
			c := meta.FindStatusCondition(last, w.typ)
			if c == nil || c.ObservedGeneration != obj.GetGeneration() || string(c.Status) != w.status ||
				w.reason != "" && c.Reason != w.reason || w.message != "" && c.Message != w.message {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		f.t.Fatalf("%T %s: conditions within %s: got %s (get error %v), want %+v", obj, obj.GetName(), awaitTimeout, show(last), lastErr, wants)
	}
}

// awaitListener polls gw until its listener has want attached routes and
// the wanted conditions.
func (f *fixture) awaitListener(gw *gwv1.Gateway, listener string, attached int32, wants ...want) {
	f.t.Helper()
	var ls *gwv1.ListenerStatus
	f.await(gw, func() []metav1.Condition {
		ls = nil
		for i := range gw.Status.Listeners {
			if string(gw.Status.Listeners[i].Name) == listener {
				ls = &gw.Status.Listeners[i]
			}
		}
		if ls == nil || ls.AttachedRoutes != attached {
			return nil // not there yet: await keeps polling
		}
		return ls.Conditions
	}, wants...)
}

func show(conds []metav1.Condition) string {
	var b strings.Builder
	for _, c := range conds {
		fmt.Fprintf(&b, "[%s=%s %s %q gen %d] ", c.Type, c.Status, c.Reason, c.Message, c.ObservedGeneration)
	}
	return b.String()
}

func gatewayConds(gw *gwv1.Gateway) func() []metav1.Condition {
	return func() []metav1.Condition { return gw.Status.Conditions }
}

// routeConds are the conditions of the route's first parent written by
// the reference controller.
func routeConds(r *gwv1.HTTPRoute) func() []metav1.Condition {
	return func() []metav1.Condition {
		for _, p := range r.Status.Parents {
			if p.ControllerName == controller.ControllerName {
				return p.Conditions
			}
		}
		return nil
	}
}

// policyConds are the conditions of the policy's first ancestor.
func policyConds(p *v1alpha1.GatewayPolicy) func() []metav1.Condition {
	return func() []metav1.Condition {
		if len(p.Status.Ancestors) == 0 {
			return nil
		}
		return p.Status.Ancestors[0].Conditions
	}
}

func gateway(name, class string, from gwv1.FromNamespaces) *gwv1.Gateway {
	return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: gwv1.GatewaySpec{
		GatewayClassName: gwv1.ObjectName(class),
		Listeners: []gwv1.Listener{{Name: "http", Port: 8080, Protocol: gwv1.HTTPProtocolType,
			AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(from)}}}},
	}}
}

func route(name, gwNamespace, gw, backend string) *gwv1.HTTPRoute {
	r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: gwv1.ObjectName(gw)}}},
		Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
			BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(backend), Port: ptr.To[gwv1.PortNumber](8000)}}}}}},
	}}
	if gwNamespace != "" {
		r.Spec.ParentRefs[0].Namespace = ptr.To(gwv1.Namespace(gwNamespace))
	}
	return r
}

func service(name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Name: "http", Port: 8000}}}}
}

func policy(name, kind string, targets ...string) *v1alpha1.GatewayPolicy {
	p := &v1alpha1.GatewayPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.GatewayPolicySpec{
		Traffic: &v1alpha1.Traffic{RateLimit: &v1alpha1.RateLimit{Local: []v1alpha1.LocalRateLimit{
			{Requests: ptr.To[int64](3), Burst: ptr.To[int64](3), Unit: v1alpha1.UnitSeconds}}}}}}
	for _, t := range targets {
		p.Spec.TargetRefs = append(p.Spec.TargetRefs, v1alpha1.PolicyTargetReference{Group: gwv1.GroupName, Kind: gwv1.Kind(kind), Name: gwv1.ObjectName(t)})
	}
	return p
}

var (
	accepted   = want{"Accepted", "True", "Accepted", ""}
	programmed = want{"Programmed", "True", "Programmed", ""}
	resolved   = want{"ResolvedRefs", "True", "ResolvedRefs", ""}
	valid      = want{"Accepted", "True", "Valid", "Policy accepted"}
	attached   = want{"Attached", "True", "Attached", "Attached to all targets"}
)

// runController starts a local API server and the controller with o on
// it, both stopped when the test ends, and returns a client.
func runController(t *testing.T, o controller.Options) client.Client {
	t.Helper()
	l := kubetest.Start(t)
	c, err := controller.NewClient(l.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stop, err := controller.Run(ctx, l.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return c
}

// TestReferenceController runs the controller against a real
// kube-apiserver; each case works in its own namespace.
func TestReferenceController(t *testing.T) {
	c := runController(t, controller.Options{})
	ctx := context.Background()

	class := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "gwdiag"}, Spec: gwv1.GatewayClassSpec{ControllerName: controller.ControllerName}}
	other := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: gwv1.GatewayClassSpec{ControllerName: "example.com/other"}}
	(&fixture{t: t, c: c}).create(class, other)

	n := 0
	newFixture := func(t *testing.T) *fixture {
		n++
		f := &fixture{t: t, c: c, ns: fmt.Sprintf("case-%d", n)}
		f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}})
		return f
	}

	t.Run("GatewayClass accepted", func(t *testing.T) {
		f := &fixture{t: t, c: c}
		f.await(class, func() []metav1.Condition { return class.Status.Conditions }, want{"Accepted", "True", "Accepted", ""})
	})

	t.Run("healthy gateway, route and policy", func(t *testing.T) {
		f := newFixture(t)
		gw, r, p := gateway("gw", "gwdiag", gwv1.NamespacesFromSame), route("httpbin", "", "gw", "httpbin"), policy("httpbin", "HTTPRoute", "httpbin")
		f.create(gw, service("httpbin"), r, p)
		f.await(gw, gatewayConds(gw), accepted, programmed)
		f.await(r, routeConds(r), accepted, resolved)
		f.await(p, policyConds(p), valid, attached)
		f.awaitListener(gw, "http", 1, want{"Accepted", "True", "Accepted", ""}, want{"Programmed", "True", "Programmed", ""},
			want{"ResolvedRefs", "True", "ResolvedRefs", ""}, want{"Conflicted", "False", "NoConflicts", ""})
		if got := gw.Status.Listeners[0].SupportedKinds; len(got) != 1 || got[0].Kind != "HTTPRoute" {
			t.Errorf("listener supportedKinds: got %+v, want [HTTPRoute]", got)
		}
		if got := p.Status.Ancestors[0]; got.AncestorRef.Name != "gw" || *got.AncestorRef.Kind != "Gateway" || got.ControllerName != controller.ControllerName {
			t.Errorf("policy ancestor: got %+v, want Gateway gw by %s", got, controller.ControllerName)
		}
	})

	t.Run("policy on a Gateway", func(t *testing.T) {
		f := newFixture(t)
		gw, p := gateway("gw", "gwdiag", gwv1.NamespacesFromSame), policy("gw-wide", "Gateway", "gw")
		f.create(gw, p)
		f.await(p, policyConds(p), valid, attached)
	})

	t.Run("policy on a missing Gateway", func(t *testing.T) {
		f := newFixture(t)
		p := policy("gw-wide", "Gateway", "nope")
		f.create(p)
		f.await(p, policyConds(p), valid, want{"Attached", "False", "Pending", "Policy is not attached: Gateway " + f.ns + "/nope not found"})
	})

	t.Run("missing backend resolves when the Service appears", func(t *testing.T) {
		f := newFixture(t)
		gw, r := gateway("gw", "gwdiag", gwv1.NamespacesFromSame), route("r", "", "gw", "later")
		f.create(gw, r)
		f.await(r, routeConds(r), accepted, want{"ResolvedRefs", "False", "BackendNotFound", "Service " + f.ns + "/later not found"})
		f.create(service("later"))
		f.await(r, routeConds(r), accepted, resolved)
	})

	t.Run("policy on a missing route is pending", func(t *testing.T) {
		f := newFixture(t)
		p := policy("orphan", "HTTPRoute", "missing")
		f.create(gateway("gw", "gwdiag", gwv1.NamespacesFromSame), p)
		f.await(p, policyConds(p), valid,
			want{"Attached", "False", "Pending", "Policy is not attached: HTTPRoute " + f.ns + "/missing is not attached to any Gateway"})
		if got := p.Status.Ancestors[0].AncestorRef; *got.Kind != "HTTPRoute" || got.Name != "missing" {
			t.Errorf("ancestorRef of an unattached target: got %+v, want the HTTPRoute itself", got)
		}
		// The route appears and attaches: the policy follows.
		f.create(service("b"), route("missing", "", "gw", "b"))
		f.await(p, policyConds(p), valid, attached)
	})

	t.Run("route not allowed by the listener, and the policy on it", func(t *testing.T) {
		gwf, f := newFixture(t), newFixture(t)
		gw := gateway("gw", "gwdiag", gwv1.NamespacesFromSame)
		gwf.create(gw)
		r, p := route("r", gwf.ns, "gw", "b"), policy("p", "HTTPRoute", "r")
		f.create(service("b"), r, p)
		f.await(r, routeConds(r), want{"Accepted", "False", "NotAllowedByListeners", ""}, resolved)
		gwf.awaitListener(gw, "http", 0, want{"Accepted", "True", "Accepted", ""})
		f.await(p, policyConds(p), valid, want{"Attached", "False", "Pending", "Policy is not attached: HTTPRoute " + f.ns + "/r is not attached to any Gateway"})
	})

	t.Run("invalid policy", func(t *testing.T) {
		f := newFixture(t)
		p := policy("mixed", "HTTPRoute", "r")
		p.Spec.TargetRefs = append(p.Spec.TargetRefs, v1alpha1.PolicyTargetReference{Group: gwv1.GroupName, Kind: "Gateway", Name: "gw"})
		f.create(gateway("gw", "gwdiag", gwv1.NamespacesFromSame), service("b"), route("r", "", "gw", "b"), p)
		f.await(p, policyConds(p),
			want{"Accepted", "False", "Invalid", "spec.targetRefs[1].kind: all targets of a policy must be of one kind, got Gateway after HTTPRoute"},
			want{"Attached", "False", "Pending", "Policy is not attached due to invalid status"})
		// Fixing the spec makes it valid and attached at the new generation.
		p.Spec.TargetRefs = p.Spec.TargetRefs[:1]
		if err := c.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		f.await(p, policyConds(p), valid, attached)
	})

	t.Run("listener with an unsupported protocol", func(t *testing.T) {
		f := newFixture(t)
		gw := gateway("gw", "gwdiag", gwv1.NamespacesFromSame)
		gw.Spec.Listeners = append(gw.Spec.Listeners, gwv1.Listener{Name: "tcp", Port: 9000, Protocol: gwv1.TCPProtocolType})
		f.create(gw)
		f.await(gw, gatewayConds(gw), want{"Accepted", "True", "ListenersNotValid", "listener tcp: protocol TCP is not supported (HTTP, HTTPS)"}, programmed)
		f.awaitListener(gw, "tcp", 0, want{"Accepted", "False", "UnsupportedProtocol", ""}, want{"Programmed", "False", "Invalid", ""})
		f.awaitListener(gw, "http", 0, want{"Accepted", "True", "Accepted", ""})
	})

	t.Run("another controller's Gateway gets no status from us", func(t *testing.T) {
		f := newFixture(t)
		theirs, ours := gateway("theirs", "other", gwv1.NamespacesFromSame), gateway("ours", "gwdiag", gwv1.NamespacesFromSame)
		f.create(theirs, ours)
		// Ours is reconciled after theirs was created; by then theirs would
		// have been too, had it been ours.
		f.await(ours, gatewayConds(ours), accepted)
		if err := c.Get(ctx, client.ObjectKeyFromObject(theirs), theirs); err != nil {
			t.Fatal(err)
		}
		for _, cond := range theirs.Status.Conditions {
			if cond.ObservedGeneration != 0 {
				t.Errorf("Gateway of class other: got condition %+v written, want only the CRD's defaults", cond)
			}
		}
	})
}
