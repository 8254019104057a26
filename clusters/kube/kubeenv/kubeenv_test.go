package kubeenv

import (
	"context"
	"os"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/gwdiag/gwdiag/clusters/kube"
	"github.com/gwdiag/gwdiag/clusters/kube/kubetest"
)

// TestLocalEnvFuncs runs the e2e-framework set-up and tear-down functions:
// set-up points the environment at a live API server with the CRDs,
// tear-down stops it and removes its kubeconfig.
func TestLocalEnvFuncs(t *testing.T) {
	setup, finish := LocalEnvFuncs(kube.LocalOptions{Binaries: kubetest.Binaries(t)})
	cfg := envconf.New()
	ctx, err := setup(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, ok := LocalFromContext(ctx)
	if !ok {
		finish(ctx, cfg)
		t.Fatal("LocalFromContext after set-up: no local API server in the context")
	}
	if got := cfg.KubeconfigFile(); got != l.KubeconfigPath {
		t.Errorf("environment kubeconfig: got %q, want %q", got, l.KubeconfigPath)
	}
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg.Client().RESTConfig(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gatewaypolicies.gwdiag.dev", "httproutes.gateway.networking.k8s.io"} {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
			t.Errorf("CRD %s through the environment's client: %v", name, err)
		}
	}
	if _, err := finish(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(l.KubeconfigPath); !os.IsNotExist(err) {
		t.Errorf("kubeconfig after tear-down: got %v, want it removed", err)
	}
}
