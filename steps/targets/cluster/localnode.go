package cluster

import (
	"context"
	"fmt"
	"io"
	"strings"
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
	fmt.Fprintf(out, "cluster target: local node start: %s\n", joinPhases(c.Phases))
	stop := func() error {
		began := time.Now()
		err := c.Stop()
		fmt.Fprintf(out, "cluster target: local node stopped in %s\n", time.Since(began).Round(10*time.Millisecond))
		return err
	}
	return &Node{Config: c.Config, HostAddr: c.HostAddr, Stop: stop, LeftBehind: c.LeftBehind, CRDsInstalled: true}, nil
}

// joinPhases is "a 1.2s, b 0.3s".
func joinPhases(ps []node.Phase) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return strings.Join(out, ", ")
}
