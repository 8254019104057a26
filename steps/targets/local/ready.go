package local

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/gwdiag/gwdiag/steps/await"
)

// readyTimeout bounds how long a target may take to serve a new
// configuration. Max value for a conformant implementation: 10 seconds.
const readyTimeout = 10 * time.Second

// readyDial bounds one dial of WaitReady.
const readyDial = time.Second

// WaitReady polls until the admin server and every listener of d accept TCP
// connections, or ReadyTimeout passes; the error names the address that
// did not, and what its last dial said.
func WaitReady(ctx context.Context, d *Deployment) error {
	addrs := []string{d.Admin}
	for name := range d.Ports { // ListenerAddr prefers the bound addresses
		a, _ := d.ListenerAddr(name)
		addrs = append(addrs, a)
	}
	for name, a := range d.Addrs {
		if _, ok := d.Ports[name]; !ok {
			addrs = append(addrs, a)
		}
	}
	sort.Strings(addrs[1:]) // the same error for the same deployment
	pending := addrs
	err := await.Until(ctx, readyTimeout, 10*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		for len(pending) > 0 {
			done, seen, err := await.Open(pending[0], readyDial)(ctx)
			if err != nil || !done {
				return false, seen, err
			}
			pending = pending[1:]
		}
		return true, "", nil
	})
	switch {
	case err == nil:
		return nil
	case len(pending) == 0:
		// Every address answered as the wait ended (an interrupt, the
		// scenario's deadline): say why it ended, not which address.
		return fmt.Errorf("proxy readiness: %w", err)
	default:
		return fmt.Errorf("proxy not accepting connections on %s: %w", pending[0], err)
	}
}
