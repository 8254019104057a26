package steps

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
)

// localDeployment is a proxy on loopback ports with mock backends started in
// this process: what the inprocess and process targets share.
type localDeployment struct {
	admin string
	ports map[string]int
	// addrs overrides ports with the addresses the proxy reports it bound
	// (in-process, where ports are chosen by the kernel at bind time).
	addrs     map[string]string
	backends  *mockSet
	stopProxy func(ctx context.Context) error

	stopOnce sync.Once
	stopErr  error
}

func (d *localDeployment) ListenerAddr(listener string) (string, error) {
	if a, ok := d.addrs[listener]; ok {
		return a, nil
	}
	p, ok := d.ports[listener]
	if !ok {
		return "", fmt.Errorf("no listener %q in this scenario's configuration", listener)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

func (d *localDeployment) AdminAddr() string { return d.admin }

func (d *localDeployment) BackendAddr(backend string) (string, error) {
	return d.backends.addr(backend)
}

func (d *localDeployment) BackendRequests(_ context.Context, backend string) (int64, error) {
	return d.backends.requests(backend)
}

func (d *localDeployment) Stop(ctx context.Context) error {
	d.stopOnce.Do(func() {
		var errs []error
		if d.stopProxy != nil {
			errs = append(errs, d.stopProxy(ctx))
		}
		d.backends.close()
		d.stopErr = errors.Join(errs...)
	})
	return d.stopErr
}

// prepareLocal starts the mock backends of setup, chooses ports (or port 0
// everywhere when the proxy reports what it bound) and renders the
// standalone config for them.
func prepareLocal(setup Setup, choose bool) (*localDeployment, []byte, error) {
	mocks, err := startMocks(setup.Backends)
	if err != nil {
		return nil, nil, err
	}
	admin, ports := "127.0.0.1:0", map[string]int{}
	for _, l := range setup.Listeners {
		ports[l.Name] = 0
	}
	if choose {
		if admin, ports, err = choosePorts(setup); err != nil {
			mocks.close()
			return nil, nil, err
		}
	}
	addrs := map[string]string{}
	for _, b := range setup.Backends {
		addrs[b.Name], _ = mocks.addr(b.Name)
	}
	yml, err := standaloneConfig(setup, admin, ports, addrs)
	if err != nil {
		mocks.close()
		return nil, nil, err
	}
	return &localDeployment{admin: admin, ports: ports, backends: mocks}, yml, nil
}
