package clusterstatus

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestRouteName(t *testing.T) {
	for key, want := range map[string][2]string{
		"httpbin/httpbin.00.http":          {"httpbin", "httpbin"},
		"httpbin/httpbin-timeout.0.0.http": {"httpbin", "httpbin-timeout"},
		"ns/my.dotted.route.10.http":       {"ns", "my.dotted.route"},
	} {
		ns, name, ok := routeName(key)
		if !ok || ns != want[0] || name != want[1] {
			t.Errorf("RouteName(%q) = %q, %q, %v; want %q, %q", key, ns, name, ok, want[0], want[1])
		}
	}
	if _, _, ok := routeName("default/default/bind/3000/listener0/default/httpbin"); ok {
		t.Errorf("a standalone key read as a cluster route")
	}
}

// TestCite: the conditions the controller writes (docs/clusters.md) as the
// API server returns them, cited for the outcome they explain. The local
// node test (cli/e2e testNodeExplain) takes them from the real controller.
func TestCite(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := gwv1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	cond := func(typ, status, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason, Message: msg}
	}
	parent := gwv1.ParentReference{Name: "gw"}
	route := func(name, prefix string, conds ...metav1.Condition) *gwv1.HTTPRoute {
		return &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{parent}},
				Rules: []gwv1.HTTPRouteRule{{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To(prefix)}}}}}},
			Status: gwv1.HTTPRouteStatus{RouteStatus: gwv1.RouteStatus{Parents: []gwv1.RouteParentStatus{{ParentRef: parent, ControllerName: "c", Conditions: conds}}}}}
	}
	web := route("web", "/web", cond("Accepted", "True", "Accepted", "Route accepted"),
		cond("ResolvedRefs", "False", "BackendNotFound", "Service ns/missing not found"))
	blocked := route("blocked", "/blocked", cond("Accepted", "False", "NotAllowedByListeners", "no listener of Gateway ns/gw allows an HTTPRoute from namespace ns"),
		cond("ResolvedRefs", "True", "ResolvedRefs", "All references resolved"))
	other := route("other", "/other", cond("Accepted", "False", "NoMatchingParent", "x"))
	policy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gwdiag.dev/v1alpha1", "kind": "GatewayPolicy",
		"metadata": map[string]any{"namespace": "ns", "name": "limit-missing"},
		"spec":     map[string]any{"targetRefs": []any{map[string]any{"group": gwv1.GroupName, "kind": "HTTPRoute", "name": "missing"}}},
		"status": map[string]any{"ancestors": []any{map[string]any{"conditions": []any{
			map[string]any{"type": "Accepted", "status": "True", "reason": "Valid", "message": "Policy accepted"},
			map[string]any{"type": "Attached", "status": "False", "reason": "Pending", "message": "Policy is not attached: HTTPRoute ns/missing is not attached to any Gateway"},
		}}}},
	}}
	onWeb := policy.DeepCopy()
	onWeb.SetName("limit-web")
	_ = unstructured.SetNestedSlice(onWeb.Object, []any{map[string]any{"group": gwv1.GroupName, "kind": "HTTPRoute", "name": "web"}}, "spec", "targetRefs")
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(web, blocked, other, policy, onWeb).Build()
	ctx := context.Background()

	got, err := Cite(ctx, cl, "ns", "gw", Request{Route: "ns/web.00.http", Status: 503, Method: "GET", Path: "/web/a", Host: "x"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"HTTPRoute ns/web ResolvedRefs=False (BackendNotFound: Service ns/missing not found)",
		"GatewayPolicy ns/limit-web Attached=False (Pending: Policy is not attached: HTTPRoute ns/missing is not attached to any Gateway)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("matched route:\ngot  %q\nwant %q", got, want)
	}

	got, err = Cite(ctx, cl, "ns", "gw", Request{NoRoute: true, Status: 404, Method: "GET", Path: "/blocked/x", Host: "x"})
	if err != nil {
		t.Fatal(err)
	}
	want = []string{
		"HTTPRoute ns/blocked would match Accepted=False (NotAllowedByListeners: no listener of Gateway ns/gw allows an HTTPRoute from namespace ns)",
		"GatewayPolicy ns/limit-missing Attached=False (Pending: Policy is not attached: HTTPRoute ns/missing is not attached to any Gateway)",
		"GatewayPolicy ns/limit-web Attached=False (Pending: Policy is not attached: HTTPRoute ns/missing is not attached to any Gateway)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("no route:\ngot  %q\nwant %q", got, want)
	}

	if got, _ := Cite(ctx, cl, "ns", "gw", Request{Route: "ns/gone.00.http"}); !slices.Contains(got,
		"HTTPRoute ns/gone is not in the cluster (the proxy serves an older configuration)") {
		t.Errorf("a route the proxy has and the cluster not: %q", got)
	}
}
