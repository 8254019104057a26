package kubeenv

import (
	"context"
	"errors"

	"sigs.k8s.io/e2e-framework/pkg/env"

	"github.com/gwdiag/gwdiag/clusters/kube"
	"github.com/gwdiag/gwdiag/clusters/kube/kind"
)

type kindKey struct{}

// KindFromContext returns the kind cluster started by KindEnvFuncs.
func KindFromContext(ctx context.Context) (*kind.Cluster, bool) {
	c, ok := ctx.Value(kindKey{}).(*kind.Cluster)
	return c, ok
}

// KindEnvFuncs are e2e-framework set-up and tear-down functions for a kind
// cluster with o.Images loaded and the CRDs installed, started by
// clusters/kube/kind exactly as `gwdiag conformance run --cluster kind`
// starts it (kind as a Go library; see that package for why not
// e2e-framework's support/kind, which runs the kind executable):
//
//	setup, finish := kubeenv.KindEnvFuncs(kind.Options{Name: "e2e", Images: imgs})
//	testenv.Setup(setup).Finish(finish)
//
// Set-up points the environment's client at the cluster; tear-down
// deletes it, unless it existed before or o.Keep is set. It needs Docker
// (or Podman, nerdctl) and a node image the machine can pull.
func KindEnvFuncs(o kind.Options) (setup, finish env.Func) {
	return envFuncs(kindKey{}, func(ctx context.Context) (*kind.Cluster, string, error) {
		c, err := kind.Start(ctx, o)
		if err != nil {
			return nil, "", err
		}
		if err := kube.InstallCRDs(c.Config); err != nil {
			return nil, "", errors.Join(err, c.Stop())
		}
		return c, c.KubeconfigPath, nil
	}, (*kind.Cluster).Stop)
}
