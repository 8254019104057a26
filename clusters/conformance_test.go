package clusters_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/controller"
	"github.com/gwdiag/gwdiag/clusters/kube/kubetest"
	"github.com/gwdiag/gwdiag/steps"
	"github.com/gwdiag/gwdiag/steps/targets/cluster"
)

// TestClusterConformance runs the condition-status scenarios against the
// cluster target on a local kube-apiserver with the reference controller
// in-process: the reference must pass all of them. No pod runs there, so
// the profile's traffic features are skipped, each scenario saying why.
func TestClusterConformance(t *testing.T) {
	b := kubetest.Binaries(t) // builds or skips for lack of network, before the suite starts
	t.Setenv("GWDIAG_KUBE_BIN", b.Dir)
	var out strings.Builder
	rep, err := steps.Run(context.Background(), steps.Options{
		Target:  "cluster",
		Cluster: cluster.Options{Local: true},
		Output:  &out,
	})
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed() {
		t.Errorf("the reference controller failed %d condition scenarios", rep.Summary.Failed)
	}
	if rep.Summary.Passed != 5 || rep.Summary.Unsupported != 0 || rep.Summary.Skipped == 0 {
		t.Errorf("got %+v, want the 5 condition scenarios (4 core, 1 extended) passed and the traffic ones skipped", rep.Summary)
	}
	for _, f := range rep.Features {
		for _, s := range f.Scenarios {
			if s.Result == steps.Skipped && !strings.Contains(s.Message, "capability data-plane") {
				t.Errorf("%s: skipped with %q, want the missing data plane named", s.Name, s.Message)
			}
		}
	}
	// No claims were given: they come from what the reference controller
	// writes in the GatewayClass's status, and the report says so.
	wantClaims := []steps.FeatureName{steps.FeaturePolicyConditionReasons, steps.FeatureRateLimitPerKey}
	if c := rep.Claims; !slices.Equal(c.SupportedFeatures, wantClaims) || c.InferredFrom != "GatewayClass gwdiag status.supportedFeatures" {
		t.Errorf("claims: got %+v, want %v inferred from the GatewayClass gwdiag's status.supportedFeatures", c, wantClaims)
	}
	if want := "claims: none given; inferred from GatewayClass gwdiag status.supportedFeatures: [policy-condition-reasons ratelimit-per-key]"; !strings.Contains(out.String(), want) {
		t.Errorf("progress view lacks %q", want)
	}
	if rep.Target != "cluster" {
		t.Errorf("report target: got %q, want cluster", rep.Target)
	}
}

// TestClusterConformanceFails shows the suite able to fail on a cluster:
// against a cluster whose GatewayClass no running controller serves (the
// local API server reached through its kubeconfig, as any cluster would
// be), every condition scenario fails and says why.
func TestClusterConformanceFails(t *testing.T) {
	// Not parallel: the controllers of other tests of this API server would
	// attach its policies (a policy names no class), and it wants none.
	l := sharedAPIServer(t)
	c, err := controller.NewClient(l.Config)
	if err != nil {
		t.Fatal(err)
	}
	gc := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "unserved"}, Spec: gwv1.GatewayClassSpec{ControllerName: "example.com/nobody"}}
	if err := c.Create(context.Background(), gc); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep, err := steps.Run(context.Background(), steps.Options{
		Target: "cluster",
		Cluster: cluster.Options{Kubeconfig: l.KubeconfigPath, GatewayClassName: "unserved",
			ConditionTimeout: steps.Duration(2 * time.Second)},
		Output:    &out,
		BundleDir: t.TempDir(),
	})
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Summary.Failed < 3 || rep.Summary.Passed != 0 || len(rep.Profiles) != 1 || rep.Profiles[0].Core.Result != steps.Failed {
		t.Errorf("with no controller: got %+v %+v, want every core condition scenario failed", rep.Summary, rep.Profiles)
	}
	if want := `no status conditions at the current generation within 2s`; !strings.Contains(out.String(), want) {
		t.Errorf("progress view does not say why: want %q in\n%s", want, out.String())
	}
	// Each failure's bundle holds the resources the scenario applied, as
	// the API server held them at the failure.
	for _, f := range rep.Features {
		for _, s := range f.Scenarios {
			if s.Result != steps.Failed {
				continue
			}
			res, err := os.ReadFile(filepath.Join(s.Bundle, "resources.yaml"))
			if err != nil || !strings.Contains(string(res), "kind: Gateway\n") || !strings.Contains(string(res), "gatewayClassName: unserved") || strings.Contains(string(res), "managedFields") {
				t.Errorf("%s: bundle %q: resources.yaml %v, want the applied Gateway as it is, without managed fields:\n%s", s.Name, s.Bundle, err, res)
			}
		}
	}
}

// TestClusterTargetMissingGatewayClass checks Start installs (here:
// updates) the CRDs when asked, then names the missing class.
func TestClusterTargetMissingGatewayClass(t *testing.T) {
	l := sharedAPIServer(t)
	target := cluster.New(cluster.Options{Kubeconfig: l.KubeconfigPath, GatewayClassName: "agentgateway", InstallCRDs: true})
	err := target.Start(context.Background())
	defer target.Stop(context.Background())
	if err == nil || !strings.Contains(err.Error(), `GatewayClass "agentgateway"`) {
		t.Errorf("Start: got %v, want an error naming GatewayClass \"agentgateway\"", err)
	}
}

// TestExampleOptions loads the example option files of clusters/examples,
// so a renamed field cannot leave them silently stale.
func TestExampleOptions(t *testing.T) {
	tests := []struct {
		file string
		want cluster.Options
	}{
		{"examples/local.yaml", cluster.Options{Local: true}},
		{"examples/local-node.yaml", cluster.Options{LocalNode: true, ServeTimeout: steps.Duration(2 * time.Minute), ConditionTimeout: steps.Duration(30 * time.Second)}},
		{"examples/kind.yaml", cluster.Options{Kind: &cluster.KindOptions{Name: "gwdiag", Wait: steps.Duration(5 * time.Minute)},
			ServeTimeout: steps.Duration(2 * time.Minute), ConditionTimeout: steps.Duration(30 * time.Second)}},
		{"examples/agentgateway.yaml", cluster.Options{GatewayClassName: "agentgateway", PolicyGroup: "agentgateway.dev",
			PolicyVersion: "v1alpha1", PolicyKind: "AgentgatewayPolicy", ConditionTimeout: steps.Duration(time.Minute)}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			o, err := steps.LoadOptions(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			if o.Target != "cluster" || len(o.Profiles) != 1 || o.Profiles[0] != steps.ProfileCluster {
				t.Errorf("target %q profiles %v, want cluster and [cluster]", o.Target, o.Profiles)
			}
			if !reflect.DeepEqual(o.Cluster, tt.want) {
				t.Errorf("cluster options: got %+v, want %+v", o.Cluster, tt.want)
			}
		})
	}
}
