package steps

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/steps/targets"
	"github.com/gwdiag/gwdiag/steps/targets/inprocess"
)

// advertising is a target that advertises features as a GatewayClass would.
type advertising struct {
	targets.Target
	names []string
	err   error
}

func (a advertising) AdvertisedFeatures(context.Context) ([]string, string, error) {
	return a.names, "GatewayClass x status.supportedFeatures", a.err
}

// TestInferClaims: with no claims, a cluster-profile run claims the
// extended features its target advertises, leaving out (and counting) the
// Gateway API's own names, core features and repeats; claims given, a
// profile without the cluster, or a class not accepted infer nothing.
func TestInferClaims(t *testing.T) {
	names := []string{"HTTPRouteQueryParamMatching", "ratelimit-per-key", "condition-status", "policy-condition-reasons", "ratelimit-per-key"}
	cluster := []ConformanceProfileName{ProfileCluster}
	tests := []struct {
		name     string
		o        Options
		tgt      advertising
		profiles []ConformanceProfileName
		want     []FeatureName
		from     string
		out      string
	}{
		{"inferred", Options{}, advertising{names: names}, cluster,
			[]FeatureName{FeatureRateLimitPerKey, FeaturePolicyConditionReasons}, "GatewayClass x status.supportedFeatures",
			"claims: none given; inferred from GatewayClass x status.supportedFeatures: [ratelimit-per-key policy-condition-reasons] (3 other names left out: not extended features of gwdiag)\n"},
		{"claims given", Options{SupportedFeatures: []FeatureName{FeatureRateLimitPerKey}}, advertising{names: names}, cluster,
			[]FeatureName{FeatureRateLimitPerKey}, "", ""},
		{"all claimed", Options{AllFeatures: true}, advertising{names: names}, cluster, nil, "", ""},
		{"standalone only", Options{}, advertising{names: names}, []ConformanceProfileName{ProfileStandalone}, nil, "", ""},
		{"not accepted", Options{}, advertising{err: errors.New("GatewayClass x: the class is not accepted")}, cluster,
			nil, "", "claims: none given, none inferred: GatewayClass x: the class is not accepted\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			tt.o.Output = &out
			tt.tgt.Target = inprocess.New()
			from := inferClaims(context.Background(), &tt.o, tt.tgt, tt.profiles)
			if !slices.Equal(tt.o.SupportedFeatures, tt.want) || from != tt.from || out.String() != tt.out {
				t.Errorf("got claims %v from %q, output %q; want %v from %q, output %q", tt.o.SupportedFeatures, from, out.String(), tt.want, tt.from, tt.out)
			}
		})
	}
}
