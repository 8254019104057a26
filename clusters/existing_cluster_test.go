package clusters_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/controller"
	"github.com/gwdiag/gwdiag/steps"
	"github.com/gwdiag/gwdiag/steps/targets/cluster"
)

// testExistingClusterWithItsDataPlane validates an implementation the way
// a user validates theirs on any kubeconfig: its controller and proxy
// already run in the cluster (here the reference controller, started apart
// from the suite on the local node, standing in for agentgateway or any
// Gateway API implementation, its proxy image under a ref of its own), and
// the suite gets only the kubeconfig, the GatewayClass, --data-plane and
// an image for its mock backends. The traffic features then run through
// port-forwards to the implementation's proxy pods, found by the
// gateway-name label.
func testExistingClusterWithItsDataPlane(t *testing.T, n *localNode) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	stop, err := controller.Run(ctx, n.Config, controller.Options{DataPlane: &controller.DataPlane{Image: implProxyImage, PullPolicy: corev1.PullIfNotPresent}})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c, err := controller.NewClient(n.Config)
	if err != nil {
		t.Fatal(err)
	}
	const class = "implementation"
	gc := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Spec: gwv1.GatewayClassSpec{ControllerName: controller.ControllerName}}
	if err := c.Create(ctx, gc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The node serves other tests' runs: leave no class of its own there.
	defer func() {
		if err := c.Delete(context.Background(), gc); err != nil {
			t.Errorf("delete GatewayClass %s: %v", class, err)
		}
	}()

	rep, _ := runOnNode(t, steps.Options{
		Target:  "cluster",
		Cluster: cluster.Options{Kubeconfig: n.KubeconfigPath, DataPlane: true, MockImage: implMockImage, GatewayClassName: class},
		// Enough to show the path end to end; testLocalNodeConformance
		// runs every feature on the same data plane.
		Tags: "@trace-order,@proxy-pods",
	})
	if rep.Failed() || rep.Summary.Passed == 0 || rep.Summary.Skipped != 0 || rep.Summary.Unsupported != 0 {
		t.Errorf("got %+v, want every trace-order and proxy-pods scenario run and passed on the implementation's own pods", rep.Summary)
	}
	// The run's mock pool goes with it: the cluster is the user's.
	var nss corev1.NamespaceList
	if err := c.List(ctx, &nss, client.MatchingLabels{"gwdiag.dev/role": "mock-backends"}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range nss.Items {
		if ns.DeletionTimestamp == nil {
			t.Errorf("namespace %s of a mock pool left after the run", ns.Name)
		}
	}
}
