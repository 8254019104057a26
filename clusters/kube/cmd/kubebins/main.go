// Command kubebins builds kube-apiserver and etcd into <repo>/.bin from the
// nested tools module (make kube-bins). It does nothing when they are up to
// date, and prints where they are.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/gwdiag/gwdiag/clusters/kube"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	b, err := kube.EnsureBinaries(ctx, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kube-bins:", err)
		os.Exit(1)
	}
	fmt.Println(b.APIServer())
	fmt.Println(b.Etcd())
}
