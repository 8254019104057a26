package steps

import (
	"context"
	"fmt"
	"net"
	"time"
)

// ReadyTimeout bounds how long a target may take to serve a new
// configuration. Max value for a conformant implementation: 10 seconds.
const ReadyTimeout = 10 * time.Second

// waitReady polls until the admin server and every listener of d accept TCP
// connections, or the deadline passes.
func waitReady(ctx context.Context, d *localDeployment) error {
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	addrs := []string{d.admin}
	for name := range d.ports { // ListenerAddr prefers the bound addresses
		a, _ := d.ListenerAddr(name)
		addrs = append(addrs, a)
	}
	var dialer net.Dialer
	for _, a := range addrs {
		for {
			c, err := dialer.DialContext(ctx, "tcp", a)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("proxy not accepting connections on %s within %s: %v", a, ReadyTimeout, err)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}
