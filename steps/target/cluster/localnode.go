package cluster

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gwdiag/gwdiag/clusters/kube/images"
	"github.com/gwdiag/gwdiag/clusters/kube/node"
)

// The local-node provider: clusters/kube/node, which imports nothing of
// the e2e-framework, so the gwdiag binary can link it.
func init() { startLocalNode = startNodeCluster }

// startNodeCluster starts clusters/kube/node's cluster. Its processes'
// logs stay in its state directory (and are quoted in its start errors);
// out gets one line of progress.
func startNodeCluster(ctx context.Context, imgs []images.Image, out io.Writer) (*Node, error) {
	start := time.Now()
	fmt.Fprintln(out, "cluster target: starting the local node (clusters/kube/node)")
	c, err := node.StartCluster(ctx, node.ClusterOptions{Images: imgs})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "cluster target: local node Ready in %s (API server %s, pods reach this machine at %s)\n",
		time.Since(start).Round(100*time.Millisecond), c.Config.Host, c.HostAddr)
	return &Node{Config: c.Config, HostAddr: c.HostAddr, Stop: c.Stop, LeftBehind: c.LeftBehind}, nil
}
