package kubeenv

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/gwdiag/gwdiag/clusters/kube/images"
	"github.com/gwdiag/gwdiag/clusters/kube/kind"
	"github.com/gwdiag/gwdiag/clusters/kube/kind/kindtest"
	"github.com/gwdiag/gwdiag/clusters/kube/kubetest"
)

// TestKindEnvFuncs runs the kind env funcs on a fake kind whose cluster is
// a local API server: set-up creates the cluster, loads the images and
// installs the CRDs, and points the environment at it; tear-down deletes
// it. A failed load deletes it at set-up.
func TestKindEnvFuncs(t *testing.T) {
	l := kubetest.Start(t)
	kc, err := os.ReadFile(l.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "refproxy")
	os.WriteFile(bin, []byte("not run here"), 0o755)
	imgs := []images.Image{{Ref: "docker.io/gwdiag/refproxy:dev", Files: map[string]string{"/refproxy": bin}, Entrypoint: []string{"/refproxy"}}}

	fake := &kindtest.Fake{Kubeconfig: string(kc)}
	setup, finish := KindEnvFuncs(kind.Options{Name: "e2e", Images: imgs, Kind: fake})
	cfg := envconf.New()
	ctx, err := setup(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := KindFromContext(ctx)
	if !ok {
		finish(ctx, cfg)
		t.Fatal("KindFromContext after set-up: no kind cluster in the context")
	}
	if got := cfg.KubeconfigFile(); got != c.KubeconfigPath {
		t.Errorf("environment kubeconfig: got %q, want %q", got, c.KubeconfigPath)
	}
	scheme := runtime.NewScheme()
	apiextensionsv1.AddToScheme(scheme)
	cl, err := client.New(cfg.Client().RESTConfig(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Get(ctx, client.ObjectKey{Name: "gatewaypolicies.gwdiag.dev"}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
		t.Errorf("CRD through the environment's client: %v", err)
	}
	if got := fake.Loaded(); len(got) != 1 || got[0] != "docker.io/gwdiag/refproxy:dev" {
		t.Errorf("loaded images: got %q", got)
	}
	if _, err := finish(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	calls := fake.Calls()
	if len(calls) != 5 || !strings.HasPrefix(calls[1], "create cluster --name e2e ") || !strings.HasPrefix(calls[3], "load image-archive ") ||
		!strings.HasPrefix(calls[4], "delete cluster --name e2e ") {
		t.Errorf("kind commands: got %q, want get clusters, create, get kubeconfig, load, delete", calls)
	}

	failing := &kindtest.Fake{Kubeconfig: string(kc), Fail: map[string]error{"load image-archive": errors.New("no space left")}}
	setup, _ = KindEnvFuncs(kind.Options{Images: imgs, Kind: failing})
	if _, err := setup(context.Background(), envconf.New()); err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Errorf("set-up with a failing load: got %v", err)
	}
	if calls := failing.Calls(); !strings.HasPrefix(calls[len(calls)-1], "delete cluster --name gwdiag ") {
		t.Errorf("kind commands after a failed set-up: got %q, want a delete last", calls)
	}
}
