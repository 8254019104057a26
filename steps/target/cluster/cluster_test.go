package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gwdiag/gwdiag/steps/target"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestClusterManifests(t *testing.T) {
	setup := target.Setup{
		Backends: []target.Backend{{Name: "httpbin", Kind: target.BackendEcho}, {Name: "llm", Kind: target.BackendLLM}},
		Listeners: []target.Listener{{Name: "default", Routes: []target.Route{{Name: "httpbin", PathPrefix: "/", Backend: "httpbin", Limits: []target.Limit{{Kind: target.LimitRequests, Amount: 3, Unit: time.Second, Burst: 3}}}}},
			{Name: "ai", Routes: []target.Route{{Name: "chat", PathPrefix: "/v1", Backend: "llm", Limits: []target.Limit{{Kind: target.LimitTokens, Amount: 1000, Unit: time.Minute}}}}}},
		Policies: []target.Policy{{Name: "orphan", TargetKind: "HTTPRoute", TargetName: "missing", Limits: []target.Limit{{Kind: target.LimitRequests, Amount: 1, Unit: time.Hour}}}},
	}
	agw := schema.GroupVersionKind{Group: "agentgateway.dev", Version: "v1alpha1", Kind: "AgentgatewayPolicy"}
	objs, err := clusterManifests(setup, "ns1", "agentgateway", agw)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, o := range objs {
		order = append(order, o.GetObjectKind().GroupVersionKind().Kind+"/"+o.GetName())
	}
	wantOrder := []string{"Gateway/gwdiag", "Service/httpbin", "Service/llm", "HTTPRoute/httpbin", "HTTPRoute/chat",
		"AgentgatewayPolicy/httpbin", "AgentgatewayPolicy/chat", "AgentgatewayPolicy/orphan"}
	if diff := cmp.Diff(wantOrder, order); diff != "" {
		t.Errorf("objects in creation order (-want +got):\n%s", diff)
	}
	gw := objs[0].(*gwv1.Gateway)
	if gw.Spec.GatewayClassName != "agentgateway" || len(gw.Spec.Listeners) != 2 || gw.Spec.Listeners[1].Name != "ai" || gw.Spec.Listeners[1].Port != clusterListenerPort+1 {
		t.Errorf("Gateway: got class %q listeners %+v, want class agentgateway and listeners default:%d, ai:%d", gw.Spec.GatewayClassName, gw.Spec.Listeners, clusterListenerPort, clusterListenerPort+1)
	}
	chat := objs[4].(*gwv1.HTTPRoute)
	if got := *chat.Spec.ParentRefs[0].SectionName; got != "ai" {
		t.Errorf("route chat parent sectionName: got %q, want ai", got)
	}
	if got := *chat.Spec.Rules[0].Matches[0].Path.Value; got != "/v1" {
		t.Errorf("route chat path prefix: got %q, want /v1", got)
	}

	tests := []struct {
		name string
		obj  int
		want map[string]any
	}{
		{"requests with burst", 5, map[string]any{
			"targetRefs": []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "httpbin"}},
			"traffic":    map[string]any{"rateLimit": map[string]any{"local": []any{map[string]any{"requests": int64(3), "unit": "Seconds", "burst": int64(3)}}}},
		}},
		{"tokens", 6, map[string]any{
			"targetRefs": []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "chat"}},
			"traffic":    map[string]any{"rateLimit": map[string]any{"local": []any{map[string]any{"tokens": int64(1000), "unit": "Minutes"}}}},
		}},
		{"standalone policy", 7, map[string]any{
			"targetRefs": []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "missing"}},
			"traffic":    map[string]any{"rateLimit": map[string]any{"local": []any{map[string]any{"requests": int64(1), "unit": "Hours"}}}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := objs[tt.obj].(*unstructured.Unstructured)
			if u.GetAPIVersion() != "agentgateway.dev/v1alpha1" || u.GetNamespace() != "ns1" {
				t.Errorf("apiVersion %q namespace %q, want agentgateway.dev/v1alpha1 in ns1", u.GetAPIVersion(), u.GetNamespace())
			}
			if diff := cmp.Diff(tt.want, u.Object["spec"]); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
		})
	}

	if _, err := clusterManifests(target.Setup{Listeners: []target.Listener{{Name: "l", Routes: []target.Route{{Name: "r", Backend: "b", Limits: []target.Limit{{Kind: target.LimitRequests, Amount: 1, Unit: time.Millisecond}}}}}}}, "ns", "c", agw); err == nil {
		t.Error("a limit per millisecond: got no error, want one naming the unit")
	}
}

func TestClusterOptionsDefaults(t *testing.T) {
	o := New(Options{Local: true}).opts
	if o.GatewayClassName != "gwdiag" || o.PolicyGroup != "gwdiag.dev" || o.PolicyKind != "GatewayPolicy" || o.PolicyVersion != "v1alpha1" || time.Duration(o.ConditionTimeout) != 30*time.Second || o.ControllerName == "" {
		t.Errorf("local defaults: got %+v", o)
	}
	o = New(Options{PolicyGroup: "agentgateway.dev", PolicyKind: "AgentgatewayPolicy"}).opts
	if o.PolicyVersion != "v1alpha1" || o.ControllerName != "" {
		t.Errorf("kubeconfig defaults: got version %q controller %q, want v1alpha1 and any controller", o.PolicyVersion, o.ControllerName)
	}
	if got := New(Options{}).Capabilities(); len(got) != 1 || got[0] != target.CapabilityCluster {
		t.Errorf("cluster target capabilities: got %v, want [cluster]", got)
	}
}

func TestClusterConditionsWrittenAt(t *testing.T) {
	tests := []struct {
		name string
		cond metav1.Condition
		gen  int64
		want bool
	}{
		{"current generation", metav1.Condition{ObservedGeneration: 2, Message: "ok"}, 2, true},
		{"stale generation", metav1.Condition{ObservedGeneration: 1, Message: "ok"}, 2, false},
		{"CRD default of a new Gateway", metav1.Condition{Reason: "Pending", Message: "Waiting for controller"}, 1, false},
		{"controller that leaves observedGeneration unset", metav1.Condition{Reason: "Valid", Message: "Policy accepted"}, 3, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := writtenAt(tt.cond, tt.gen); got != tt.want {
				t.Errorf("writtenAt(%+v, %d) = %v, want %v", tt.cond, tt.gen, got, tt.want)
			}
		})
	}
	if _, current, _ := convert(nil, 1); current {
		t.Error("no conditions: got current, want not yet written")
	}
}

func TestClusterTargetNoKubeconfig(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	c := New(Options{})
	err := c.Start(context.Background())
	defer c.Stop(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cluster.local: true") {
		t.Errorf("Start with no kubeconfig: got %v, want an error pointing at cluster.kubeconfig and cluster.local", err)
	}
	missing := New(Options{Kubeconfig: "/nonexistent/kubeconfig"})
	if err := missing.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "/nonexistent/kubeconfig") {
		t.Errorf("Start with a missing kubeconfig file: got %v, want an error naming it", err)
	}
}
