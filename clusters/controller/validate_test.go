package controller

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/api/v1alpha1"
)

func TestValidate(t *testing.T) {
	route := v1alpha1.PolicyTargetReference{Group: gwv1.GroupName, Kind: "HTTPRoute", Name: "r"}
	gateway := v1alpha1.PolicyTargetReference{Group: gwv1.GroupName, Kind: "Gateway", Name: "g"}
	spec := func(targets []v1alpha1.PolicyTargetReference, local ...v1alpha1.LocalRateLimit) v1alpha1.GatewayPolicySpec {
		return v1alpha1.GatewayPolicySpec{TargetRefs: targets, Traffic: &v1alpha1.Traffic{RateLimit: &v1alpha1.RateLimit{Local: local}}}
	}
	one := []v1alpha1.PolicyTargetReference{route}
	global := func(targets []v1alpha1.PolicyTargetReference, edit func(*v1alpha1.GlobalRateLimit)) v1alpha1.GatewayPolicySpec {
		g := exampleGlobal()
		if edit != nil {
			edit(g)
		}
		return v1alpha1.GatewayPolicySpec{TargetRefs: targets, Traffic: &v1alpha1.Traffic{RateLimit: &v1alpha1.RateLimit{Global: g}}}
	}
	tests := []struct {
		name    string
		spec    v1alpha1.GatewayPolicySpec
		wantErr string // "" for valid
	}{
		{"requests with burst", spec(one, v1alpha1.LocalRateLimit{Requests: ptr.To[int64](3), Burst: ptr.To[int64](3), Unit: "Seconds"}), ""},
		{"tokens", spec(one, v1alpha1.LocalRateLimit{Tokens: ptr.To[int64](1000), Unit: "Minutes"}), ""},
		{"no traffic", v1alpha1.GatewayPolicySpec{TargetRefs: one}, ""},
		{"no targets", spec(nil), "spec.targetRefs: must have 1 to 16 entries, got 0"},
		{"mixed kinds", spec([]v1alpha1.PolicyTargetReference{route, gateway}), "spec.targetRefs[1].kind: all targets of a policy must be of one kind, got Gateway after HTTPRoute"},
		{"wrong group", spec([]v1alpha1.PolicyTargetReference{{Group: "x.io", Kind: "HTTPRoute", Name: "r"}}), `spec.targetRefs[0].group: must be gateway.networking.k8s.io, got "x.io"`},
		{"wrong kind", spec([]v1alpha1.PolicyTargetReference{{Group: gwv1.GroupName, Kind: "Service", Name: "r"}}), `spec.targetRefs[0].kind: must be HTTPRoute or Gateway, got "Service"`},
		{"both requests and tokens", spec(one, v1alpha1.LocalRateLimit{Requests: ptr.To[int64](1), Tokens: ptr.To[int64](1), Unit: "Seconds"}), "spec.traffic.rateLimit.local[0].requests: exactly one of requests or tokens must be set, got both"},
		{"bad unit on the second entry", spec(one, v1alpha1.LocalRateLimit{Requests: ptr.To[int64](1), Unit: "Seconds"}, v1alpha1.LocalRateLimit{Requests: ptr.To[int64](1), Unit: "Days"}), `spec.traffic.rateLimit.local[1].unit: must be Seconds, Minutes or Hours, got "Days"`},
		{"negative requests", spec(one, v1alpha1.LocalRateLimit{Requests: ptr.To[int64](-2), Unit: "Seconds"}), "spec.traffic.rateLimit.local[0].requests: must be >= 1, got -2"},
		{"negative burst", spec(one, v1alpha1.LocalRateLimit{Requests: ptr.To[int64](1), Burst: ptr.To[int64](-1), Unit: "Seconds"}), "spec.traffic.rateLimit.local[0].burst: must be >= 0, got -1"},
		{"keyed", spec(one, v1alpha1.LocalRateLimit{Requests: ptr.To[int64](1), Unit: "Seconds", Key: `request.headers["x-api-key"]`}), ""},
		{"key not CEL", spec(one, v1alpha1.LocalRateLimit{Requests: ptr.To[int64](1), Unit: "Seconds", Key: "request.headers["}),
			"spec.traffic.rateLimit.local[0].key: CEL: ERROR: <input>:1:17: Syntax error"},
		{"key not a scalar", spec(one, v1alpha1.LocalRateLimit{Requests: ptr.To[int64](1), Unit: "Seconds", Key: "[request.path]"}),
			"spec.traffic.rateLimit.local[0].key: CEL: expression yields list(dyn), want a string"},
		{"seventeen entries", spec(one, make([]v1alpha1.LocalRateLimit, 17)...), "spec.traffic.rateLimit.local: must have at most 16 entries, got 17"},
		{"global", global(one, nil), ""},
		{"global, bad CEL", global(one, func(g *v1alpha1.GlobalRateLimit) { g.Descriptors[0].Entries[0].Expression = "request.headers[" }),
			"spec.traffic.rateLimit.global.descriptors[0].entries[0].expression: ERROR: <input>:1:17: Syntax error"},
		{"global without port", global(one, func(g *v1alpha1.GlobalRateLimit) { g.BackendRef.Port = nil }), "spec.traffic.rateLimit.global.backendRef.port: required"},
		{"global, bad limit unit", global(one, func(g *v1alpha1.GlobalRateLimit) { g.Descriptors[0].Limit.Unit = "Weeks" }),
			`spec.traffic.rateLimit.global.descriptors[0].limit.unit: must be Seconds, Minutes, Hours or Days, got "Weeks"`},
		{"global, no descriptors", global(one, func(g *v1alpha1.GlobalRateLimit) { g.Descriptors = nil }), "spec.traffic.rateLimit.global.descriptors: must have 1 to 16 entries, got 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.spec)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got %v, want valid", err)
			case tt.wantErr != "" && err == nil:
				t.Errorf("got valid, want %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("got %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}
