// Package refproxytest starts the reference proxy in-process for tests of
// other packages (the CLI, the end-to-end rate-limit tests), so that each of
// them does not write its own start-up and clean-up.
package refproxytest

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/refproxy"
	"github.com/gwdiag/gwdiag/refproxy/config"
)

// Start runs a proxy for the standalone config cfgYAML until the test ends.
// The admin server takes a free loopback port and logs are discarded; binds
// with `port: 0` get free ports (Proxy.BindAddrs). opts come after those
// defaults, so they may override them. Shutdown errors fail the test; its
// bound is generous, since a loaded machine slows a graceful shutdown
// without anything being wrong, and only a hang should fail.
func Start(t testing.TB, cfgYAML string, opts ...refproxy.Option) *refproxy.Proxy {
	t.Helper()
	cfg, err := config.Parse(strings.ReplaceAll(t.Name(), "/", "_")+".yaml", []byte(cfgYAML))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, cfgYAML)
	}
	opts = append([]refproxy.Option{refproxy.WithAdminAddr("127.0.0.1:0"), refproxy.WithLogOutput(io.Discard)}, opts...)
	p, err := refproxy.New(cfg, opts...)
	if err != nil {
		t.Fatalf("refproxy.New: %v", err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatalf("refproxy Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("refproxy Shutdown: %v", err)
		}
	})
	return p
}
