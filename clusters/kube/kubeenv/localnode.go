package kubeenv

import (
	"context"

	"sigs.k8s.io/e2e-framework/pkg/env"

	"github.com/gwdiag/gwdiag/clusters/kube/node"
)

type nodeKey struct{}

// NodeFromContext returns the local node started by LocalNodeEnvFuncs.
func NodeFromContext(ctx context.Context) (*node.Cluster, bool) {
	c, ok := ctx.Value(nodeKey{}).(*node.Cluster)
	return c, ok
}

// LocalNodeEnvFuncs are e2e-framework set-up and tear-down functions for a
// real single-node cluster on this machine (clusters/kube/node: root, one
// at a time per machine), with the CRDs installed and o.Images imported:
//
//	setup, finish := kubeenv.LocalNodeEnvFuncs(node.ClusterOptions{Images: imgs})
//	testenv.Setup(setup).Finish(finish)
//
// Set-up points the environment's client at the node's API server;
// tear-down stops the node and removes everything it made.
func LocalNodeEnvFuncs(o node.ClusterOptions) (setup, finish env.Func) {
	return envFuncs(nodeKey{}, func(ctx context.Context) (*node.Cluster, string, error) {
		c, err := node.StartCluster(ctx, o)
		if err != nil {
			return nil, "", err
		}
		return c, c.KubeconfigPath, nil
	}, (*node.Cluster).Stop)
}
