package steps

import (
	"context"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/steps/targets"
)

// ProxyEnv implements targets.ClusterEnv for the fake cluster.
func (d *fakeClusterDeployment) ProxyEnv() (targets.Env, error) { return d.pod, nil }

// ProgrammedSeen implements targets.ProgrammedObserver for the fake
// cluster: a proxy pod was ready when the Gateway turned Programmed,
// unless programmedEarly.
func (d *fakeClusterDeployment) ProgrammedSeen() (targets.ProgrammedObservation, error) {
	seen := targets.ProgrammedObservation{Programmed: targets.Condition{Type: "Programmed", Status: "True", Reason: "Programmed", Message: "Gateway programmed"},
		ProxyReady: true, Pods: "gwdiag-refproxy-0: phase Running"}
	if d.programmedEarly {
		seen.ProxyReady, seen.Pods = false, "gwdiag-refproxy-0: phase Pending, container refproxy waiting: ContainerCreating"
	}
	return seen, nil
}

// fakePodEnv makes the in-process proxy of the fake cluster name a pod in
// its trace snapshots, as a proxy pod's environment does (refproxy reads
// POD_NAME, POD_NAMESPACE and GATEWAY_NAME), and returns that identity.
func fakePodEnv(t *testing.T) targets.Env {
	env := targets.Env{PodName: "gwdiag-refproxy-0", Namespace: "gwdiag-fake", Gateway: "gwdiag"}
	t.Setenv("POD_NAME", env.PodName)
	t.Setenv("POD_NAMESPACE", env.Namespace)
	t.Setenv("GATEWAY_NAME", env.Gateway)
	return env
}

// TestProxyPodsCatchesFaults: the proxy-pods scenarios pass on a healthy
// fake cluster and each fault fails exactly the scenario that rests on
// the spec sentence it breaks, saying what it got and wanted. The same
// faults on the real local node: clusters/faulty_node_test.go.
func TestProxyPodsCatchesFaults(t *testing.T) {
	const (
		programmed = "The Gateway is Programmed only once a proxy pod is ready"
		env        = "Every snapshot names the proxy pod, its namespace and its Gateway"
	)
	tests := []struct {
		name string
		// setenv gives the proxy its pod's identity; pod is what the
		// target says the pod is.
		setenv   bool
		pod      targets.Env
		early    bool
		wantFail map[string]string
	}{
		{name: "healthy", setenv: true},
		// A controller that says Programmed as soon as it accepts the
		// Gateway, while the pod still starts (spec 2.4: the condition
		// indicates health).
		{name: "Programmed before the pod is ready", setenv: true, early: true, wantFail: map[string]string{
			programmed: `Gateway condition Programmed: got status "True" reason "Programmed" (Gateway programmed) while no proxy pod of the Gateway was Ready (gwdiag-refproxy-0: phase Pending, container refproxy waiting: ContainerCreating)`,
		}},
		// A proxy that loses its pod's identity: no env in its snapshots
		// (spec 2.1: podName, namespace, gateway on every snapshot).
		{name: "proxy loses the env fields", wantFail: map[string]string{
			env: `event 2 requestSnapshot (initial request): requestState.env: got no field, want an object with podName, namespace and gateway`,
		}},
		// A proxy whose env names another pod than the one traffic went to.
		{name: "env names another pod", setenv: true, pod: targets.Env{PodName: "other-pod", Namespace: "gwdiag-fake", Gateway: "gwdiag"}, wantFail: map[string]string{
			env: `env.podName: got "gwdiag-refproxy-0", want "other-pod"`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := tt.pod
			if tt.setenv {
				if got := fakePodEnv(t); pod == (targets.Env{}) {
					pod = got
				}
			}
			var out strings.Builder
			rep, err := Run(context.Background(), Options{
				TargetImpl: &fakeCluster{dataPlane: true, pod: pod, programmedEarly: tt.early},
				Tags:       "@" + string(FeatureProxyPods), Output: &out,
			})
			if err != nil {
				t.Fatal(err)
			}
			if s := rep.Summary; s.Passed+s.Failed != 2 || s.Failed != len(tt.wantFail) {
				t.Errorf("got %+v, want the 2 proxy-pods scenarios run and %d failed\n%s", s, len(tt.wantFail), out.String())
			}
			// The report lists the scenarios that did not pass.
			for name, want := range tt.wantFail {
				if got := rep.Scenario(name); len(got) != 1 || got[0].Result != Failed || !strings.Contains(got[0].Message, want) {
					t.Errorf("%s: got %+v, want a failure with %q", name, got, want)
				}
			}
			for _, f := range rep.Features {
				for _, s := range f.Scenarios {
					if _, fail := tt.wantFail[s.Name]; !fail {
						t.Errorf("%s: got %s %q, want passed", s.Name, s.Result, s.Message)
					}
				}
			}
		})
	}
}
