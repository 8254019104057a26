package clusters_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/steps"
	"github.com/gwdiag/gwdiag/steps/targets/cluster"
)

// TestLocalNodeConformance runs the whole cluster profile on the local
// node: the reference controller deploys refproxy in pods, the mocks run
// in a pod per scenario, and traffic and traces go through port-forwards.
// Every scenario of the profile must run and pass: none skipped for lack
// of a data plane.
func TestLocalNodeConformance(t *testing.T) {
	t.Parallel()
	// Every request carries credentials: the run fails if its progress
	// view or report holds one.
	rep, _ := runOnNode(t, steps.Options{Target: "cluster", Cluster: localNode(t), PlantCredentials: true,
		Report: filepath.Join(t.TempDir(), "report.yaml")})
	if rep.Failed() || rep.Summary.Skipped != 0 || rep.Summary.Unsupported != 0 {
		t.Errorf("got %+v, want every scenario of the cluster profile run and passed", rep.Summary)
	}
	var profile *steps.ConformanceProfile
	for i := range steps.Profiles {
		if steps.Profiles[i].Name == steps.ProfileCluster {
			profile = &steps.Profiles[i]
		}
	}
	for _, f := range rep.Features {
		if f.Profile != steps.ProfileCluster || !slices.Contains(slices.Concat(profile.CoreFeatures, profile.ExtendedFeatures), f.Name) {
			t.Errorf("feature %s reported under %q: a local-node run covers the cluster profile only", f.Name, f.Profile)
		}
	}
	for _, f := range slices.Concat(profile.CoreFeatures, profile.ExtendedFeatures) {
		if !slices.ContainsFunc(rep.Features, func(r steps.FeatureReport) bool { return r.Name == f && r.Result == steps.Passed }) {
			t.Errorf("feature %s of the cluster profile did not pass; report %+v", f, rep.Features)
		}
	}
}

// localNode returns the cluster options of the local node, with static
// refproxy and mockbackend binaries built for its images. It skips the
// test when not root: the node needs cgroups, mounts and a bridge.
func localNode(t *testing.T) cluster.Options {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("the local node needs root (cgroups, mounts, the CNI bridge): run the tests as root, as make test does in CI")
	}
	bins := t.TempDir()
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bins+"/", "github.com/gwdiag/gwdiag/refproxy/cmd/refproxy", "github.com/gwdiag/gwdiag/steps/mock/cmd/mockbackend")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the static refproxy and mockbackend: %v\n%s", err, out)
	}
	return cluster.Options{LocalNode: true, RefproxyBinary: filepath.Join(bins, "refproxy"), MockBinary: filepath.Join(bins, "mockbackend")}
}

// runOnNode runs the suite with o on the local node and returns its
// report and progress view, which it logs.
func runOnNode(t *testing.T, o steps.Options) (*steps.ConformanceReport, string) {
	t.Helper()
	var out strings.Builder
	o.Output = &out
	rep, err := steps.Run(context.Background(), o)
	t.Log(out.String())
	if err != nil && strings.Contains(err.Error(), "without the local-node provider") {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return rep, out.String()
}
