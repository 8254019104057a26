package kind_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/clusters/kube/images"
	"github.com/gwdiag/gwdiag/clusters/kube/kind"
	"github.com/gwdiag/gwdiag/clusters/kube/kind/kindtest"
)

// TestStart: the kind commands Start and Stop run, in order, for a new
// cluster, a kept one, one that exists already, and failures at each
// step. A cluster Start created is deleted at Stop and after a failed
// start (unless kept); one it found never is.
func TestStart(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "refproxy")
	if err := os.WriteFile(bin, []byte("#!/bin/false\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	imgs := []images.Image{
		{Ref: "docker.io/gwdiag/refproxy:dev", Files: map[string]string{"/refproxy": bin}, Entrypoint: []string{"/refproxy"}},
		{Ref: "docker.io/gwdiag/conformance-mocks:dev", Files: map[string]string{"/gwdiag": bin}, Entrypoint: []string{"/gwdiag", "conformance", "mockbackend"}},
	}
	const (
		create = "create cluster --name gwdiag --wait 5m0s --kubeconfig {dir}/kubeconfig"
		get    = "get kubeconfig --name gwdiag"
		load   = "load image-archive {dir}/images.tar --name gwdiag"
		del    = "delete cluster --name gwdiag --kubeconfig {dir}/kubeconfig"
	)
	for _, tc := range []struct {
		name     string
		opts     kind.Options
		existing []string
		fail     string
		ctxDone  bool
		// start and stop are the commands Start and Stop run.
		start, stop []string
		wantErr     string
	}{
		{name: "new cluster", start: []string{"get clusters", create, get, load}, stop: []string{del}},
		{name: "node image, config file and wait",
			opts: kind.Options{Name: "e2e", Image: "kindest/node:v1.33.1", Config: "/etc/kind.yaml", Wait: time.Minute},
			start: []string{"get clusters",
				"create cluster --name e2e --image kindest/node:v1.33.1 --config /etc/kind.yaml --wait 1m0s --kubeconfig {dir}/kubeconfig",
				"get kubeconfig --name e2e", "load image-archive {dir}/images.tar --name e2e"},
			stop: []string{"delete cluster --name e2e --kubeconfig {dir}/kubeconfig"}},
		{name: "keep", opts: kind.Options{Keep: true}, start: []string{"get clusters", create, get, load}},
		{name: "existing cluster is used, never deleted", existing: []string{"other", "gwdiag"},
			start: []string{"get clusters", get, load}},
		{name: "existing cluster with keep", opts: kind.Options{Keep: true}, existing: []string{"gwdiag"},
			start: []string{"get clusters", get, load}},
		{name: "no images to load", opts: kind.Options{Images: []images.Image{}},
			start: []string{"get clusters", create, get}, stop: []string{del}},
		{name: "create fails: deleted", fail: "create cluster", start: []string{"get clusters", create, del},
			wantErr: "kind create cluster --name gwdiag: fake failure"},
		{name: "load fails: deleted", fail: "load image-archive", start: []string{"get clusters", create, get, load, del},
			wantErr: "kind load image-archive --name gwdiag: fake failure"},
		{name: "load fails with keep: kept", opts: kind.Options{Keep: true}, fail: "load image-archive",
			start: []string{"get clusters", create, get, load}, wantErr: "fake failure"},
		{name: "load fails on an existing cluster: not deleted", existing: []string{"gwdiag"}, fail: "load image-archive",
			start: []string{"get clusters", get, load}, wantErr: "fake failure"},
		{name: "kubeconfig fails: deleted", fail: "get kubeconfig", start: []string{"get clusters", create, get, del},
			wantErr: "kind get kubeconfig --name gwdiag: fake failure"},
		{name: "no kind runtime", fail: "get clusters", start: []string{"get clusters"},
			wantErr: "kind get clusters: fake failure"},
		{name: "cancelled before create", ctxDone: true, start: []string{"get clusters"}, wantErr: "context canceled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &kindtest.Fake{Existing: tc.existing}
			if tc.fail != "" {
				f.Fail = map[string]error{tc.fail: errors.New("fake failure")}
			}
			o := tc.opts
			if o.Images == nil {
				o.Images = imgs
			}
			o.Kind = f
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.ctxDone {
				cancel()
			}
			c, err := kind.Start(ctx, o)
			dir := tempDirOf(f.Calls())
			expand := func(lines []string) []string {
				out := make([]string, len(lines))
				for i, l := range lines {
					out[i] = strings.ReplaceAll(l, "{dir}", dir)
				}
				return out
			}
			if got, want := f.Calls(), expand(tc.start); !slices.Equal(got, want) {
				t.Errorf("kind commands of Start:\n got %q\nwant %q", got, want)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Start: got error %v, want one containing %q", err, tc.wantErr)
				}
				if c != nil {
					t.Errorf("Start failed but returned a cluster")
				}
				if dir != "" {
					if _, err := os.Stat(dir); !os.IsNotExist(err) {
						t.Errorf("run directory %s after a failed start: got %v, want it removed", dir, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			if c.Config.Host != "https://127.0.0.1:41234" {
				t.Errorf("rest config host: got %q, want the kubeconfig's server", c.Config.Host)
			}
			if b, err := os.ReadFile(c.KubeconfigPath); err != nil || string(b) != kindtest.Kubeconfig {
				t.Errorf("kubeconfig file %s: got %q, %v; want what kind get kubeconfig printed", c.KubeconfigPath, b, err)
			}
			if len(o.Images) > 0 {
				want := []string{"docker.io/gwdiag/conformance-mocks:dev", "docker.io/gwdiag/refproxy:dev"}
				if !slices.Equal(f.Loaded(), want) {
					t.Errorf("images in the loaded tarball: got %q, want %q", f.Loaded(), want)
				}
			}
			n := len(f.Calls())
			if err := c.Stop(); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			if err := c.Stop(); err != nil {
				t.Fatalf("second Stop: %v", err)
			}
			if got, want := f.Calls()[n:], expand(tc.stop); !slices.Equal(got, want) {
				t.Errorf("kind commands of Stop (twice):\n got %q\nwant %q", got, want)
			}
			if _, err := os.Stat(c.KubeconfigPath); !os.IsNotExist(err) {
				t.Errorf("kubeconfig after Stop: got %v, want it removed", err)
			}
		})
	}
}

// tempDirOf is the run directory named in the kind commands (the
// kubeconfig's or the tarball's), "" when none names it.
func tempDirOf(calls []string) string {
	for _, c := range calls {
		for _, w := range strings.Fields(c) {
			if strings.HasSuffix(w, "/kubeconfig") || strings.HasSuffix(w, "/images.tar") {
				return filepath.Dir(w)
			}
		}
	}
	return ""
}

// TestNetwork: the Docker network is kind's, or the one
// $KIND_EXPERIMENTAL_DOCKER_NETWORK names, as kind reads it.
func TestNetwork(t *testing.T) {
	t.Setenv("KIND_EXPERIMENTAL_DOCKER_NETWORK", "")
	if got := kind.Network(); got != "kind" {
		t.Errorf("kind.Network(): got %q, want kind", got)
	}
	t.Setenv("KIND_EXPERIMENTAL_DOCKER_NETWORK", "ci-kind")
	if got := kind.Network(); got != "ci-kind" {
		t.Errorf("kind.Network() with KIND_EXPERIMENTAL_DOCKER_NETWORK=ci-kind: got %q", got)
	}
}

// TestLibraryCreateFails runs sigs.k8s.io/kind itself (the default Kind)
// against this machine's Docker with a node image no registry serves: the
// create fails with kind's pull error, and nothing is left behind (no
// node container, no kubeconfig). It is the part of the real path that
// runs without a registry; creating a cluster needs one (see
// TestKindConformance in package clusters).
func TestLibraryCreateFails(t *testing.T) {
	if err := exec.Command("docker", "info").Run(); err != nil {
		t.Skipf("no Docker daemon for kind's docker provider (docker info: %v)", err)
	}
	t.Setenv("KIND_EXPERIMENTAL_PROVIDER", "docker")
	name := fmt.Sprintf("gwdiag-test-%d", os.Getpid())
	var out strings.Builder
	c, err := kind.Start(context.Background(), kind.Options{Name: name, Image: "gwdiag.invalid/no-such-kind-node:v0", Wait: time.Second, Output: &out})
	if err == nil {
		c.Stop()
		t.Fatal("Start with a node image no registry serves: got no error")
	}
	if want := "kind create cluster --name " + name + ": failed to pull image"; !strings.Contains(err.Error(), want) {
		t.Errorf("Start: got error %q, want one containing %q", err, want)
	}
	if !strings.Contains(out.String(), "kind: creating cluster "+strconv.Quote(name)) {
		t.Errorf("progress: got %q, want the creation announced", out.String())
	}
	clusters, err := kind.Library(io.Discard).List()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(clusters, name) {
		t.Errorf("kind get clusters after the failed start: got %q, want %s gone", clusters, name)
	}
	ps, _ := exec.Command("docker", "ps", "-a", "--filter", "label=io.x-k8s.kind.cluster="+name, "--format", "{{.Names}}").Output()
	if s := strings.TrimSpace(string(ps)); s != "" {
		t.Errorf("containers of cluster %s after the failed start: %s", name, s)
	}
}
