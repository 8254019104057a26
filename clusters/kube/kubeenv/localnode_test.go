package kubeenv

import (
	"context"
	"errors"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/gwdiag/gwdiag/clusters/kube/node"
)

// TestLocalNodeEnvFuncs: set-up starts the real node and points the
// environment at it (its node is Ready through the environment's client);
// tear-down stops it and removes its state.
func TestLocalNodeEnvFuncs(t *testing.T) {
	setup, finish := LocalNodeEnvFuncs(node.ClusterOptions{})
	cfg := envconf.New()
	ctx, err := setup(context.Background(), cfg)
	if errors.Is(err, node.ErrNotRoot) {
		t.Skipf("skipped: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	c, ok := NodeFromContext(ctx)
	if !ok {
		finish(ctx, cfg)
		t.Fatal("NodeFromContext after set-up: no node in the context")
	}
	var n corev1.Node
	if err := cfg.Client().Resources().Get(ctx, node.NodeName, "", &n); err != nil {
		t.Errorf("node %s through the environment's client: %v", node.NodeName, err)
	}
	if _, err := finish(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.State); !os.IsNotExist(err) {
		t.Errorf("state %s after tear-down: got %v, want it removed", c.State, err)
	}
}
