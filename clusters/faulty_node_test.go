package clusters_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/controller"
	"github.com/gwdiag/gwdiag/steps"
	"github.com/gwdiag/gwdiag/steps/bundle"
)

// A nodeFault is the reference controller on the local node with its
// writes changed in one precise way, through an interceptor on its
// client: a naive controller, or one that deploys a proxy that loses what
// the spec says it shows. The suite must fail exactly the scenario that
// rests on the spec sentence the fault breaks, saying why.
type nodeFault struct {
	name string
	// writes changes what the controller writes.
	writes interceptor.Funcs
	// tags pick the scenarios run: the one that must fail, and others
	// that must pass with the fault (godog: "," is or, "&&" and).
	tags string
	// scenario must fail with message in its report; every other
	// scenario run must pass.
	scenario, message string
}

var nodeFaults = []nodeFault{
	// Spec 2.4: Programmed is one of the Gateway conditions that indicate
	// health. This controller writes it True as soon as it accepts the
	// Gateway, while the proxy pod is still starting. Every other scenario
	// passes, since the target itself waits for a ready proxy pod.
	{name: "naive controller: Programmed before the pod is ready",
		writes:   interceptor.Funcs{SubResourceUpdate: programmedOnAccept},
		tags:     "@condition-status,@proxy-pods",
		scenario: "The Gateway is Programmed only once a proxy pod is ready",
		message:  `Gateway condition Programmed: got status "True" reason "Programmed" (Gateway programmed) while no proxy pod of the Gateway was Ready (`},
	// Spec 2.1: in cluster mode every snapshot carries env with podName,
	// namespace and gateway. This controller's Deployment gives the proxy
	// no POD_NAME, POD_NAMESPACE or GATEWAY_NAME, so refproxy traces as
	// if standalone: no env. The other checks of part 2.1 still pass.
	{name: "proxy that loses the env fields",
		writes: interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				withoutPodEnv(obj)
				return c.Create(ctx, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				withoutPodEnv(obj)
				return c.Update(ctx, obj, opts...)
			},
		},
		tags:     "@proxy-pods,@trace-order && @proxy-pods,@spec-2.1",
		scenario: "Every snapshot names the proxy pod, its namespace and its Gateway",
		message:  "event 2 requestSnapshot (initial request): requestState.env: got no field, want an object with podName, namespace and gateway",
	},
}

// programmedOnAccept writes a Gateway's Programmed condition True
// whenever Accepted is, whatever the reference controller found of its
// Deployment. Its transition time is Accepted's, so that rewriting the
// reference's Pending again and again changes nothing on the server.
func programmedOnAccept(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if gw, ok := obj.(*gwv1.Gateway); ok && sub == "status" {
		acc := meta.FindStatusCondition(gw.Status.Conditions, string(gwv1.GatewayConditionAccepted))
		p := meta.FindStatusCondition(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed))
		if acc != nil && acc.Status == metav1.ConditionTrue && p != nil && p.Status != metav1.ConditionTrue {
			p.Status, p.Reason, p.Message = metav1.ConditionTrue, string(gwv1.GatewayReasonProgrammed), "Gateway programmed"
			p.LastTransitionTime = acc.LastTransitionTime
		}
	}
	return c.SubResource(sub).Update(ctx, obj, opts...)
}

// withoutPodEnv drops the pod identity a proxy Deployment gives refproxy.
func withoutPodEnv(obj client.Object) {
	dep, ok := obj.(*appsv1.Deployment)
	if !ok {
		return
	}
	for i := range dep.Spec.Template.Spec.Containers {
		c := &dep.Spec.Template.Spec.Containers[i]
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool {
			return e.Name == "POD_NAME" || e.Name == "POD_NAMESPACE" || e.Name == "GATEWAY_NAME"
		})
	}
}

// interceptedController runs the reference controller (controller.Setup)
// as controller.Run does, but on a client whose writes go through writes.
func interceptedController(writes interceptor.Funcs) func(context.Context, *rest.Config, controller.Options) (func(), error) {
	return func(ctx context.Context, cfg *rest.Config, o controller.Options) (func(), error) {
		scheme, err := controller.NewScheme()
		if err != nil {
			return nil, err
		}
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{
			Scheme:                 scheme,
			Logger:                 controller.DiscardLogger(),
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
			NewClient: func(cfg *rest.Config, opts client.Options) (client.Client, error) {
				c, err := client.NewWithWatch(cfg, opts)
				if err != nil {
					return nil, err
				}
				return interceptor.NewClient(c, writes), nil
			},
		})
		if err != nil {
			return nil, err
		}
		if err := controller.Setup(mgr, o); err != nil {
			return nil, err
		}
		runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan error, 1)
		go func() { done <- mgr.Start(runCtx) }()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			cancel()
			<-done
			return nil, ctx.Err()
		}
		return func() { cancel(); <-done }, nil
	}
}

// testLocalNodeCatchesFaults runs, for each fault of nodeFaults, the
// scenarios of its tags on the local node with that controller: its
// scenario fails with its message, and every other one passes; the
// failure's bundle holds the resources and the pods' logs, and replayed on
// the local node it fails at the same step with the same controller and
// passes with the faithful one.
func testLocalNodeCatchesFaults(t *testing.T, n *localNode) {
	for _, f := range nodeFaults {
		t.Run(f.name, func(t *testing.T) {
			o := n.opts
			o.RunController = interceptedController(f.writes)
			rep, _ := runOnNode(t, steps.Options{Target: "cluster", Cluster: o, Tags: f.tags, BundleDir: t.TempDir()})
			// The report lists the scenarios that did not pass.
			got := rep.Scenario(f.scenario)
			if len(got) != 1 || got[0].Result != steps.Failed || !strings.Contains(got[0].Message, f.message) {
				t.Fatalf("%s: got %+v, want a failure with %q", f.scenario, got, f.message)
			}
			// Its bundle holds the resources as they were at the failure,
			// and the pods' logs, the proxy's among them.
			res, err := os.ReadFile(filepath.Join(got[0].Bundle, "resources.yaml"))
			if err != nil || !strings.Contains(string(res), "kind: Gateway\n") || !strings.Contains(string(res), "status:") {
				t.Errorf("bundle %q: resources.yaml %v, want the Gateway with its status:\n%s", got[0].Bundle, err, res)
			}
			logs, _ := filepath.Glob(filepath.Join(got[0].Bundle, "pods", "*.log"))
			proxyLog := false
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				proxyLog = proxyLog || strings.Contains(string(b), "refproxy started")
			}
			if !proxyLog {
				t.Errorf("bundle %q: pod logs %v, want the proxy pod's", got[0].Bundle, logs)
			}
			for _, feat := range rep.Features {
				for _, s := range feat.Scenarios {
					if s.Name != f.scenario {
						t.Errorf("%s: got %s %q, want passed: the fault breaks only %q", s.Name, s.Result, s.Message, f.scenario)
					}
				}
			}
			if s := rep.Summary; s.Failed != 1 || s.Passed == 0 || s.Skipped+s.Unsupported != 0 {
				t.Errorf("got %+v, want %q failed and every other scenario of %s passed", s, f.scenario, f.tags)
			}
			// gwdiag conformance replay on the cluster target: the bundle's
			// feature file and scenario, run again on the local node with
			// the same controller, fail the same way.
			b, _, err := bundle.Read(got[0].Bundle)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			r, err := steps.Replay(context.Background(), got[0].Bundle, steps.Options{Target: "cluster", Cluster: o, Output: &out})
			if err != nil {
				t.Fatalf("replay: %v\n%s", err, out.String())
			}
			t.Logf("replayed on the local node: %s at %q: %s", r.Scenario.Result, r.Scenario.Step, r.Scenario.Message)
			if !r.Same() || r.Scenario.Step != b.Meta.FailedStep || !strings.Contains(r.Scenario.Message, f.message) {
				t.Errorf("replayed: %s at %q %q, want failed at %q as bundled\n%s", r.Scenario.Result, r.Scenario.Step, r.Scenario.Message, b.Meta.FailedStep, out.String())
			}
			// And on the faithful controller, as a vendor checks a fix: it
			// passes.
			out.Reset()
			good, err := steps.Replay(context.Background(), got[0].Bundle, steps.Options{Target: "cluster", Cluster: n.opts, Output: &out})
			if err != nil {
				t.Fatalf("replay on the faithful controller: %v\n%s", err, out.String())
			}
			if good.Scenario.Result != steps.Passed {
				t.Errorf("replayed on the faithful controller: %s %q, want passed\n%s", good.Scenario.Result, good.Scenario.Message, out.String())
			}
		})
	}
}
