// Package kubeenv wraps the local control plane and kind for
// sigs.k8s.io/e2e-framework: env.Funcs that start and stop a cluster with
// the Gateway API and policy CRDs. It is a package of its own so that the
// gwdiag binary, which uses package kube, does not link the e2e-framework.
package kubeenv

import (
	"context"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/gwdiag/gwdiag/clusters/kube"
)

type localKey struct{}

// LocalFromContext returns the local API server started by LocalEnvFuncs.
func LocalFromContext(ctx context.Context) (*kube.Local, bool) {
	l, ok := ctx.Value(localKey{}).(*kube.Local)
	return l, ok
}

// LocalEnvFuncs are e2e-framework set-up and tear-down functions for a local
// etcd + kube-apiserver with the CRDs installed:
//
//	setup, finish := kubeenv.LocalEnvFuncs(kube.LocalOptions{})
//	testenv.Setup(setup).Finish(finish)
//
// Set-up points the environment's client at the new API server.
func LocalEnvFuncs(o kube.LocalOptions) (setup, finish env.Func) {
	setup = func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		l, err := kube.StartLocal(ctx, o)
		if err != nil {
			return ctx, err
		}
		cfg.WithKubeconfigFile(l.KubeconfigPath)
		return context.WithValue(ctx, localKey{}, l), nil
	}
	finish = func(ctx context.Context, _ *envconf.Config) (context.Context, error) {
		l, _ := LocalFromContext(ctx)
		return ctx, l.Stop()
	}
	return setup, finish
}

// InstallCRDsFunc is an e2e-framework env.Func installing the CRDs on the
// environment's cluster.
func InstallCRDsFunc() env.Func {
	return func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		return ctx, kube.InstallCRDs(cfg.Client().RESTConfig())
	}
}
