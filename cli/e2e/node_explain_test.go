package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/api/v1alpha1"
)

// testNodeExplain: in cluster mode, `trace explain` and `config explain`
// cite what the API server says of the resources behind the outcome, on
// real pods: a Gateway of its own (so that a request can find no route),
// with an HTTPRoute whose backend Service is missing (ResolvedRefs=False,
// BackendNotFound: the proxy has the route, the request gets a 503), an
// HTTPRoute that would match but names a listener the Gateway does not
// have (Accepted=False, NoMatchingParent: the proxy does not have it, the
// request gets a 404), and a policy on a missing route (Attached=False,
// Pending).
func testNodeExplain(t *testing.T, ctx context.Context, f *nodeFixture) {
	ns := f.namespace(t, ctx, nil)
	f.gateway(t, ctx, ns, "explain", "gwdiag")
	f.waitProgrammedReason(t, ctx, ns, "explain", string(gwv1.GatewayReasonProgrammed))
	route := func(name string, section *gwv1.SectionName, prefix, service string) *gwv1.HTTPRoute {
		return &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: gwv1.HTTPRouteSpec{
				CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "explain", SectionName: section}}},
				Rules: []gwv1.HTTPRouteRule{{
					Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To(prefix)}}},
					BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
						Name: gwv1.ObjectName(service), Port: ptr.To(gwv1.PortNumber(80))}}}},
				}},
			}}
	}
	f.create(t, ctx, route("web", nil, "/web", "web-missing"))
	f.create(t, ctx, route("blocked", ptr.To(gwv1.SectionName("nope")), "/blocked", "web-missing"))
	f.create(t, ctx, &v1alpha1.GatewayPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "limit-missing"},
		Spec: v1alpha1.GatewayPolicySpec{
			TargetRefs: []v1alpha1.PolicyTargetReference{{Group: gwv1.GroupName, Kind: "HTTPRoute", Name: "missing"}},
			Traffic:    &v1alpha1.Traffic{RateLimit: &v1alpha1.RateLimit{Local: []v1alpha1.LocalRateLimit{{Requests: ptr.To(int64(1)), Unit: v1alpha1.UnitMinutes}}}},
		}})
	gw := []string{"gateway/explain", "-n", ns, "--port", "8080", "--"}

	// The proxy serves the route once the kubelet has refreshed its
	// ConfigMap; the conditions are written by then too.
	began := time.Now()
	var last result
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		last = gwdiag(t, f.env(), nil, append([]string{"config", "explain"}, append(gw, "http://explain.example/web/a")...)...)
		return last.code == 0 && strings.HasPrefix(last.stdout, "would take route "+ns+"/web.00.http") &&
			strings.Contains(last.stdout, "ResolvedRefs=False"), nil
	})
	if err != nil {
		t.Fatalf("the proxy never served route %s/web with its conditions written; last config explain: exit %d\n%s%s", ns, last.code, last.stdout, last.stderr)
	}
	t.Logf("route served and its conditions written %s after creation", time.Since(began).Round(100*time.Millisecond))
	resolved := "HTTPRoute " + ns + "/web ResolvedRefs=False (BackendNotFound: Service " + ns + "/web-missing not found)"
	blocked := "HTTPRoute " + ns + "/blocked would match Accepted=False (NoMatchingParent: Gateway " + ns + "/explain has no listener matching the parentRef)"
	pending := "GatewayPolicy " + ns + "/limit-missing Attached=False (Pending: Policy is not attached: HTTPRoute " + ns + "/missing is not attached to any Gateway)"
	first, _, _ := strings.Cut(last.stdout, "\n")
	if !strings.Contains(first, "; "+resolved) {
		t.Errorf("config explain (what-if on the live dump): the verdict does not cite %q:\n%s", resolved, last.stdout)
	}
	t.Logf("gwdiag config explain gateway/explain ... -- http://explain.example/web/a\n%s", last.stdout)

	for _, tt := range []struct {
		name, url string
		want      []string
	}{
		{"a route with a missing backend", "http://explain.example/web/a",
			[]string{"503 from route " + ns + "/web.00.http: backend web-missing." + ns + ".svc.cluster.local:80 could not be reached: ", "; " + resolved}},
		{"a route not Accepted, a policy not Attached", "http://explain.example/blocked/a",
			[]string{"404: no route matched: " + ns + "/web.00.http: path \"/blocked/a\" does not match prefix \"/web\"", "; " + blocked, "; " + pending}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := gwdiag(t, f.env(), nil, append([]string{"trace", "explain"}, append(gw, tt.url)...)...)
			t.Logf("gwdiag trace explain gateway/explain -n %s --port 8080 -- %s\n%s%s", ns, tt.url, r.stdout, r.stderr)
			if r.code != 0 || len(lines(r.stdout)) != 1 {
				t.Fatalf("exit %d, want 0 and one line:\n%s%s", r.code, r.stdout, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("verdict lacks %q", w)
				}
			}
		})
	}
	w := gwdiag(t, f.env(), nil, append([]string{"config", "explain"}, append(gw, "http://explain.example/blocked/a")...)...)
	if first, _, _ := strings.Cut(w.stdout, "\n"); !strings.HasPrefix(first, "404: ") || !strings.Contains(first, blocked) || !strings.Contains(first, pending) {
		t.Errorf("config explain of a request no route takes: exit %d, want the 404 citing the route and the policy:\n%s%s", w.code, w.stdout, w.stderr)
	}
}
