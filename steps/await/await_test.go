package await

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	errBroken := errors.New("backend broken")
	tests := []struct {
		name string
		// cancelAfter cancels the caller's context (0: never).
		cancelAfter time.Duration
		// callerTimeout gives the caller's context a deadline (0: none).
		callerTimeout time.Duration
		check         func() Check
		wantErr       bool
		// wantMsg is text the error must contain; wantIs what errors.Is must find.
		wantMsg  []string
		wantIs   error
		wantNot  error
		wantTime time.Duration // the wait must end by this (0: no bound)
	}{
		{
			name: "holds at the third check",
			check: func() Check {
				n := 0
				return func(context.Context) (bool, string, error) { n++; return n == 3, fmt.Sprintf("check %d", n), nil }
			},
		},
		{
			name: "never holds: fails at the deadline with the last observation",
			check: func() Check {
				n := 0
				return func(context.Context) (bool, string, error) {
					n++
					return false, fmt.Sprintf("still open at check %d", n), nil
				}
			},
			wantErr: true, wantMsg: []string{"not within 200ms", "last seen: still open at check"},
			wantIs: context.DeadlineExceeded, wantNot: context.Canceled, wantTime: 300 * time.Millisecond,
		},
		{
			name: "the check's own failure ends the wait as it is",
			check: func() Check {
				return func(context.Context) (bool, string, error) { return false, "", errBroken }
			},
			wantErr: true, wantMsg: []string{"backend broken"}, wantIs: errBroken,
		},
		{
			// The defect of issue 24: a dial cut by the wait's context
			// read as "stopped". It must fail, never pass.
			name: "a check that reads its context's end as success never passes",
			check: func() Check {
				return func(ctx context.Context) (bool, string, error) {
					<-ctx.Done()
					return true, "dial failed: " + ctx.Err().Error(), nil
				}
			},
			wantErr: true, wantMsg: []string{"not within 200ms", "no check completed (one was cut by the end)"},
			wantIs: context.DeadlineExceeded, wantTime: 300 * time.Millisecond,
		},
		{
			// A dial bounded by its context's deadline fails on its own
			// timer, a moment before the context reports done.
			name: "a check that ends on its own timer at the deadline never passes",
			check: func() Check {
				return func(ctx context.Context) (bool, string, error) {
					d, _ := ctx.Deadline()
					time.Sleep(time.Until(d))
					return true, "i/o timeout", nil
				}
			},
			wantErr: true, wantMsg: []string{"not within 200ms", "no check completed"},
			wantIs: context.DeadlineExceeded, wantTime: 300 * time.Millisecond,
		},
		{
			name: "an error the wait's own deadline causes is the deadline, not the check's failure",
			check: func() Check {
				n := 0
				return func(ctx context.Context) (bool, string, error) {
					n++
					if n == 1 {
						return false, "accepted", nil
					}
					<-ctx.Done()
					return false, "", ctx.Err()
				}
			},
			wantErr: true, wantMsg: []string{"not within 200ms (1 checks); last seen: accepted"},
			wantIs: context.DeadlineExceeded, wantTime: 300 * time.Millisecond,
		},
		{
			name:        "the caller's cancellation is reported as such",
			cancelAfter: 50 * time.Millisecond,
			check: func() Check {
				return func(context.Context) (bool, string, error) { return false, "not yet", nil }
			},
			wantErr: true, wantMsg: []string{"wait canceled after", "context canceled", "last seen: not yet"},
			wantIs: context.Canceled, wantNot: context.DeadlineExceeded, wantTime: 150 * time.Millisecond,
		},
		{
			name:          "the caller's own earlier deadline is the caller's, not the wait's",
			callerTimeout: 50 * time.Millisecond,
			check: func() Check {
				return func(context.Context) (bool, string, error) { return false, "not yet", nil }
			},
			wantErr: true, wantMsg: []string{"wait canceled after", "context deadline exceeded", "last seen: not yet"},
			wantIs: context.DeadlineExceeded, wantTime: 150 * time.Millisecond,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.callerTimeout > 0 {
				ctx, cancel = context.WithTimeout(ctx, tt.callerTimeout)
				defer cancel()
			}
			if tt.cancelAfter > 0 {
				time.AfterFunc(tt.cancelAfter, cancel)
			}
			start := time.Now()
			err := Until(ctx, 200*time.Millisecond, 10*time.Millisecond, tt.check())
			took := time.Since(start)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error: got %v, want error %v", err, tt.wantErr)
			}
			for _, m := range tt.wantMsg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error: got %q, want it to contain %q", err, m)
				}
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("errors.Is(%v, %v): got false, want true", err, tt.wantIs)
			}
			if tt.wantNot != nil && errors.Is(err, tt.wantNot) {
				t.Errorf("errors.Is(%v, %v): got true, want false", err, tt.wantNot)
			}
			if tt.wantTime > 0 && took > tt.wantTime {
				t.Errorf("took %v, want at most %v", took, tt.wantTime)
			}
		})
	}
}

func TestUntilNonPositiveBounds(t *testing.T) {
	holds := func(context.Context) (bool, string, error) { return true, "", nil }
	tests := []struct {
		name              string
		timeout, interval time.Duration
		want              string
	}{
		// A deadline shared by several waits may be gone before the last.
		{"timeout already passed", -time.Second, time.Millisecond, "not within 0s; no check completed"},
		{"no interval", time.Second, 0, "await: interval 0s must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := Until(context.Background(), tt.timeout, tt.interval, holds); err == nil || err.Error() != tt.want {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func TestRefused(t *testing.T) {
	op := func(err error) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", err)}
	}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", op(syscall.ECONNREFUSED), true},
		{"connection reset", op(syscall.ECONNRESET), true},
		{"end of stream", fmt.Errorf("read: %w", io.EOF), true},
		{"the dialer's own timeout", &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}, false},
		{"the wait's deadline", &net.OpError{Op: "dial", Net: "tcp", Err: context.DeadlineExceeded}, false},
		{"the wait's cancellation", &net.OpError{Op: "dial", Net: "tcp", Err: context.Canceled}, false},
		{"host unreachable", op(syscall.EHOSTUNREACH), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := refused(tt.err); got != tt.want {
				t.Errorf("Refused(%v): got %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestListenerChecks dials real loopback listeners: one that keeps
// accepting, one closed.
func TestListenerChecks(t *testing.T) {
	open, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	// A listener nobody accepts on fills its backlog, and then dials
	// time out: accept, as a serving proxy does.
	go func() {
		for {
			c, err := open.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	openAddr := open.Addr().String()
	tests := []struct {
		name    string
		check   Check
		wantErr string // "" : the wait succeeds
	}{
		{"Closed holds on a closed listener", Closed(closedAddr, 100*time.Millisecond), ""},
		{"Closed fails on a listener that keeps accepting, naming it", Closed(openAddr, 100*time.Millisecond), "last seen: a connection to " + openAddr + " was accepted"},
		{"Open holds on an open listener", Open(openAddr, 100*time.Millisecond), ""},
		{"Open fails on a closed listener with the dial's error", Open(closedAddr, 100*time.Millisecond), "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Until(context.Background(), 200*time.Millisecond, 20*time.Millisecond, tt.check)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// pastDeadline is a context whose deadline has passed while it does not
// say so yet: the moment between a bounded dial's own timer and the
// context's.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

func TestExpired(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	future, cancelFuture := context.WithTimeout(context.Background(), time.Hour)
	defer cancelFuture()
	tests := []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"no deadline", context.Background(), false},
		{"deadline ahead", future, false},
		{"canceled", canceled, true},
		{"deadline passed, context not yet done", pastDeadline{context.Background()}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Expired(tt.ctx); got != tt.want {
				t.Errorf("Expired: got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestUntilChanged: a change wakes the wait at once, with a fallback
// interval far past the timeout, so that only the change can end it in
// time; and a change during a check is not lost (the channel is taken
// before the check).
func TestUntilChanged(t *testing.T) {
	var b Broadcast
	var mu sync.Mutex
	ready := false
	checks := 0
	err := UntilChanged(context.Background(), 30*time.Second, time.Hour, b.Next, func(context.Context) (bool, string, error) {
		mu.Lock()
		defer mu.Unlock()
		checks++
		if checks == 1 {
			// What the check read changes while it runs: the wait must
			// look again.
			ready = true
			b.Notify()
			return false, "not yet", nil
		}
		return ready, "", nil
	})
	if err != nil || checks != 2 {
		t.Fatalf("a change during the first check: got %v after %d checks, want done at the second", err, checks)
	}

	ready = false
	go func() {
		mu.Lock()
		ready = true
		mu.Unlock()
		b.Notify()
	}()
	err = UntilChanged(context.Background(), 30*time.Second, time.Hour, b.Next, func(context.Context) (bool, string, error) {
		mu.Lock()
		defer mu.Unlock()
		return ready, "", nil
	})
	if err != nil {
		t.Fatalf("a change from another goroutine: got %v, want the wait woken by it", err)
	}

	// Without changes the wait still times out, with what it saw.
	var e *Error
	err = UntilChanged(context.Background(), 50*time.Millisecond, time.Hour, b.Next, func(context.Context) (bool, string, error) { return false, "never", nil })
	if !errors.As(err, &e) || e.Seen != "never" {
		t.Fatalf("no change: got %v, want the timeout with the last observation", err)
	}
}
