package cluster

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gwdiag/gwdiag/clusters/kube/images"
	"github.com/gwdiag/gwdiag/clusters/kube/kind"
	"github.com/gwdiag/gwdiag/golden/duration"
	"github.com/gwdiag/gwdiag/steps/targets/container"
)

// KindOptions start a kind cluster for the run (`--cluster kind`, YAML
// key cluster.kind): the second NodeStarter beside the local node. Only
// the creation differs: the same images are packed and loaded, the same
// controller deploys refproxy, the same data plane runs the scenarios.
// kind needs Docker (or Podman, nerdctl) and a node image it can pull.
type KindOptions struct {
	// Name is the kind cluster's name. Default "gwdiag" (kubectl context
	// kind-gwdiag). A cluster of that name that exists already is used,
	// and never deleted.
	Name string `json:"name,omitempty"`
	// Image is the node image, e.g. kindest/node:v1.33.1 or a mirror's
	// copy; empty: the default of the kind library gwdiag is built with.
	Image string `json:"image,omitempty"`
	// Config is a kind configuration file (registry mirrors, more nodes).
	Config string `json:"config,omitempty"`
	// Wait bounds the wait for a new cluster's control plane. Default 5m.
	Wait duration.Duration `json:"wait,omitempty"`
	// Keep leaves the cluster after the run (also after a failed start),
	// for the next run, which then only loads the images again, or for
	// kubectl (kind export kubeconfig --name <name>).
	Keep bool `json:"keep,omitempty"`

	// Kind runs the kind commands (tests); nil: the kind library.
	Kind kind.Kind `json:"-"`
}

// startsNode tells whether the target starts the cluster whose pods run
// the data plane (the local node or kind), with the reference controller.
func (o Options) startsNode() bool { return o.LocalNode || o.Kind != nil }

// nodeStarter is the NodeStarter of the options when StartNode is nil:
// kind's, or the local node's (nil when not linked in).
func (o Options) nodeStarter() NodeStarter {
	if o.Kind != nil {
		return kindStarter(*o.Kind)
	}
	return startLocalNode
}

// nodeName names the cluster the target starts, for errors.
func (o Options) nodeName() string {
	if o.Kind != nil {
		return "kind cluster"
	}
	return "local node"
}

// kindStarter is the NodeStarter of o: clusters/kube/kind with the images
// loaded, and the gateway of kind's Docker network as the host address
// pods reach.
func kindStarter(o KindOptions) NodeStarter {
	return func(ctx context.Context, imgs []images.Image, out io.Writer) (*Node, error) {
		fmt.Fprintln(out, "cluster target: starting a kind cluster (clusters/kube/kind)")
		c, err := kind.Start(ctx, kind.Options{Name: o.Name, Image: o.Image, Config: o.Config, Wait: time.Duration(o.Wait),
			Keep: o.Keep, Images: imgs, Output: out, Kind: o.Kind})
		if err != nil {
			return nil, err
		}
		host, err := kindHostAddr(ctx, o.Kind)
		if err != nil {
			// The traffic scenarios do not need it; only services the
			// suite runs on this machine (the global rate-limit service) do.
			fmt.Fprintf(out, "cluster target: no address of this machine for kind's pods: %v\n", err)
		}
		fmt.Fprintf(out, "cluster target: kind cluster %q ready in %s (API server %s, pods reach this machine at %q)\n",
			c.Name, c.Took.Round(100*time.Millisecond), c.Config.Host, host)
		return &Node{Config: c.Config, HostAddr: host, Stop: c.Stop}, nil
	}
}

// kindHostAddr is the gateway of kind's Docker network, when it is an
// address of this machine (a local daemon): nodes, and pods through the
// nodes' masquerading, reach services listening there. A fake Kind (tests)
// has no network.
func kindHostAddr(ctx context.Context, fake kind.Kind) (string, error) {
	if fake != nil {
		return "", nil
	}
	return container.NetworkGateway(ctx, kind.Network())
}
