package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"k8s.io/client-go/rest"

	"github.com/gwdiag/gwdiag/clusters/kube/images"
	"github.com/gwdiag/gwdiag/steps/targets/container"
)

// Node is a cluster whose pods run, started by the target for a run
// (`--cluster local-node`): the local node of clusters/kube/node.
type Node struct {
	// Config is cluster-admin.
	Config *rest.Config
	// HostAddr is an address of this machine that pods reach (the CNI
	// bridge's): where services for the proxy listen.
	HostAddr string
	// Stop stops the cluster and removes everything it made.
	Stop func() error
	// LeftBehind says what stays if gwdiag exits without Stop, and how to
	// remove it (nil: nothing to say).
	LeftBehind func() []string
	// CRDsInstalled says the starter installed the Gateway API and policy
	// CRDs (the local node does); otherwise the target installs them.
	CRDsInstalled bool
}

// NodeStarter starts a node with imgs imported into its container
// runtime (pods use them with imagePullPolicy: Never), writing its
// progress to out.
type NodeStarter func(ctx context.Context, imgs []images.Image, out io.Writer) (*Node, error)

// startLocalNode is the local-node provider (localnode.go); nil until it is
// linked in.
var startLocalNode NodeStarter

// Images of the local node's pods, packed from static binaries: the
// reference proxy the controller deploys, and the mock backends. Refs are
// fully qualified, as containerd stores them; pods name them short.
const (
	refproxyImage = "gwdiag/refproxy:dev"
	MockImage     = "gwdiag/conformance-mocks:dev"
)

// NodeImages are the images the local node needs: refproxy from
// RefproxyBinary (or refproxy on $PATH), the mocks from MockBinary run
// with MockArgs.
func (o Options) NodeImages() ([]images.Image, error) {
	ref := o.RefproxyBinary
	if ref == "" {
		p, err := exec.LookPath("refproxy")
		if err != nil {
			return nil, errors.New("cluster.localNode packs the proxy image from a static refproxy: set cluster.refproxyBinary (make build writes .bin/refproxy), or put refproxy on $PATH")
		}
		ref = p
	}
	if o.MockBinary == "" {
		return nil, errors.New("cluster.localNode packs the mock-backend image from a static executable serving the mocks: set cluster.mockBinary (gwdiag itself with mockArgs [conformance, mockbackend], or steps/mock/cmd/mockbackend)")
	}
	for _, b := range []struct{ what, p string }{{"cluster.refproxyBinary", ref}, {"cluster.mockBinary", o.MockBinary}} {
		what, p := b.what, b.p
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if err := container.CheckStatic(p); err != nil {
			return nil, fmt.Errorf("%s %s cannot run in an image FROM scratch: %w; build it with CGO_ENABLED=0 (make build)", what, p, err)
		}
	}
	mock := "/" + filepath.Base(o.MockBinary)
	return []images.Image{
		{Ref: "docker.io/" + refproxyImage, Files: map[string]string{"/refproxy": ref}, Entrypoint: []string{"/refproxy"}},
		{Ref: "docker.io/" + MockImage, Files: map[string]string{mock: o.MockBinary}, Entrypoint: append([]string{mock}, o.MockArgs...)},
	}, nil
}
