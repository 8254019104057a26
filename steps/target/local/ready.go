package local

import (
	"context"
	"fmt"
	"net"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// ReadyTimeout bounds how long a target may take to serve a new
// configuration. Max value for a conformant implementation: 10 seconds.
const ReadyTimeout = 10 * time.Second

// WaitReady polls until the admin server and every listener of d accept TCP
// connections, or the deadline passes.
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
	var dialer net.Dialer
	for _, a := range addrs {
		var last error
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, ReadyTimeout, true, func(ctx context.Context) (bool, error) {
			c, err := dialer.DialContext(ctx, "tcp", a)
			if err != nil {
				last = err
				return false, nil
			}
			c.Close()
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("proxy not accepting connections on %s within %s: %v", a, ReadyTimeout, last)
		}
	}
	return nil
}
