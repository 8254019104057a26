package clusters_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/gwdiag/gwdiag/clusters/kube"
	"github.com/gwdiag/gwdiag/clusters/kube/kubeenv"
)

// One API server serves every test that brings its own controller (or
// none): they use GatewayClasses of their own and namespaces the target
// generates, so they cannot see each other's objects. It is started and
// stopped by the e2e-framework environment of TestMain, with the env funcs
// of clusters/kube/kubeenv.
var shared struct {
	local *kube.Local
	// skip is why there is none: the binaries cannot be built here.
	skip string
}

func sharedAPIServer(t *testing.T) *kube.Local {
	t.Helper()
	if shared.local == nil {
		t.Skip(shared.skip)
	}
	return shared.local
}

func TestMain(m *testing.M) {
	b, err := kube.EnsureBinaries(context.Background(), nil)
	if errors.Is(err, kube.ErrNoNetwork) {
		// The tests that need the API server skip, saying why; the others run.
		shared.skip = fmt.Sprintf("no local API server: %v (build them where the Go module proxy is reachable: make kube-bins)", err)
		os.Exit(m.Run())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kube-apiserver and etcd:", err)
		os.Exit(1)
	}
	setup, finish := kubeenv.LocalEnvFuncs(kube.LocalOptions{Binaries: b})
	keep := func(ctx context.Context, _ *envconf.Config) (context.Context, error) {
		shared.local, _ = kubeenv.LocalFromContext(ctx)
		return ctx, nil
	}
	testenv := env.New()
	testenv.Setup(setup, keep).Finish(finish)
	os.Exit(testenv.Run(m))
}
