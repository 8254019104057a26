// Package kubetest starts a local kube-apiserver for Go tests, building the
// binaries on first use, and skips the test (with the reason) only when
// they cannot be built for lack of network.
package kubetest

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/clusters/kube"
)

// Binaries returns kube-apiserver and etcd, building them if needed within
// the test's deadline. It skips tb when the Go module proxy is unreachable.
func Binaries(tb testing.TB) kube.Binaries {
	tb.Helper()
	ctx := context.Background()
	if t, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := t.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, d.Add(-30*time.Second))
			defer cancel()
		}
	}
	b, err := kube.EnsureBinaries(ctx, nil)
	if errors.Is(err, kube.ErrNoNetwork) {
		tb.Skipf("no local API server: %v (build them where the Go module proxy is reachable: make kube-bins)", err)
	}
	if err != nil {
		tb.Fatalf("kube-apiserver and etcd: %v", err)
	}
	return b
}

// Start starts a local API server with the CRDs installed, stopped when
// the test ends. Set GWDIAG_KUBE_LOGS=1 to see its logs.
func Start(tb testing.TB) *kube.Local {
	tb.Helper()
	o := kube.LocalOptions{Binaries: Binaries(tb)}
	if os.Getenv("GWDIAG_KUBE_LOGS") != "" {
		o.Output = os.Stderr
	}
	l, err := kube.StartLocal(context.Background(), o)
	if err != nil {
		tb.Fatalf("start local API server: %v", err)
	}
	tb.Cleanup(func() {
		if err := l.Stop(); err != nil {
			tb.Errorf("stop local API server: %v", err)
		}
	})
	return l
}
