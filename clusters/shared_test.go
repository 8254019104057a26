package clusters_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/gwdiag/gwdiag/clusters/kube"
	"github.com/gwdiag/gwdiag/clusters/kube/kubetest"
)

// One API server serves every test that brings its own controller (or
// none): they use GatewayClasses of their own and namespaces the target
// generates, so they cannot see each other's objects.
var shared struct {
	once  sync.Once
	local *kube.Local
	err   error
}

func sharedAPIServer(t *testing.T) *kube.Local {
	t.Helper()
	b := kubetest.Binaries(t) // skips, in every test, when they cannot be built
	shared.once.Do(func() {
		shared.local, shared.err = kube.StartLocal(context.Background(), kube.LocalOptions{Binaries: b})
	})
	if shared.err != nil {
		t.Fatalf("start local API server: %v", shared.err)
	}
	return shared.local
}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := shared.local.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop local API server:", err)
		code = 1
	}
	os.Exit(code)
}
