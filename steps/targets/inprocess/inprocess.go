// Package inprocess is the inprocess target: the reference proxy run as a
// library in the suite's own process, one instance per scenario.
package inprocess

import (
	"context"
	"fmt"

	"github.com/gwdiag/gwdiag/refproxy"
	"github.com/gwdiag/gwdiag/refproxy/config"
	"github.com/gwdiag/gwdiag/steps/procout"

	"github.com/gwdiag/gwdiag/steps/targets"
	"github.com/gwdiag/gwdiag/steps/targets/local"
)

// InProcess runs the reference proxy as a library, one instance per
// scenario, configured from the same standalone YAML a process target writes.
type InProcess struct {
	opts []refproxy.Option
}

// New returns the in-process target; opts are given to every proxy it
// starts, after its own (tests: a fault of the proxy's own making).
func New(opts ...refproxy.Option) *InProcess { return &InProcess{opts: opts} }

// Name implements Target.
func (*InProcess) Name() string { return "inprocess" }

// Start implements Target; there is nothing shared to start.
func (*InProcess) Start(context.Context) error { return nil }

// Stop implements Target.
func (*InProcess) Stop(context.Context) error { return nil }

// ServiceAddr implements targets.ServiceHost: the proxy runs on this
// machine.
func (*InProcess) ServiceAddr() (string, bool) { return "127.0.0.1", true }

// Capabilities implements Target.
func (*InProcess) Capabilities() []string {
	return []string{targets.CapabilityStandalone, targets.CapabilityDataPlane}
}

// Configure implements Target.
func (t *InProcess) Configure(ctx context.Context, setup targets.Setup) (targets.Deployment, error) {
	// Port 0 everywhere: the kernel picks at bind time, so no other test can
	// take a port between choosing and binding it.
	d, yml, err := local.Prepare(setup, false, local.StyleBinds)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Parse("conformance.yaml", yml)
	if err != nil {
		d.Stop(ctx)
		return nil, fmt.Errorf("inprocess: config rejected: %w\n%s", err, yml)
	}
	// The suite reports per scenario; the proxy's own start/stop logs
	// would drown it. They are kept for the report and the bundle of a
	// failing scenario, as a process target keeps its proxy's output.
	logs := &procout.Buffer{Max: 64 << 10}
	d.Output = logs.String
	p, err := refproxy.New(cfg, append([]refproxy.Option{refproxy.WithLogOutput(logs)}, t.opts...)...)
	if err != nil {
		d.Stop(ctx)
		return nil, fmt.Errorf("inprocess: %w", err)
	}
	if err := p.Start(ctx); err != nil {
		d.Stop(ctx)
		return nil, fmt.Errorf("inprocess: start: %w", err)
	}
	d.StopProxy = p.Shutdown
	d.Admin = p.AdminAddr()
	bound := p.BindAddrs()
	if len(bound) != len(setup.Listeners) {
		d.Stop(ctx)
		return nil, fmt.Errorf("inprocess: %d binds for %d listeners", len(bound), len(setup.Listeners))
	}
	d.Addrs = map[string]string{}
	for i, l := range setup.Listeners {
		d.Addrs[l.Name] = bound[i]
	}
	if err := local.WaitReady(ctx, d); err != nil {
		d.Stop(ctx)
		return nil, fmt.Errorf("inprocess: %w", err)
	}
	return d, nil
}
