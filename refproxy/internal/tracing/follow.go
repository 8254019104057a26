package tracing

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"cel.dev/cel-go/cel"

	"github.com/gwdiag/gwdiag/golden/trace/watch"
)

// followBufferSize is how many events a follow watcher holds before its
// stream writer takes them; beyond it events are dropped, and the drop is
// announced in the stream. requestFinished events are always kept. 4096
// events are some 340 traces, 20 ms of a proxy at full load on a small
// machine: a reader on that machine is off the CPU for that long at times
// (1024 dropped events in bursts under wrk; see docs/benchmarks.md). The
// bounds a client may ask for (max, duration, followers at once) are the
// protocol's: golden/trace/watch.
const followBufferSize = 4096

// MaxFollowers bounds the follow watchers at once; more are refused.
const MaxFollowers = watch.MaxFollowers

// errTooManyFollowers refuses a follow watcher beyond MaxFollowers.
var errTooManyFollowers = fmt.Errorf("%d follow watchers already; try again when one ends", MaxFollowers)

// FollowOptions bound a follow watcher.
type FollowOptions struct {
	Max      int
	Duration time.Duration
	Filter   cel.Program
	// Outcome, when set, keeps only the traces whose outcome it accepts:
	// the proxy holds a trace's events until requestFinished, then sends
	// them or drops them, and a dropped trace does not count towards Max.
	Outcome cel.Program
}

// Follow registers a follow watcher, or refuses it when MaxFollowers are
// registered.
func (r *Registry) Follow(o FollowOptions) (*Watcher, error) {
	if o.Max <= 0 || o.Duration <= 0 {
		return nil, errors.New("follow: want max and duration")
	}
	w := &Watcher{reg: r, filter: o.Filter, notify: make(chan struct{}, 1),
		follow: &following{max: o.Max, deadline: time.Now().Add(o.Duration), outcome: o.Outcome}}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.followers) >= MaxFollowers {
		return nil, errTooManyFollowers
	}
	r.followers = append(r.followers, w)
	r.following.Add(1)
	return w, nil
}

// following is a follow watcher's progress.
type following struct {
	max      int
	deadline time.Time
	taken    int // requests assigned
	finished int // of them, traces ended (requestFinished pushed)
	outcome  cel.Program
}

// accepts reports whether the outcome filter keeps a trace that ended with
// code after latency microseconds.
func (f *following) accepts(code int64, latency int64) bool {
	return watch.OutcomeAccepts(f.outcome, code, latency)
}

// discard gives back the request of a trace the outcome filter dropped at
// now: it does not count towards max, and the watcher may take one more.
func (w *Watcher) discard(now time.Time) {
	w.mu.Lock()
	w.follow.taken--
	reopen := w.follow.taken == w.follow.max-1 && !w.closed
	w.mu.Unlock()
	if now.After(w.follow.deadline) {
		// A stream past its deadline may be done now; before it, a
		// dropped trace changes nothing its writer must see (waking it
		// per dropped request would cost a goroutine switch each).
		select {
		case w.notify <- struct{}{}:
		default:
		}
	}
	if reopen {
		// It left the registry when it took its last request: back in.
		r := w.reg
		r.mu.Lock()
		if !slices.Contains(r.followers, w) {
			r.followers = append(r.followers, w)
			r.following.Add(1)
		}
		r.mu.Unlock()
	}
}

// Deadline is when a follow watcher stops taking requests.
func (w *Watcher) Deadline() time.Time { return w.follow.deadline }

// Done reports, for a follow watcher, that it takes no more requests and
// every trace it took has ended.
func (w *Watcher) Done() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.follow != nil && w.follow.done(time.Now())
}

// done reports that the watcher takes no more requests at now and every
// trace it took has ended (under the watcher's lock).
func (f *following) done(now time.Time) bool {
	return (f.taken >= f.max || now.After(f.deadline)) && f.finished >= f.taken
}

// paceWait is how long the writer of a follow stream last written at last
// waits, at now, before writing what the watcher holds (0: at once). A
// write costs the proxy, and the reader, a system call or three whatever
// it holds, and traces end thousands of times a second under load: a busy
// stream is written at most once per FollowPace, its traces' events in one
// write. A quiet stream is written at once (its last write is older), and
// so are a buffer half full (it must not drop events to save writes) and
// a stream that is done (its end is not held back).
func (w *Watcher) paceWait(last, now time.Time) time.Duration {
	wait := last.Add(followPace).Sub(now)
	if w.follow == nil || wait <= 0 {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.n >= followBufferSize/2 || w.follow.done(now) {
		return 0
	}
	return wait
}

// Pending is how many of a follow watcher's traces have not ended.
func (w *Watcher) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.follow.taken - w.follow.finished
}

// takeFollowers appends to out every follow watcher that wants the request
// and can take more, and assigns it to them. The registry's lock is held
// only to read the list of followers, and to prune it when one reached its
// bounds (its stream ends once its traces have): filters are evaluated,
// and requests taken, under each watcher's own lock, so that concurrent
// requests do not queue behind one another's filters.
func (r *Registry) takeFollowers(out []*Watcher, act func() any, now time.Time) []*Watcher {
	var listArr [MaxFollowers]*Watcher
	r.mu.Lock()
	list := append(listArr[:0], r.followers...)
	r.mu.Unlock()
	prune := false
	for _, w := range list {
		if w.filter != nil {
			// Not evaluated for a watcher that would not take it.
			if !w.open(now) {
				prune = true
				continue
			}
			o, _, err := w.filter.Eval(map[string]any{"request": act()})
			if err != nil || o.Value() != true {
				continue
			}
		}
		// Checked and taken under one lock: another request may have
		// taken its last one meanwhile.
		w.mu.Lock()
		f := w.follow
		took := !w.closed && f.taken < f.max && now.Before(f.deadline)
		if took {
			f.taken++
		}
		full := f.taken >= f.max
		w.mu.Unlock()
		if took {
			out = append(out, w)
		}
		prune = prune || !took || full
	}
	if prune {
		r.pruneFollowers(now)
	}
	return out
}

// open reports whether a follow watcher takes more requests at now.
func (w *Watcher) open(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := w.follow
	return !w.closed && f.taken < f.max && now.Before(f.deadline)
}

// pruneFollowers takes out of the registry the follow watchers that take
// no more requests (as they are now: one whose dropped trace gave a
// request back stays).
func (r *Registry) pruneFollowers(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := r.followers[:0]
	for _, w := range r.followers {
		if w.open(now) {
			kept = append(kept, w)
		} else {
			r.following.Add(-1)
		}
	}
	clear(r.followers[len(kept):])
	r.followers = kept
}
