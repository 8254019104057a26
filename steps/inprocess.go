package steps

import (
	"context"
	"fmt"

	"github.com/gwdiag/gwdiag/refproxy"
	"github.com/gwdiag/gwdiag/refproxy/config"
)

// InProcess runs the reference proxy as a library, one instance per
// scenario, configured from the same standalone YAML a process target writes.
type InProcess struct{}

// NewInProcess returns the in-process target.
func NewInProcess() *InProcess { return &InProcess{} }

// Name implements Target.
func (*InProcess) Name() string { return "inprocess" }

// Start implements Target; there is nothing shared to start.
func (*InProcess) Start(context.Context) error { return nil }

// Stop implements Target.
func (*InProcess) Stop(context.Context) error { return nil }

// Capabilities implements Target.
func (*InProcess) Capabilities() []string { return nil }

// Configure implements Target.
func (*InProcess) Configure(ctx context.Context, setup Setup) (Deployment, error) {
	d, yml, err := prepareLocal(setup)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Parse("conformance.yaml", yml)
	if err != nil {
		d.Stop(ctx)
		return nil, fmt.Errorf("inprocess: config rejected: %w\n%s", err, yml)
	}
	p, err := refproxy.New(cfg)
	if err != nil {
		d.Stop(ctx)
		return nil, fmt.Errorf("inprocess: %w", err)
	}
	if err := p.Start(ctx); err != nil {
		d.Stop(ctx)
		return nil, fmt.Errorf("inprocess: start: %w", err)
	}
	d.stopProxy = p.Shutdown
	if err := waitReady(ctx, d); err != nil {
		d.Stop(ctx)
		return nil, fmt.Errorf("inprocess: %w", err)
	}
	return d, nil
}
