// Package interrupt carries a signal that interrupts gwdiag from where it is
// caught (gwdiag's main) to what must react to it (the suite's runner), and
// carries back what a forced exit may leave behind, so that the second
// signal can say it before gwdiag exits at once.
//
// The first SIGINT or SIGTERM cancels the context with a Signal as its
// cause: the runner starts no further scenario, ends the running ones and
// cleans up. The second exits at once with 128+n, as a shell reports a
// process killed by signal n, after printing what the registered
// Leftovers say.
package interrupt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// Signal is the cause of a context cancelled by a signal. As an error it
// asks for the exit status a shell gives a process killed by it (130 for
// SIGINT, 143 for SIGTERM), so that CI tells a cancelled run from a
// failed one.
type Signal struct{ Sig os.Signal }

func (s Signal) Error() string { return "interrupted by " + s.Name() }

// Name is the signal's name as shells and kill(1) write it: SIGINT, SIGTERM.
func (s Signal) Name() string {
	switch s.Sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	if s.Sig == nil {
		return "a signal"
	}
	return s.Sig.String()
}

// ExitCode is 128 plus the signal's number (implements cli/internal/exitcode's coder).
func (s Signal) ExitCode() int {
	if n, ok := s.Sig.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 1
}

// Of returns the signal that cancelled ctx, if a signal did.
func Of(ctx context.Context) (Signal, bool) {
	var s Signal
	ok := errors.As(context.Cause(ctx), &s)
	return s, ok
}

// Reason says why ctx ended, for a report: the signal's name, or the
// context's own error when something else cancelled it.
func Reason(ctx context.Context) string {
	if s, ok := Of(ctx); ok {
		return s.Name()
	}
	if err := context.Cause(ctx); err != nil {
		return err.Error()
	}
	return ""
}

// Leftovers describes, one line each, what may stay on the machine if the
// process exits now and how to remove it. It must not block: it runs while
// the user waits for gwdiag to exit.
type Leftovers func() []string

type registry struct {
	mu   sync.Mutex
	next int
	fns  map[int]Leftovers
}

type registryKey struct{}

// OnForcedExit registers fn to be asked, on a second signal, what the run
// leaves behind; remove unregisters it (call it once that is cleaned up).
// Without a Context above ctx it does nothing.
func OnForcedExit(ctx context.Context, fn Leftovers) (remove func()) {
	r, _ := ctx.Value(registryKey{}).(*registry)
	if r == nil {
		return func() {}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	id := r.next
	r.next++
	r.fns[id] = fn
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.fns, id)
	}
}

// lines gathers what every registered Leftovers says, in registration order.
func (r *registry) lines() []string {
	r.mu.Lock()
	ids := make([]int, 0, len(r.fns))
	for id := range r.fns {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	fns := make([]Leftovers, len(ids))
	for i, id := range ids {
		fns[i] = r.fns[id]
	}
	r.mu.Unlock()
	var out []string
	for _, fn := range fns {
		out = append(out, fn()...)
	}
	return out
}

// Context returns a context cancelled, with a Signal as its cause, by the
// first SIGINT or SIGTERM. A second one writes to w what the Leftovers
// registered under ctx may leave behind and calls exit with the signal's
// status (os.Exit in gwdiag; a test passes its own). stop releases the
// signals.
func Context(parent context.Context, w io.Writer, exit func(int)) (ctx context.Context, stop func()) {
	r := &registry{fns: map[int]Leftovers{}}
	ctx, cancel := context.WithCancelCause(context.WithValue(parent, registryKey{}, r))
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
			cancel(context.Canceled)
		})
	}
	go func() {
		select {
		case sig := <-sigs:
			cancel(Signal{sig})
		case <-done:
			return
		}
		select {
		case sig := <-sigs:
			forced(w, Signal{sig}, r.lines())
			exit(Signal{sig}.ExitCode())
		case <-done:
		}
	}()
	return ctx, stop
}

// forced writes what a second signal leaves behind.
func forced(w io.Writer, s Signal, left []string) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s again: exiting now, without finishing the clean-up.\n", s.Name())
	if len(left) == 0 {
		b.WriteString("Nothing of this run should be left behind.\n")
	} else {
		b.WriteString("What may be left behind, and how to remove it:\n")
		for _, l := range left {
			fmt.Fprintf(&b, "  - %s\n", l)
		}
	}
	io.WriteString(w, b.String())
}
