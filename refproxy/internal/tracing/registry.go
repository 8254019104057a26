// Package trace is the reference proxy's request tracing: the registry of
// watchers waiting for the next request (one-shot or following many), the
// tracer that emits a request's events, and the JSON-over-SSE stream served
// at /debug/trace. The events themselves are package golden/trace, which
// every consumer reads without depending on the proxy.
package tracing

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"cel.dev/cel-go/cel"

	"github.com/gwdiag/gwdiag/golden/trace"
)

// bufferSize is how many events a watcher holds before the stream writer
// takes them. A trace has at most twelve events, so drops only happen when a
// watcher's connection stalls; the final event is always kept.
const bufferSize = 64

// Registry is the FIFO of watchers waiting for a request to trace. Each
// watcher gets exactly one request: the first to arrive after it registered
// that its filter accepts.
type Registry struct {
	// waiting counts registered watchers so that the request path can skip
	// all tracing work with one atomic load when nobody watches.
	waiting atomic.Int32
	// following counts follow watchers (follow.go), for the same fast path.
	following atomic.Int32
	mu        sync.Mutex
	queue     []*Watcher
	followers []*Watcher
}

// Watcher is one /debug/trace client waiting for, then receiving, one trace.
type Watcher struct {
	reg    *Registry
	filter cel.Program

	mu sync.Mutex
	// queued is the events queued for the stream, as its SSE frames
	// (Frames), n of them; final is a one-shot trace's requestFinished,
	// kept even when the buffer is full.
	queued  []byte
	n       int
	final   []byte
	dropped int
	// spare is the buffer the writer gave back (recycle), queued next:
	// events pushed while the writer writes go to a buffer grown already.
	spare    []byte
	closed   bool
	notify   chan struct{}
	assigned bool
	// follow is set on a follow watcher (follow.go).
	follow *following
}

// Waiting reports whether any watcher is registered.
func (r *Registry) Waiting() bool { return r.waiting.Load() > 0 || r.following.Load() > 0 }

// Watch registers a watcher at the end of the queue. filter may be nil.
func (r *Registry) Watch(filter cel.Program) *Watcher {
	w := &Watcher{reg: r, filter: filter, notify: make(chan struct{}, 1)}
	r.mu.Lock()
	r.queue = append(r.queue, w)
	r.waiting.Add(1)
	r.mu.Unlock()
	return w
}

// Cancel removes a watcher that no longer listens. A watcher already given
// a request stays with it; its events are simply discarded.
func (w *Watcher) Cancel() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	r := w.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	if w.follow != nil {
		unregister(&r.followers, w, &r.following)
	} else {
		unregister(&r.queue, w, &r.waiting)
	}
}

// unregister takes w out of ws, if it is there, and counts it off n.
// r.mu must be held.
func unregister(ws *[]*Watcher, w *Watcher, n *atomic.Int32) {
	if i := slices.Index(*ws, w); i >= 0 {
		*ws = slices.Delete(*ws, i, i+1)
		n.Add(-1)
	}
}

// Take returns a Tracer for the request if a watcher wants it, else nil.
// With nobody watching it costs one atomic load and allocates nothing.
// request gives what a CEL filter sees as `request`: method, path,
// pathAndQuery, host, scheme, uri, version and headers (lower-case names),
// as in requestSnapshot, as a map or a CEL value that stands for it; it is
// called at most once, and only for a filter, which yields a bool and
// keeps nothing of it.
func (r *Registry) Take(request func() any) *Tracer {
	if r.waiting.Load() == 0 && r.following.Load() == 0 {
		return nil
	}
	start := time.Now()
	var act any
	view := func() any {
		if act == nil {
			act = request()
		}
		return act
	}
	var t *Tracer
	if r.waiting.Load() > 0 {
		t = r.takeOneShot(view, start)
	}
	if r.following.Load() > 0 {
		var taken [MaxFollowers]*Watcher
		if fs := r.takeFollowers(taken[:0], view, start); len(fs) > 0 {
			if t == nil {
				t = &Tracer{start: start}
			}
			if len(fs) <= len(t.followArr) {
				// Most requests: no slice of their own.
				t.follow = t.followArr[:copy(t.followArr[:], fs)]
			} else {
				t.follow = slices.Clone(fs)
			}
			t.hold = t.w == nil
			for _, w := range fs {
				t.hold = t.hold && w.follow.outcome != nil
			}
		}
	}
	return t
}

// takeOneShot gives the request to the first one-shot watcher in the
// queue whose filter accepts it, if any.
func (r *Registry) takeOneShot(view func() any, start time.Time) *Tracer {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, w := range r.queue {
		if w.filter != nil {
			out, _, err := w.filter.Eval(map[string]any{"request": view()})
			if err != nil || out.Value() != true {
				continue
			}
		}
		r.queue = append(r.queue[:i], r.queue[i+1:]...)
		r.waiting.Add(-1)
		w.mu.Lock()
		w.assigned = true
		w.mu.Unlock()
		return &Tracer{w: w, start: start}
	}
	return nil
}

// push queues the events of fs for the stream (their frames are copied);
// fin: the last is the trace's requestFinished. It never blocks.
func (w *Watcher) push(fs *Frames, fin bool) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	// A follow stream's writer is woken at the end of each trace (or when
	// its buffer fills up), so that it writes a trace's events at once
	// rather than one write and one wake-up per event; what a trace under
	// way emitted goes out with the next end, or at the next keepalive
	// (serve). A one-shot stream is woken per event.
	wake := w.follow == nil
	size := w.bufferSize()
	for i := range fs.Len() {
		f := fs.Frame(i)
		switch {
		case fin && i == fs.Len()-1 && w.follow != nil:
			// A followed trace's end is always kept: the stream ends
			// after the last one.
			w.queued = append(w.queued, f...)
			w.n++
			w.follow.finished++
			wake = true
		case fin && i == fs.Len()-1:
			w.final = append([]byte(nil), f...)
		case w.n >= size:
			w.dropped++
		default:
			w.queued = append(w.queued, f...)
			w.n++
			wake = wake || w.n >= size/2
		}
	}
	w.mu.Unlock()
	if !wake {
		return
	}
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

func (w *Watcher) bufferSize() int {
	if w.follow != nil {
		return followBufferSize
	}
	return bufferSize
}

// Notify signals, without blocking the sender, that events were queued
// since the last Drain; a reader drains after each signal.
func (w *Watcher) Notify() <-chan struct{} { return w.notify }

// Drain takes what is queued: the events' SSE frames, back to back, the
// count dropped since the last drain, and a one-shot trace's final frame
// (requestFinished) once it has arrived. The frames are the caller's until
// it gives them back (recycle).
func (w *Watcher) Drain() (frames []byte, dropped int, final []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	frames, w.queued, w.spare, w.n = w.queued, w.spare[:0], nil, 0
	dropped, w.dropped = w.dropped, 0
	return frames, dropped, w.final
}

// recycle gives drained frames back for the next events, once their
// writer is done with them, so that a busy stream does not grow a new
// buffer per drain (one that held a burst beyond maxSpare is let go).
func (w *Watcher) recycle(frames []byte) {
	if cap(frames) > maxSpare {
		return
	}
	w.mu.Lock()
	if w.spare == nil {
		w.spare = frames[:0]
	}
	w.mu.Unlock()
}

// maxSpare bounds the buffer a watcher keeps for its next events: some
// 8 000 typical events.
const maxSpare = 8 << 20

// DrainEvents is Drain read as a stream's reader reads it: each frame
// parsed (trace.Parse). It is for tests and benchmarks, which look at
// events; a frame that does not parse is an error.
func (w *Watcher) DrainEvents() (events []trace.Event, dropped int, final *trace.Event, err error) {
	frames, dropped, fin := w.Drain()
	if events, err = ParseFrames(frames); err != nil {
		return nil, dropped, nil, err
	}
	if fin != nil {
		fe, err := ParseFrames(fin)
		if err != nil || len(fe) != 1 {
			return nil, dropped, nil, fmt.Errorf("final frame %q: %v", fin, err)
		}
		final = &fe[0]
	}
	return events, dropped, final, nil
}
