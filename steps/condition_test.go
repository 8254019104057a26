package steps

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/steps/targets"
	"github.com/gwdiag/gwdiag/steps/targets/inprocess"
)

// fakeCluster stands in for a cluster target until one exists: the
// in-process proxy serves traffic and the conditions are canned, computed
// from the Setup the way a controller would set them.
type fakeCluster struct {
	inprocess.InProcess
	// broken makes every condition False, as a failing controller would.
	broken bool
	// otherReasons gives the right conditions with reasons of its own: the
	// spec names condition types only.
	otherReasons bool
	// dataPlane claims the data-plane capability, as a cluster target
	// whose proxies run in pods does.
	dataPlane bool
	// pod is the proxy pod's identity the deployments give
	// (targets.ClusterEnv); the in-process proxy shows the env of
	// POD_NAME, POD_NAMESPACE and GATEWAY_NAME (proxy_pods_test.go).
	pod targets.Env
	// programmedEarly says the Gateway was seen Programmed before its
	// proxy pod was ready (targets.ProgrammedObserver).
	programmedEarly bool
}

func (*fakeCluster) Name() string { return "fake-cluster" }
func (f *fakeCluster) Capabilities() []string {
	if f.dataPlane {
		return []string{targets.CapabilityCluster, targets.CapabilityDataPlane}
	}
	return []string{targets.CapabilityCluster}
}

func (f *fakeCluster) Configure(ctx context.Context, setup targets.Setup) (targets.Deployment, error) {
	d, err := f.InProcess.Configure(ctx, setup)
	if err != nil {
		return nil, err
	}
	return &fakeClusterDeployment{Deployment: d, setup: setup, broken: f.broken, otherReasons: f.otherReasons,
		pod: f.pod, programmedEarly: f.programmedEarly}, nil
}

type fakeClusterDeployment struct {
	targets.Deployment
	setup                targets.Setup
	broken, otherReasons bool
	pod                  targets.Env
	programmedEarly      bool
}

func (d *fakeClusterDeployment) Conditions(_ context.Context, kind, name string) ([]targets.Condition, error) {
	ok := func(typ, reason string) targets.Condition {
		if d.broken {
			return targets.Condition{Type: typ, Status: "False", Reason: "Invalid", Message: "broken on purpose"}
		}
		if d.otherReasons {
			reason = "Fine"
		}
		return targets.Condition{Type: typ, Status: "True", Reason: reason}
	}
	switch kind {
	case "Gateway":
		return []targets.Condition{ok("Accepted", "Accepted"), ok("Programmed", "Programmed")}, nil
	case "HTTPRoute":
		if d.setup.RouteNamed(name) == nil {
			return nil, fmt.Errorf("no HTTPRoute %q", name)
		}
		return []targets.Condition{ok("Accepted", "Accepted"), ok("ResolvedRefs", "ResolvedRefs")}, nil
	case "Policy":
		if r := d.setup.RouteNamed(name); r != nil && len(r.Limits) > 0 {
			return []targets.Condition{ok("Accepted", "Valid"), ok("Attached", "Attached")}, nil
		}
		for _, p := range d.setup.Policies {
			if p.Name == name && p.TargetKind == "Gateway" {
				return []targets.Condition{ok("Accepted", "Valid"), ok("Attached", "Attached")}, nil
			}
			if p.Name == name {
				return []targets.Condition{ok("Accepted", "Valid"),
					{Type: "Attached", Status: "False", Reason: "Pending", Message: "Policy is not attached: HTTPRoute default/" + p.TargetName + " is not attached to any Gateway"}}, nil
			}
		}
	}
	return nil, fmt.Errorf("no %s %q", kind, name)
}

// TestConditionStepsOnAClusterTarget runs the cluster profile against a
// fake cluster target: they run (not skipped) and pass with a healthy
// controller, and fail, saying why, with a broken one.
func TestConditionStepsOnAClusterTarget(t *testing.T) {
	tests := []struct {
		name                         string
		target                       *fakeCluster
		passed, failed, unsupported  int
		failedScenario, failedReason string
	}{
		{name: "healthy controller", target: &fakeCluster{}, passed: 5},
		// Reasons are the reference controller's, not the spec's: core
		// passes and the extended feature is unsupported.
		{name: "controller with reasons of its own", target: &fakeCluster{otherReasons: true}, passed: 4, unsupported: 1},
		// The orphan policy's Attached=False is right even here.
		{name: "broken controller", target: &fakeCluster{broken: true}, passed: 1, failed: 3, unsupported: 1,
			failedScenario: "Gateway and HTTPRoute report healthy conditions", failedReason: `Gateway condition Accepted: got status "False" reason "Invalid"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := Run(context.Background(), Options{TargetImpl: tt.target, Output: &strings.Builder{}})
			if err != nil {
				t.Fatal(err)
			}
			if s := rep.Summary; s.Passed != tt.passed || s.Failed != tt.failed || s.Unsupported != tt.unsupported {
				t.Errorf("got %+v, want %d passed, %d failed, %d unsupported; %+v", s, tt.passed, tt.failed, tt.unsupported, rep.Features)
			}
			if len(rep.Profiles) != 1 || rep.Profiles[0].Name != ProfileCluster {
				t.Errorf("profiles: got %+v, want the cluster profile only", rep.Profiles)
			}
			if tt.failedScenario != "" {
				got := rep.Scenario(tt.failedScenario)
				if len(got) != 1 || !strings.Contains(got[0].Message, tt.failedReason) {
					t.Errorf("%s: got %+v, want a failure with %q", tt.failedScenario, got, tt.failedReason)
				}
			}
		})
	}
}

// TestClusterProfileWithAndWithoutDataPlane: on a cluster target whose
// proxy serves traffic, the cluster profile runs trace order, request
// limits, token overage and keyed limits beside the conditions, every scenario reported
// under the cluster profile; without a data plane those features are
// skipped, each scenario saying why, and the run does not fail.
func TestClusterProfileWithAndWithoutDataPlane(t *testing.T) {
	traffic := []FeatureName{FeatureTraceOrder, FeatureRequestLimits, FeatureTokenOverage, FeatureProxyPods, FeatureRateLimitPerKey}
	t.Run("data plane", func(t *testing.T) {
		rep, err := Run(context.Background(), Options{TargetImpl: &fakeCluster{dataPlane: true, pod: fakePodEnv(t)}, Output: &strings.Builder{}})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Failed() || rep.Summary.Skipped != 0 || rep.Summary.Unsupported != 0 {
			t.Errorf("got %+v, want every scenario of the cluster profile passed; %+v", rep.Summary, rep.Features)
		}
		if len(rep.Profiles) != 1 || rep.Profiles[0].Name != ProfileCluster || rep.Profiles[0].Core.Result != Passed {
			t.Fatalf("profiles: got %+v, want the cluster profile, core passed", rep.Profiles)
		}
		got := map[FeatureName]FeatureReport{}
		for _, f := range rep.Features {
			got[f.Name] = f
			if f.Profile != ProfileCluster {
				t.Errorf("feature %s reported under profile %q, want cluster (the profile the run covers)", f.Name, f.Profile)
			}
		}
		for _, f := range append(traffic, FeatureConditionStatus) {
			if got[f].Result != Passed || got[f].Passed == 0 {
				t.Errorf("feature %s: got %+v, want passed", f, got[f])
			}
		}
		for _, f := range []FeatureName{FeatureAdmin, FeatureTraceSeverity, FeatureGlobalRateLimit} {
			if _, ok := got[f]; ok {
				t.Errorf("standalone-only feature %s ran on a cluster target", f)
			}
		}
		if want := rep.Profiles[0].Core.Passed; want != got[FeatureConditionStatus].Passed+got[FeatureTraceOrder].Passed+got[FeatureRequestLimits].Passed+got[FeatureTokenOverage].Passed+got[FeatureProxyPods].Passed {
			t.Errorf("cluster core count %d is not the sum of its five features' passes", want)
		}
	})
	t.Run("no data plane", func(t *testing.T) {
		rep, err := Run(context.Background(), Options{TargetImpl: &fakeCluster{}, Output: &strings.Builder{}})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Failed() || rep.Summary.Passed != 5 {
			t.Errorf("got %+v, want the 5 condition scenarios passed and nothing failed", rep.Summary)
		}
		if c := rep.Profiles[0].Core; c.Result != Partial || c.Skipped == 0 {
			t.Errorf("cluster core: got %+v, want partial: its traffic features did not run", c)
		}
		for _, f := range rep.Features {
			if !slices.Contains(traffic, f.Name) {
				continue
			}
			if f.Result != Skipped || f.Passed+f.Failed != 0 || len(f.Scenarios) == 0 {
				t.Errorf("feature %s: got %+v, want every scenario skipped", f.Name, f)
			}
			for _, s := range f.Scenarios {
				if !strings.Contains(s.Message, "capability data-plane") || !strings.Contains(s.Message, "--cluster local-node") {
					t.Errorf("%s: skip reason %q does not say what is missing and how to get it", s.Name, s.Message)
				}
			}
		}
	})
}
