package controller

import (
	"testing"

	"gopkg.in/yaml.v3"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/api/v1alpha1"
	"github.com/gwdiag/gwdiag/refproxy/config"
)

func exampleGlobal() *v1alpha1.GlobalRateLimit {
	tokens := v1alpha1.DescriptorTokens
	return &v1alpha1.GlobalRateLimit{
		BackendRef: gwv1.BackendObjectReference{Name: "ratelimit", Port: ptr.To[gwv1.PortNumber](8081)},
		Domain:     "gateway",
		Descriptors: []v1alpha1.GlobalRateLimitDescriptor{
			{Entries: []v1alpha1.DescriptorEntry{{Name: "route", Expression: `"openai"`}}, Limit: &v1alpha1.GlobalLimit{Amount: 60, Unit: "Minutes"}},
			{Entries: []v1alpha1.DescriptorEntry{{Name: "user", Expression: `request.headers["x-user"]`}}, Type: &tokens},
		},
	}
}

// TestRemoteRateLimit: a policy's global limit becomes the data plane's
// remoteRateLimit, which the refproxy config loader accepts as it is.
func TestRemoteRateLimit(t *testing.T) {
	g := exampleGlobal()
	open := v1alpha1.FailOpen
	g.FailureMode = &open
	r := remoteRateLimit("team-a", g)
	if r.Host != "ratelimit.team-a.svc:8081" || r.Domain != "gateway" || r.FailureMode != "failOpen" || len(r.Descriptors) != 2 {
		t.Fatalf("got %+v", r)
	}
	if d := r.Descriptors[0]; d.Type != "requests" || d.LimitOverride != `{"unit": "minute", "requestsPerUnit": 60}` || d.Entries[0] != (config.DescriptorEntry{Key: "route", Value: `"openai"`}) {
		t.Errorf("descriptor 0: %+v", d)
	}
	if d := r.Descriptors[1]; d.Type != "tokens" || d.LimitOverride != "" || d.Entries[0].Value != `request.headers["x-user"]` {
		t.Errorf("descriptor 1: %+v", d)
	}
	ns := gwv1.Namespace("infra")
	g.BackendRef.Namespace = &ns
	g.FailureMode = nil
	if r := remoteRateLimit("team-a", g); r.Host != "ratelimit.infra.svc:8081" || r.FailureMode != "failClosed" {
		t.Errorf("backendRef in another namespace, no failure mode: host %s, mode %s", r.Host, r.FailureMode)
	}
	// The data plane loads it.
	route := map[string]any{"binds": []any{map[string]any{"port": 0, "listeners": []any{map[string]any{"routes": []any{
		map[string]any{"name": "r", "policies": config.Policies{RemoteRateLimit: r}, "backends": []any{map[string]any{"host": "127.0.0.1:9"}}},
	}}}}}}
	b, err := yaml.Marshal(route)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.Parse("translated.yaml", b); err != nil {
		t.Errorf("refproxy rejects the translation: %v\n%s", err, b)
	}
}
