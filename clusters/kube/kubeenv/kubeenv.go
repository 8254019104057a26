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
	return envFuncs(localKey{}, func(ctx context.Context) (*kube.Local, string, error) {
		l, err := kube.StartLocal(ctx, o)
		if err != nil {
			return nil, "", err
		}
		return l, l.KubeconfigPath, nil
	}, (*kube.Local).Stop)
}

// envFuncs are the set-up and tear-down of one cluster, whatever starts it
// (the local API server, the local node, kind): set-up starts it, points
// the environment's client at its kubeconfig and keeps it in the context
// under key; tear-down stops the one the context holds, if any.
func envFuncs[C any](key any, start func(context.Context) (C, string, error), stop func(C) error) (setup, finish env.Func) {
	setup = func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		c, kubeconfig, err := start(ctx)
		if err != nil {
			return ctx, err
		}
		cfg.WithKubeconfigFile(kubeconfig)
		return context.WithValue(ctx, key, c), nil
	}
	finish = func(ctx context.Context, _ *envconf.Config) (context.Context, error) {
		c, ok := ctx.Value(key).(C)
		if !ok {
			return ctx, nil
		}
		return ctx, stop(c)
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
