package controller_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/api/v1alpha1"
	"github.com/gwdiag/gwdiag/clusters/controller"
	"github.com/gwdiag/gwdiag/refproxy/config"
)

// TestTranslate: two listeners on two ports, a route with two rules (the
// second with two matches), weighted backends over their endpoints, a
// listener policy and a route policy; refproxy must accept the result.
func TestTranslate(t *testing.T) {
	gw := gateway("gw", "gwdiag", gwv1.NamespacesFromSame)
	gw.Namespace = "team"
	gw.Spec.Listeners = append(gw.Spec.Listeners, gwv1.Listener{Name: "other", Port: 9090, Protocol: gwv1.HTTPProtocolType},
		gwv1.Listener{Name: "tcp", Port: 9000, Protocol: gwv1.TCPProtocolType})
	r := route("chat", "", "gw", "llm")
	r.Namespace = "team"
	r.Spec.Rules = append(r.Spec.Rules, gwv1.HTTPRouteRule{
		Name: ptr.To[gwv1.SectionName]("api"),
		Matches: []gwv1.HTTPRouteMatch{
			{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchExact), Value: ptr.To("/v1/models")}, Method: ptr.To(gwv1.HTTPMethodGet)},
			{Headers: []gwv1.HTTPHeaderMatch{{Name: "x-user", Value: "a"}, {Name: "x-team", Value: "^ml-", Type: ptr.To(gwv1.HeaderMatchRegularExpression)}},
				QueryParams: []gwv1.HTTPQueryParamMatch{{Name: "v", Value: "2"}, {Name: "model", Value: "gpt-.*", Type: ptr.To(gwv1.QueryParamMatchRegularExpression)}}},
		},
		BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{Weight: ptr.To[int32](3),
			BackendObjectReference: gwv1.BackendObjectReference{Name: "llm", Port: ptr.To[gwv1.PortNumber](8000)}}}},
	})
	gwPolicy := policy("cap", "Gateway", "gw")
	gwPolicy.Namespace = "team"
	gwPolicy.Spec.TargetRefs[0].SectionName = ptr.To[gwv1.SectionName]("http")
	tokens := &v1alpha1.GatewayPolicy{ObjectMeta: metav1.ObjectMeta{Name: "tokens", Namespace: "team"}, Spec: v1alpha1.GatewayPolicySpec{
		TargetRefs: []v1alpha1.PolicyTargetReference{{Group: gwv1.GroupName, Kind: "HTTPRoute", Name: "chat"}},
		Traffic: &v1alpha1.Traffic{RateLimit: &v1alpha1.RateLimit{Local: []v1alpha1.LocalRateLimit{
			{Tokens: ptr.To[int64](1000), Unit: v1alpha1.UnitMinutes, Key: `request.headers["x-api-key"]`}}}}}}

	cfg, err := controller.Translate(controller.Model{
		Gateway:   gw,
		Routes:    []controller.AttachedRoute{{Route: r, Listeners: []gwv1.SectionName{"http"}}},
		Policies:  []v1alpha1.GatewayPolicy{*gwPolicy, *tokens},
		Endpoints: map[string][]string{controller.ServicePortKey("team", "llm", 8000): {"10.244.0.7:8080", "10.244.0.8:8080"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := config.Parse("translated.yaml", data)
	if err != nil {
		t.Fatalf("refproxy rejects the translation: %v\n%s", err, data)
	}
	if len(parsed.Binds) != 2 || parsed.Binds[0].Port != 8080 || parsed.Binds[1].Port != 9090 {
		t.Fatalf("binds %+v; want 8080 and 9090 (the TCP listener left out)", parsed.Binds)
	}
	var keys []string
	b, l := parsed.Binds[0], parsed.Binds[0].Listeners[0]
	for i, rt := range l.Routes {
		keys = append(keys, config.RouteKey(b, l, 0, rt, i))
		if len(rt.Backends) != 2 {
			t.Errorf("route %d: %d backends, want one per endpoint", i, len(rt.Backends))
		}
	}
	if diff := cmp.Diff([]string{"team/chat.00.http", "team/chat.10.http", "team/chat.11.http"}, keys); diff != "" {
		t.Errorf("route keys (-want +got):\n%s", diff)
	}
	if m := l.Routes[1].Matches[0]; m.Method != "GET" || m.Path == nil || m.Path.Exact == nil || *m.Path.Exact != "/v1/models" || l.Routes[1].RuleName != "api" {
		t.Errorf("rule 1 match 0: %+v", m)
	}
	exact := func(v config.StringMatch, want string) bool {
		return v.Exact != nil && *v.Exact == want && v.Regex == nil
	}
	regex := func(v config.StringMatch, want string) bool {
		return v.Regex != nil && *v.Regex == want && v.Exact == nil
	}
	if q := l.Routes[2].Matches[0].Query; len(q) != 2 || q[0].Name != "v" || !exact(q[0].Value, "2") || q[1].Name != "model" || !regex(q[1].Value, "gpt-.*") {
		t.Errorf("rule 1 match 1: query %+v, want v exactly 2 and model by the regex gpt-.*", q)
	}
	if h := l.Routes[2].Matches[0].Headers; len(h) != 2 || h[0].Name != "x-user" || !exact(h[0].Value, "a") || h[1].Name != "x-team" || !regex(h[1].Value, "^ml-") {
		t.Errorf("rule 1 match 1: headers %+v, want x-user exactly a and x-team by the regex ^ml-", h)
	}
	if so := l.Routes[0].Backends[1].ServiceOf; so == nil || *so != (config.ServiceOf{Name: "llm", Namespace: "team", Port: 8000}) ||
		l.Routes[0].Backends[1].Host != "10.244.0.8:8080" {
		t.Errorf("backend %+v (serviceOf %+v), want the endpoint 10.244.0.8:8080 of Service team/llm port 8000", l.Routes[0].Backends[1], so)
	}
	if w := l.Routes[2].Backends[0].Weight; w == nil || *w != 3 {
		t.Errorf("weight %v, want 3 on each endpoint of the reference", w)
	}
	if len(parsed.Policies) != 2 {
		t.Fatalf("policies %+v; want the listener's and the route's", parsed.Policies)
	}
	g, rt := parsed.Policies[0], parsed.Policies[1]
	if g.Phase != "gateway" || g.Target.Gateway == nil || g.Target.Gateway.GatewayName != "bind/8080" || *g.Target.Gateway.ListenerName != "http" {
		t.Errorf("gateway policy %+v", g)
	}
	if rt.Target.Route == nil || rt.Target.Route.Name != "chat" || rt.Policy.LocalRateLimit[0].Type != "tokens" || rt.Policy.LocalRateLimit[0].MaxTokens != 1000 ||
		rt.Policy.LocalRateLimit[0].Key != `request.headers["x-api-key"]` {
		t.Errorf("route policy %+v", rt)
	}
}
