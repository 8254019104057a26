package clusters_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/controller"
	"github.com/gwdiag/gwdiag/clusters/kube/images"
	"github.com/gwdiag/gwdiag/clusters/kube/node"
	"github.com/gwdiag/gwdiag/steps"
	"github.com/gwdiag/gwdiag/steps/targets/cluster"
)

// TestExistingClusterWithItsDataPlane validates an implementation the way
// a user validates theirs on any kubeconfig: its controller and proxy
// already run in the cluster (here the reference controller, started apart
// from the suite on the local node, standing in for agentgateway or any
// Gateway API implementation), and the suite gets only the kubeconfig,
// the GatewayClass, --data-plane and an image for its mock backends. The
// traffic features then run through port-forwards to the implementation's
// proxy pods, found by the gateway-name label.
func TestExistingClusterWithItsDataPlane(t *testing.T) {
	t.Parallel()
	o := localNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const proxyImage, mockImage = "example.com/implementation/proxy:1", "example.com/conformance/mocks:1"
	n, err := node.StartCluster(ctx, node.ClusterOptions{Images: []images.Image{
		{Ref: proxyImage, Files: map[string]string{"/refproxy": o.RefproxyBinary}, Entrypoint: []string{"/refproxy"}},
		{Ref: mockImage, Files: map[string]string{"/mockbackend": o.MockBinary}, Entrypoint: []string{"/mockbackend"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Stop(); err != nil {
			t.Errorf("node Stop: %v", err)
		}
	}()
	stop, err := controller.Run(ctx, n.Config, controller.Options{DataPlane: &controller.DataPlane{Image: proxyImage, PullPolicy: corev1.PullIfNotPresent}})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c, err := controller.NewClient(n.Config)
	if err != nil {
		t.Fatal(err)
	}
	const class = "implementation"
	if err := c.Create(ctx, &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Spec: gwv1.GatewayClassSpec{ControllerName: controller.ControllerName}}); err != nil {
		t.Fatal(err)
	}

	rep, _ := runOnNode(t, steps.Options{
		Target:  "cluster",
		Cluster: cluster.Options{Kubeconfig: n.KubeconfigPath, DataPlane: true, MockImage: mockImage, GatewayClassName: class},
		// Enough to show the path end to end; TestLocalNodeConformance runs
		// every feature on the same data plane.
		Tags: "@trace-order,@proxy-pods",
	})
	if rep.Failed() || rep.Summary.Passed == 0 || rep.Summary.Skipped != 0 || rep.Summary.Unsupported != 0 {
		t.Errorf("got %+v, want every trace-order and proxy-pods scenario run and passed on the implementation's own pods", rep.Summary)
	}
}
