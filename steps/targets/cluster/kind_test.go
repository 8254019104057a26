package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/kube/kind/kindtest"
	"github.com/gwdiag/gwdiag/clusters/kube/kubetest"
	"github.com/gwdiag/gwdiag/clusters/toolbin"
)

// staticBinary builds testdata/static without cgo: what the images are
// packed from.
func staticBinary(t *testing.T) string {
	t.Helper()
	static := filepath.Join(t.TempDir(), "static")
	if err := toolbin.BuildStatic(context.Background(), "", static, "./testdata/static"); err != nil {
		t.Fatal(err)
	}
	return static
}

// TestKindStart runs the target's Start and Stop with cluster.kind on a
// fake kind whose cluster is a local API server: after the kind commands
// (create with the options' name, image and wait, get kubeconfig, load
// image-archive with the refproxy and mock images), everything is the
// local node's path: CRDs, the reference controller, GatewayClass gwdiag.
// Stop deletes the cluster; so does a failed start.
func TestKindStart(t *testing.T) {
	static := staticBinary(t)
	l := kubetest.Start(t)
	kc, err := os.ReadFile(l.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	dirOf := func(calls []string) string {
		for _, c := range calls {
			if i := strings.Index(c, "--kubeconfig "); i >= 0 {
				return filepath.Dir(c[i+len("--kubeconfig "):])
			}
		}
		return ""
	}

	t.Run("whole start", func(t *testing.T) {
		fake := &kindtest.Fake{Kubeconfig: string(kc)}
		var out strings.Builder
		c := New(Options{Kind: &KindOptions{Name: "conf", Image: "kindest/node:v1.33.1", Kind: fake},
			RefproxyBinary: static, MockBinary: static, MockArgs: []string{"conformance", "mockbackend"}, Output: &out})
		if err := c.Start(context.Background()); err != nil {
			c.Stop(context.Background())
			t.Fatalf("Start: %v\n%s", err, out.String())
		}
		if err := c.client.Get(context.Background(), client.ObjectKey{Name: "gwdiag"}, &gwv1.GatewayClass{}); err != nil {
			t.Errorf("GatewayClass gwdiag after Start: %v", err)
		}
		if host, ok := c.ServiceAddr(); ok {
			t.Errorf("ServiceAddr with a fake kind: got %q, want none (no Docker network)", host)
		}
		if err := c.Stop(context.Background()); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		dir := dirOf(fake.Calls())
		want := []string{"get clusters",
			"create cluster --name conf --image kindest/node:v1.33.1 --wait 5m0s --kubeconfig " + dir + "/kubeconfig",
			"get kubeconfig --name conf",
			"load image-archive " + dir + "/images.tar --name conf",
			"delete cluster --name conf --kubeconfig " + dir + "/kubeconfig"}
		if got := fake.Calls(); !slices.Equal(got, want) {
			t.Errorf("kind commands:\n got %q\nwant %q", got, want)
		}
		if got, want := fake.Loaded(), []string{"docker.io/" + MockImage, "docker.io/" + refproxyImage}; !slices.Equal(got, want) {
			t.Errorf("loaded images: got %q, want %q", got, want)
		}
		if !strings.Contains(out.String(), `kind cluster "conf" ready`) {
			t.Errorf("progress: got %q, want the cluster announced ready", out.String())
		}
	})

	t.Run("create fails", func(t *testing.T) {
		fake := &kindtest.Fake{Fail: map[string]error{"create cluster": errors.New("no node image")}}
		c := New(Options{Kind: &KindOptions{Kind: fake}, RefproxyBinary: static, MockBinary: static})
		err := c.Start(context.Background())
		c.Stop(context.Background())
		if want := "cluster target: kind cluster: kind create cluster --name gwdiag: no node image"; err == nil || err.Error() != want {
			t.Errorf("Start: got %v, want %q", err, want)
		}
		if got := fake.Calls(); len(got) != 3 || !strings.HasPrefix(got[2], "delete cluster --name gwdiag") {
			t.Errorf("kind commands: got %q, want get, create, then delete", got)
		}
	})

	t.Run("static binaries are checked before kind runs", func(t *testing.T) {
		fake := &kindtest.Fake{}
		c := New(Options{Kind: &KindOptions{Kind: fake}, RefproxyBinary: static, MockBinary: "testdata/static/main.go"})
		err := c.Start(context.Background())
		c.Stop(context.Background())
		if err == nil || !strings.Contains(err.Error(), "cannot run in an image FROM scratch") {
			t.Errorf("Start: got %v, want the mock binary refused", err)
		}
		if got := fake.Calls(); len(got) != 0 {
			t.Errorf("kind commands: got %q, want none", got)
		}
	})
}
