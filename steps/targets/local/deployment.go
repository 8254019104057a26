// Package local is what the targets that run a proxy on this machine share
// (inprocess, process): the scenario's mock backends served from this
// process on loopback ports, the deployment of one scenario, the standalone
// config written for it, and the wait for the proxy to serve it.
package local

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"

	"github.com/gwdiag/gwdiag/steps/targets"
)

// Deployment is a proxy on loopback ports with mock backends started in
// this process: what the inprocess and process targets share.
type Deployment struct {
	// Admin is the admin server's host:port.
	Admin string
	// Ports are the listeners' ports, chosen before the proxy starts.
	Ports map[string]int
	// Addrs overrides Ports with the addresses the proxy reports it bound
	// (in-process, where ports are chosen by the kernel at bind time).
	Addrs map[string]string
	// Backends are the scenario's mock backends.
	Backends *Mocks
	// StopProxy stops the proxy; Stop calls it once, then stops the mocks.
	StopProxy func(ctx context.Context) error
	// Output, when set, returns what the proxy wrote to its output so far.
	Output func() string
	// Config is the standalone config written for the proxy.
	Config []byte

	stopOnce sync.Once
	stopErr  error
}

// ListenerAddr implements targets.Deployment.
func (d *Deployment) ListenerAddr(listener string) (string, error) {
	if a, ok := d.Addrs[listener]; ok {
		return a, nil
	}
	p, err := targets.Named(d.Ports, "listener", listener)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// AdminAddr implements targets.Deployment.
func (d *Deployment) AdminAddr() string { return d.Admin }

// BackendAddr implements targets.Deployment.
func (d *Deployment) BackendAddr(backend string) (string, error) {
	return d.Backends.Addr(backend)
}

// BackendRequests implements targets.Deployment.
func (d *Deployment) BackendRequests(_ context.Context, backend string) (int64, error) {
	return d.Backends.Requests(backend)
}

// ReleaseHeld implements targets.Deployment.
func (d *Deployment) ReleaseHeld(_ context.Context, backend, key string) error {
	return d.Backends.Release(backend, key)
}

// ProxyLogs implements targets.LogKeeper: the proxy's output, where it has
// one of its own (a process).
func (d *Deployment) ProxyLogs() string {
	if d.Output == nil {
		return ""
	}
	return targets.TailLogs(d.Output())
}

// ProxyConfig implements targets.ConfigKeeper.
func (d *Deployment) ProxyConfig() (string, []byte) { return "config.yaml", d.Config }

// Stop implements targets.Deployment.
func (d *Deployment) Stop(ctx context.Context) error {
	d.stopOnce.Do(func() {
		var errs []error
		if d.StopProxy != nil {
			errs = append(errs, d.StopProxy(ctx))
		}
		d.Backends.Close()
		d.stopErr = errors.Join(errs...)
	})
	return d.stopErr
}

// Prepare starts the mock backends of setup, chooses ports (or port 0
// everywhere when the proxy reports what it bound) and renders the
// standalone config for them in style.
func Prepare(setup targets.Setup, choose bool, style ConfigStyle) (*Deployment, []byte, error) {
	mocks, err := StartMocks(setup.Backends)
	if err != nil {
		return nil, nil, err
	}
	admin, ports := "127.0.0.1:0", map[string]int{}
	for _, l := range setup.Listeners {
		ports[l.Name] = 0
	}
	if choose {
		if admin, ports, err = ChoosePorts(setup); err != nil {
			mocks.Close()
			return nil, nil, err
		}
	}
	addrs := map[string]string{}
	for _, b := range setup.Backends {
		addrs[b.Name], _ = mocks.Addr(b.Name)
	}
	yml, err := StandaloneConfig(setup, style, admin, ports, addrs)
	if err != nil {
		mocks.Close()
		return nil, nil, err
	}
	return &Deployment{Admin: admin, Ports: ports, Backends: mocks, Config: yml}, yml, nil
}
