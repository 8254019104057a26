package container

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/testcontainers/testcontainers-go/wait"
	kwait "k8s.io/apimachinery/pkg/util/wait"
)

// onHost runs strategies one after the other against the published ports
// on host, where the suite reaches them (publishAddrs), rather than where
// testcontainers guesses the daemon is.
func onHost(host string, strategies ...wait.Strategy) wait.Strategy {
	return hostStrategy{host: host, strategies: strategies}
}

type hostStrategy struct {
	host       string
	strategies []wait.Strategy
}

// WaitUntilReady implements wait.Strategy.
func (h hostStrategy) WaitUntilReady(ctx context.Context, t wait.StrategyTarget) error {
	for _, s := range h.strategies {
		if err := s.WaitUntilReady(ctx, hostTarget{t, h.host}); err != nil {
			return err
		}
	}
	return nil
}

type hostTarget struct {
	wait.StrategyTarget
	host string
}

func (h hostTarget) Host(context.Context) (string, error) { return h.host, nil }

// forListeners waits until the proxy accepts connections on each of ports
// (container ports such as "10000/tcp").
//
// testcontainers' ForListeningPort cannot tell: its check from the host
// dials the published port, which Docker's proxy accepts whether or not
// anything listens inside, and its check from inside needs a shell, which
// a FROM scratch image has not. A listening proxy, though, keeps a new
// connection open waiting for a request, while Docker's proxy closes it at
// once when nothing listens inside; so a port is ready when a connection
// to it is still open a moment after it was made.
func forListeners(ports ...string) wait.Strategy { return listeners(ports) }

type listeners []string

// heldOpen is how long a connection must stay open for the port to count
// as listening.
const heldOpen = 100 * time.Millisecond

// WaitUntilReady implements wait.Strategy.
func (ls listeners) WaitUntilReady(ctx context.Context, t wait.StrategyTarget) error {
	host, err := t.Host(ctx)
	if err != nil {
		return err
	}
	for _, p := range ls {
		var last error
		err := kwait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			st, err := t.State(ctx)
			if err != nil {
				return false, err
			}
			if !st.Running {
				return false, fmt.Errorf("container exited with code %d", st.ExitCode)
			}
			mapped, err := t.MappedPort(ctx, p)
			if err != nil {
				last = err
				return false, nil
			}
			last = heldOpenBy(ctx, net.JoinHostPort(host, mapped.Port()))

			return last == nil, nil
		})
		if err != nil {
			if last != nil && ctx.Err() != nil {
				err = fmt.Errorf("%w (last: %v)", err, last)
			}
			return fmt.Errorf("listener port %s: %w", p, err)
		}
	}
	return nil
}

// heldOpenBy dials addr and reports nil when the connection stays open,
// unanswered, for heldOpen.
func heldOpenBy(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(heldOpen))
	var b [1]byte
	_, err = c.Read(b[:])
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	if err == nil {
		return errors.New("the port answered before any request")
	}
	return fmt.Errorf("connection closed at once: nothing listens in the container (%v)", err)
}
