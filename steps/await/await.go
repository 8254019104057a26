// Package await is the one way the suite waits: until a condition holds,
// or fails at its deadline saying what it last saw.
//
// A wait that reads its own deadline as the condition passes a proxy on
// timeout: a dial cut by the poll's context fails, and "the dial failed"
// reads as "the listener is closed". Until rules that out for every
// caller: an attempt that returns after the wait's context is done counts
// for nothing (neither its verdict, nor its error, nor what it saw), so a
// check may pass its context to anything it calls without judging the
// errors that context causes.
package await

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Check looks once. done is true when the condition holds; seen says what
// it observed (the wait's error quotes the last one); a non-nil err ends
// the wait at once as a failure of what it checks. ctx ends at the wait's
// deadline; a check may hand it on, since the wait, not the check, judges
// what happens once it ends.
type Check func(ctx context.Context) (done bool, seen string, err error)

// errDeadline is the cause of the wait's own deadline, told apart from a
// deadline or cancellation of the caller's context.
var errDeadline = errors.New("the wait's deadline passed")

// Until calls check at once and then every interval until it reports done
// (nil), fails (its error, as returned), or timeout passes or ctx ends (an
// *Error with the last observation).
func Until(ctx context.Context, timeout, interval time.Duration, check Check) error {
	return UntilChanged(ctx, timeout, interval, nil, check)
}

// UntilChanged is Until, with check also called as soon as what it reads
// changes: changed returns a channel that closes at the next change (a
// Broadcast's Next), taken before each check so that a change between a
// check and the wait is never missed. interval is then only the fallback
// for a change that went unseen. A nil changed is Until.
func UntilChanged(ctx context.Context, timeout, interval time.Duration, changed func() <-chan struct{}, check Check) error {
	if interval <= 0 {
		return fmt.Errorf("await: interval %v must be positive", interval)
	}
	if timeout <= 0 { // a deadline shared by several waits has passed
		return &Error{Timeout: max(timeout, 0)}
	}
	start := time.Now()
	wctx, cancel := context.WithTimeoutCause(ctx, timeout, errDeadline)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	e := &Error{Timeout: timeout}
	for {
		var next <-chan struct{} // nil: never ready
		if changed != nil {
			next = changed()
		}
		done, seen, err := check(wctx)
		if Expired(wctx) {
			// The attempt may have seen the wait's own end: a refused
			// dial, a cut read or a "deadline exceeded" says nothing of
			// the condition.
			e.Cut = true
			return e.end(wctx, start)
		}
		e.Attempts++
		if seen != "" {
			e.Seen = seen
		}
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-tick.C:
		case <-next:
		case <-wctx.Done():
			return e.end(wctx, start)
		}
	}
}

// Expired reports whether ctx has ended or its deadline has passed: then
// an error of anything bounded by ctx may be ctx's own doing, and says
// nothing of what was asked. The deadline counts, not only the context's
// state: a dial or read bounded by the deadline fails on its own timer, a
// moment before the context says it is done.
func Expired(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// Error is a wait that ended before its condition held.
type Error struct {
	// Timeout is the wait's bound.
	Timeout time.Duration
	// Elapsed is how long it waited.
	Elapsed time.Duration
	// Attempts counts the checks that completed before the end.
	Attempts int
	// Seen is what the last completed check observed ("" if none said).
	Seen string
	// Cut is true when a check was still running at the end; it counted
	// for nothing.
	Cut bool
	// Canceled is the caller's reason when the caller's context ended the
	// wait (nil when the wait's own timeout did).
	Canceled error
}

func (e *Error) end(wctx context.Context, start time.Time) *Error {
	e.Elapsed = time.Since(start)
	<-wctx.Done() // at most a moment away once the deadline has passed
	if cause := context.Cause(wctx); !errors.Is(cause, errDeadline) {
		e.Canceled = cause
	}
	return e
}

// Error says how the wait ended and what it last saw.
func (e *Error) Error() string {
	var s string
	if e.Canceled != nil {
		s = fmt.Sprintf("wait canceled after %v (%v)", e.Elapsed.Round(time.Millisecond), e.Canceled)
	} else {
		s = fmt.Sprintf("not within %v", e.Timeout.Round(time.Millisecond))
	}
	switch {
	case e.Seen != "":
		s += fmt.Sprintf(" (%d checks); last seen: %s", e.Attempts, e.Seen)
	case e.Attempts == 0:
		s += "; no check completed"
	default:
		s += fmt.Sprintf(" (%d checks)", e.Attempts)
	}
	if e.Cut && e.Attempts == 0 {
		s += " (one was cut by the end)"
	}
	return s
}

// Unwrap lets errors.Is find the caller's cancellation cause, or
// context.DeadlineExceeded for the wait's own timeout.
func (e *Error) Unwrap() error {
	if e.Canceled != nil {
		return e.Canceled
	}
	return context.DeadlineExceeded
}

// Broadcast tells every waiter of a change at once: Next returns a channel
// that Notify closes. The zero value is ready to use.
type Broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

// Next returns the channel that closes at the next Notify.
func (b *Broadcast) Next() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

// Notify closes the channel Next returned, waking every waiter on it.
func (b *Broadcast) Notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}
