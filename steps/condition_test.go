package steps

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// fakeCluster stands in for a cluster target until one exists: the
// in-process proxy serves traffic and the conditions are canned, computed
// from the Setup the way a controller would set them.
type fakeCluster struct {
	InProcess
	// broken makes every condition False, as a failing controller would.
	broken bool
}

func (*fakeCluster) Name() string           { return "fake-cluster" }
func (*fakeCluster) Capabilities() []string { return []string{"cluster"} }

func (f *fakeCluster) Configure(ctx context.Context, setup Setup) (Deployment, error) {
	d, err := f.InProcess.Configure(ctx, setup)
	if err != nil {
		return nil, err
	}
	return &fakeClusterDeployment{Deployment: d, setup: setup, broken: f.broken}, nil
}

type fakeClusterDeployment struct {
	Deployment
	setup  Setup
	broken bool
}

func (d *fakeClusterDeployment) Conditions(_ context.Context, kind, name string) ([]Condition, error) {
	ok := func(typ, reason string) Condition {
		if d.broken {
			return Condition{Type: typ, Status: "False", Reason: "Invalid", Message: "broken on purpose"}
		}
		return Condition{Type: typ, Status: "True", Reason: reason}
	}
	switch kind {
	case "Gateway":
		return []Condition{ok("Accepted", "Accepted"), ok("Programmed", "Programmed")}, nil
	case "HTTPRoute":
		if d.setup.route(name) == nil {
			return nil, fmt.Errorf("no HTTPRoute %q", name)
		}
		return []Condition{ok("Accepted", "Accepted"), ok("ResolvedRefs", "ResolvedRefs")}, nil
	case "Policy":
		if r := d.setup.route(name); r != nil && len(r.Limits) > 0 {
			return []Condition{ok("Accepted", "Valid"), ok("Attached", "Attached")}, nil
		}
		for _, p := range d.setup.Policies {
			if p.Name == name && p.TargetKind == "Gateway" {
				return []Condition{ok("Accepted", "Valid"), ok("Attached", "Attached")}, nil
			}
			if p.Name == name {
				return []Condition{ok("Accepted", "Valid"),
					{Type: "Attached", Status: "False", Reason: "Pending", Message: "Policy is not attached: HTTPRoute default/" + p.TargetName + " is not attached to any Gateway"}}, nil
			}
		}
	}
	return nil, fmt.Errorf("no %s %q", kind, name)
}

// TestConditionStepsOnAClusterTarget runs the @cluster scenarios against a
// fake cluster target: they run (not skipped) and pass with a healthy
// controller, and fail, saying why, with a broken one.
func TestConditionStepsOnAClusterTarget(t *testing.T) {
	for _, broken := range []bool{false, true} {
		t.Run(fmt.Sprintf("broken=%v", broken), func(t *testing.T) {
			rep, err := Run(context.Background(), Options{TargetImpl: &fakeCluster{broken: broken}, Tags: "@condition-status", Output: &strings.Builder{}})
			if err != nil {
				t.Fatal(err)
			}
			if !broken && (rep.Failed() || rep.Summary.Passed != 4) {
				t.Errorf("healthy controller: got %+v %+v, want 4 passed", rep.Summary, rep.Features)
			}
			if broken {
				// The orphan policy's Attached=False is right even here.
				if rep.Summary.Failed != 3 || rep.Summary.Passed != 1 {
					t.Errorf("broken controller: got %+v, want 3 failed, 1 passed", rep.Summary)
				}
				got := rep.Scenario("Gateway and HTTPRoute report healthy conditions")
				if len(got) != 1 || !strings.Contains(got[0].Message, `Gateway condition Accepted: got status "False" reason "Invalid"`) {
					t.Errorf("broken controller message: got %+v", got)
				}
			}
		})
	}
}
