package clusters_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/api/v1alpha1"
	"github.com/gwdiag/gwdiag/clusters/controller"
	"github.com/gwdiag/gwdiag/steps"
	"github.com/gwdiag/gwdiag/steps/targets/cluster"
)

const faultyName gwv1.GatewayController = "example.com/faulty"

// runFaultyController is a deliberately naive implementation: it marks
// every Gateway and HTTPRoute healthy, and every policy Accepted with the
// generic Gateway API reason "Accepted" (not "Valid") and Attached even
// when its target does not exist. It re-lists every 50ms until stopped.
func runFaultyController(c client.Client) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			faultyPass(ctx, c)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

func faultyPass(ctx context.Context, c client.Client) {
	ok := func(conds *[]metav1.Condition, gen int64, types ...string) {
		for _, typ := range types {
			meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: typ, Message: "ok", ObservedGeneration: gen})
		}
	}
	var gws gwv1.GatewayList
	if c.List(ctx, &gws) == nil {
		for _, gw := range gws.Items {
			ok(&gw.Status.Conditions, gw.Generation, "Accepted", "Programmed")
			c.Status().Update(ctx, &gw)
		}
	}
	var routes gwv1.HTTPRouteList
	if c.List(ctx, &routes) == nil {
		for _, r := range routes.Items {
			ps := gwv1.RouteParentStatus{ParentRef: r.Spec.ParentRefs[0], ControllerName: faultyName}
			ok(&ps.Conditions, r.Generation, "Accepted", "ResolvedRefs")
			r.Status.Parents = []gwv1.RouteParentStatus{ps}
			c.Status().Update(ctx, &r)
		}
	}
	var pols v1alpha1.GatewayPolicyList
	if c.List(ctx, &pols) == nil {
		for _, p := range pols.Items {
			as := gwv1.PolicyAncestorStatus{ControllerName: faultyName, AncestorRef: gwv1.ParentReference{
				Kind: ptr.To[gwv1.Kind]("Gateway"), Namespace: ptr.To(gwv1.Namespace(p.Namespace)), Name: "gwdiag"}}
			ok(&as.Conditions, p.Generation, "Accepted", "Attached")
			p.Status.Ancestors = []gwv1.PolicyAncestorStatus{as}
			c.Status().Update(ctx, &p)
		}
	}
}

// TestClusterConformanceCatchesFaults runs the cluster profile against the
// naive controller: the core scenario of the orphan policy fails on its
// attachment, with got/want; its reasons are not the reference's, which the
// extended policy-condition-reasons reports unsupported (the spec names the
// condition types only), and a failure once the feature is claimed.
func TestClusterConformanceCatchesFaults(t *testing.T) {
	t.Parallel()
	l := sharedAPIServer(t)
	c, err := controller.NewClient(l.Config)
	if err != nil {
		t.Fatal(err)
	}
	gc := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "faulty"}, Spec: gwv1.GatewayClassSpec{ControllerName: faultyName}}
	if err := c.Create(context.Background(), gc); err != nil {
		t.Fatal(err)
	}
	stop := runFaultyController(c)
	defer stop()

	for _, claim := range []bool{false, true} {
		var out strings.Builder
		rep, err := steps.Run(context.Background(), steps.Options{
			Target:      "cluster",
			Cluster:     cluster.Options{Kubeconfig: l.KubeconfigPath, GatewayClassName: "faulty", ConditionTimeout: steps.Duration(10 * time.Second)},
			AllFeatures: claim,
			Output:      &out,
		})
		t.Log(out.String())
		if err != nil {
			t.Fatal(err)
		}
		want := steps.Counts{Passed: 3, Failed: 1, Unsupported: 1}
		if claim {
			want = steps.Counts{Passed: 3, Failed: 2}
		}
		// No pod runs here: the features that need a data plane are
		// skipped, each scenario saying so.
		got := rep.Summary
		got.Skipped = 0
		if got != want {
			t.Errorf("naive controller, claiming every feature %v: got %+v, want %+v and the data-plane features skipped", claim, rep.Summary, want)
		}
		for _, f := range rep.Features {
			for _, s := range f.Scenarios {
				if s.Result == steps.Skipped && !strings.Contains(s.Message, "capability data-plane") {
					t.Errorf("%s: skipped with %q, want the missing data plane named", s.Name, s.Message)
				}
			}
		}
		for _, want := range []string{
			`Policy orphan condition Attached: got status "True" reason "Attached" (ok), want status "False"`,
			`condition Accepted: got status "True" reason "Accepted" (ok), want status "True" reason "Valid"`,
		} {
			if !strings.Contains(out.String(), want) && !strings.Contains(fmt.Sprint(rep.Features), want) {
				t.Errorf("report: want %q in\n%s", want, out.String())
			}
		}
	}
}
