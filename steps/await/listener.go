package await

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// Closed is a Check that holds once nothing accepts TCP connections at
// addr: a dial refused or reset by the host. Each dial has its own bound
// attempt; one that times out says nothing (a listener too busy to
// accept, or a host that drops packets) and the wait goes on.
func Closed(addr string, attempt time.Duration) Check {
	return func(ctx context.Context) (bool, string, error) {
		err := dial(ctx, addr, attempt)
		switch {
		case err == nil:
			return false, "a connection to " + addr + " was accepted", nil
		case refused(err):
			return true, "connection to " + addr + " refused", nil
		default:
			return false, fmt.Sprintf("dial %s: %v (neither accepted nor refused)", addr, err), nil
		}
	}
}

// Open is a Check that holds once addr accepts a TCP connection, each dial
// bounded by attempt.
func Open(addr string, attempt time.Duration) Check {
	return func(ctx context.Context) (bool, string, error) {
		if err := dial(ctx, addr, attempt); err != nil {
			return false, err.Error(), nil
		}
		return true, "a connection to " + addr + " was accepted", nil
	}
}

// refused reports whether a dial error is the host's answer that nothing
// listens: a refusal, a reset or an end of stream. A timeout or a
// cancellation is not: they are the dialer's own doing.
func refused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF)
}

func dial(ctx context.Context, addr string, attempt time.Duration) error {
	d := net.Dialer{Timeout: attempt}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}
