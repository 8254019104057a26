package clusters_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/clusters/toolbin"
	"github.com/gwdiag/gwdiag/steps"
	"github.com/gwdiag/gwdiag/steps/targets/cluster"
)

// TestKindConformance runs the whole cluster profile on a kind cluster it
// creates and deletes (GWDIAG_KIND_NAME, default gwdiag-test; node image
// GWDIAG_KIND_IMAGE, default kind's): the same run as
// TestOnLocalNode/conformance but for the creation. It needs Docker and a
// node image the machine can pull, so it runs only with
// GWDIAG_KIND_TESTS=1. (gwdiag's own CI machine has no registry: there it
// is skipped, and the kind path is tested with a fake kind in
// clusters/kube/kind and steps/targets/cluster.)
func TestKindConformance(t *testing.T) {
	if os.Getenv("GWDIAG_KIND_TESTS") == "" {
		t.Skip("needs Docker and a pullable kind node image, and takes minutes: set GWDIAG_KIND_TESTS=1 (or run make conformance-cluster CLUSTER=kind)")
	}
	bins := t.TempDir()
	if err := toolbin.BuildStatic(context.Background(), "", bins+"/", "github.com/gwdiag/gwdiag/refproxy/cmd/refproxy", "github.com/gwdiag/gwdiag/steps/mock/cmd/mockbackend"); err != nil {
		t.Fatal(err)
	}
	name := os.Getenv("GWDIAG_KIND_NAME")
	if name == "" {
		name = "gwdiag-test"
	}
	var out strings.Builder
	rep, err := steps.Run(context.Background(), steps.Options{
		Target: "cluster",
		Cluster: cluster.Options{Kind: &cluster.KindOptions{Name: name, Image: os.Getenv("GWDIAG_KIND_IMAGE")},
			RefproxyBinary: filepath.Join(bins, "refproxy"), MockBinary: filepath.Join(bins, "mockbackend")},
		Output: &out,
	})
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed() || rep.Summary.Skipped != 0 || rep.Summary.Unsupported != 0 {
		t.Errorf("got %+v, want every scenario of the cluster profile run and passed", rep.Summary)
	}
}
