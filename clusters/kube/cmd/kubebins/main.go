// Command kubebins builds the Kubernetes binaries into <repo>/.bin from the
// nested tools module (make kube-bins): kube-apiserver and etcd, and with
// -node also kubelet, kube-controller-manager and kube-scheduler for the
// local node. It does nothing when they are up to date, and prints where
// they are.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/gwdiag/gwdiag/clusters/kube"
)

func main() {
	node := flag.Bool("node", false, "also build kubelet, kube-controller-manager and kube-scheduler (a local node)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ensure := kube.EnsureBinaries
	if *node {
		ensure = kube.EnsureNodeBinaries
	}
	b, err := ensure(ctx, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kube-bins:", err)
		os.Exit(1)
	}
	fmt.Println(b.Dir)
}
