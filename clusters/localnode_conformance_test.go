package clusters_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/clusters/kube/images"
	"github.com/gwdiag/gwdiag/clusters/kube/node"
	"github.com/gwdiag/gwdiag/clusters/toolbin"
	"github.com/gwdiag/gwdiag/steps"
	"github.com/gwdiag/gwdiag/steps/targets/cluster"
)

// TestOnLocalNode runs the tests that need a local node one after the
// other on one node started for them all: the whole cluster profile, the
// faults the suite must catch there (with their bundles' replays), and an
// implementation's own data plane reached through a kubeconfig. One node
// runs per machine at a time (node.LockMachine), so they queued for it
// anyway; each started its own, six starts of 15 s to 2 min each, on the
// longest chain of make test.
func TestOnLocalNode(t *testing.T) {
	t.Parallel()
	n := startLocalNode(t)
	t.Run("conformance", func(t *testing.T) { testLocalNodeConformance(t, n) })
	t.Run("catches faults", func(t *testing.T) { testLocalNodeCatchesFaults(t, n) })
	t.Run("an existing cluster with its data plane", func(t *testing.T) { testExistingClusterWithItsDataPlane(t, n) })
}

// testLocalNodeConformance runs the whole cluster profile on the local
// node: the reference controller deploys refproxy in pods, the mocks run
// in a pod per scenario, and traffic and traces go through port-forwards.
// Every scenario of the profile must run and pass: none skipped for lack
// of a data plane.
func testLocalNodeConformance(t *testing.T, n *localNode) {
	// Every request carries credentials: the run fails if its progress
	// view or report holds one.
	rep, _ := runOnNode(t, steps.Options{Target: "cluster", Cluster: n.opts, PlantCredentials: true,
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

// The refs under which the local node also holds refproxy and the mocks
// for testExistingClusterWithItsDataPlane: an implementation's own images,
// which the suite knows only by the ref it is given.
const implProxyImage, implMockImage = "example.com/implementation/proxy:1", "example.com/conformance/mocks:1"

// localNode is the node of TestOnLocalNode, and the cluster target's
// options that run the suite on it.
type localNode struct {
	*node.Cluster
	// opts are LocalNode options with static refproxy and mockbackend
	// binaries, whose StartNode gives each run this node (and whose Stop
	// leaves it running: TestOnLocalNode stops it at its end).
	opts cluster.Options
}

// startLocalNode builds static refproxy and mockbackend binaries, starts
// a local node holding their images (the cluster target's refs and
// implProxyImage, implMockImage) and stops it when t ends. It skips the
// test when not root: the node needs cgroups, mounts and a bridge.
func startLocalNode(t *testing.T) *localNode {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("the local node needs root (cgroups, mounts, the CNI bridge): run the tests as root, as make test does in CI")
	}
	bins := t.TempDir()
	if err := toolbin.BuildStatic(context.Background(), "", bins+"/", "github.com/gwdiag/gwdiag/refproxy/cmd/refproxy", "github.com/gwdiag/gwdiag/steps/mock/cmd/mockbackend"); err != nil {
		t.Fatal(err)
	}
	o := cluster.Options{LocalNode: true, RefproxyBinary: filepath.Join(bins, "refproxy"), MockBinary: filepath.Join(bins, "mockbackend")}
	imgs, err := o.NodeImages()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := node.StartCluster(ctx, node.ClusterOptions{Images: append(slices.Clone(imgs),
		images.Image{Ref: implProxyImage, Files: map[string]string{"/refproxy": o.RefproxyBinary}, Entrypoint: []string{"/refproxy"}},
		images.Image{Ref: implMockImage, Files: map[string]string{"/mockbackend": o.MockBinary}, Entrypoint: []string{"/mockbackend"}},
	)})
	if err != nil {
		t.Fatalf("start the local node: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop the local node: %v", err)
		}
	})
	t.Logf("local node Ready in %s (waited %s for another): %v", c.Took.Round(100*time.Millisecond), c.Waited.Round(100*time.Millisecond), c.Phases)
	o.StartNode = func(_ context.Context, got []images.Image, out io.Writer) (*cluster.Node, error) {
		if !reflect.DeepEqual(got, imgs) {
			return nil, fmt.Errorf("the test's local node holds the images %+v, the run wants %+v", imgs, got)
		}
		fmt.Fprintf(out, "cluster target: the test's local node (API server %s), started once for TestOnLocalNode\n", c.Config.Host)
		return &cluster.Node{Config: c.Config, HostAddr: c.HostAddr, Stop: func() error { return nil }, CRDsInstalled: true}, nil
	}
	return &localNode{Cluster: c, opts: o}
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
