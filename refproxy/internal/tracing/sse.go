package tracing

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"cel.dev/cel-go/cel"

	"github.com/gwdiag/gwdiag/golden/trace/watch"
)

// keepaliveInterval is how often an idle stream gets a `: keepalive` comment.
var keepaliveInterval = time.Second

// Handler serves /debug/trace: it registers a watcher (optionally filtered by
// ?expression=<CEL>), streams the trace of the request it gets as SSE data
// frames, and ends the stream after requestFinished. With follow=true it
// traces many requests instead (max, default 10, and duration, default 30s,
// bounded as golden/trace/watch says; MaxFollowers at once),
// each event with its requestId, and ends after max traces or at the
// deadline.
func Handler(reg *Registry) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			w.Header().Set("Allow", "GET, POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		q := r.URL.Query()
		var filter cel.Program
		if expr := q.Get("expression"); expr != "" {
			prg, err := watch.CompileFilter(expr)
			if err != nil {
				http.Error(w, "invalid expression: "+err.Error(), http.StatusBadRequest)
				return
			}
			filter = prg
		}
		var watcher *Watcher
		switch f := q.Get("follow"); f {
		case "", "false":
			if q.Has("max") || q.Has("duration") || q.Has("outcome") {
				http.Error(w, "max, duration and outcome apply to a follow watcher: add follow=true", http.StatusBadRequest)
				return
			}
			watcher = reg.Watch(filter)
		case "true":
			f, err := watch.ParseFollow(q.Get("max"), q.Get("duration"))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			o := FollowOptions{Max: f.Max, Duration: f.Duration, Filter: filter}
			if expr := q.Get("outcome"); expr != "" {
				if o.Outcome, err = watch.CompileOutcome(expr); err != nil {
					http.Error(w, "invalid outcome: "+err.Error(), http.StatusBadRequest)
					return
				}
			}
			if watcher, err = reg.Follow(o); err != nil {
				http.Error(w, err.Error(), http.StatusTooManyRequests)
				return
			}
		default:
			http.Error(w, fmt.Sprintf("follow %q: want true or false", f), http.StatusBadRequest)
			return
		}
		defer watcher.Cancel()
		serve(w, r, watcher)
	})
}

// followPace is the least time between two writes of a busy follow
// stream (Watcher.paceWait).
var followPace = time.Millisecond

// followGrace is how long a follow stream past its duration waits for the
// traces it took to end.
var followGrace = 5 * time.Second

func serve(w http.ResponseWriter, r *http.Request, watcher *Watcher) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(b []byte) bool {
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write([]byte(": ready\n\n")) {
		return
	}
	tick := time.NewTicker(keepaliveInterval)
	defer tick.Stop()
	// A follow stream ends when it has taken its requests and their traces
	// have ended, or at its deadline (plus a grace for the traces under way).
	var deadline, grace <-chan time.Time
	if watcher.follow != nil {
		dt := time.NewTimer(time.Until(watcher.Deadline()))
		defer dt.Stop()
		deadline = dt.C
	}
	var lastWrite time.Time
	pace := time.NewTimer(time.Hour)
	pace.Stop()
	defer pace.Stop()
	var paced <-chan time.Time
	// drain writes what the watcher holds, its frames as they were queued;
	// false ends the stream.
	drain := func() bool {
		// Whether a follow stream is done is read before draining, so
		// that the drain holds every event pushed until then.
		done := watcher.follow != nil && watcher.Done()
		out, dropped, final := watcher.Drain()
		out = appendDropped(out, dropped)
		out = append(out, final...)
		if len(out) > 0 {
			if !write(out) {
				return false
			}
			lastWrite = time.Now()
		}
		watcher.recycle(out)
		return final == nil && !done
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-deadline:
			if watcher.Pending() == 0 {
				write(flushFollow(watcher, ""))
				return
			}
			gt := time.NewTimer(followGrace)
			defer gt.Stop()
			grace = gt.C
		case <-grace:
			write(flushFollow(watcher, ": ended with "+strconv.Itoa(watcher.Pending())+" traces incomplete\n\n"))
			return
		case <-tick.C:
			if !write([]byte(": keepalive\n\n")) {
				return
			}
			if watcher.follow != nil {
				// Events of traces under way, which woke nobody (push).
				select {
				case watcher.notify <- struct{}{}:
				default:
				}
			}
		case <-watcher.notify:
			if wait := watcher.paceWait(lastWrite, time.Now()); wait > 0 {
				if paced == nil {
					pace.Reset(wait)
					paced = pace.C
				}
				continue
			}
			if !drain() {
				return
			}
		case <-paced:
			paced = nil
			if !drain() {
				return
			}
		}
	}
}

// flushFollow is what a follow watcher holds, then tail.
func flushFollow(w *Watcher, tail string) []byte {
	out, dropped, _ := w.Drain()
	return append(appendDropped(out, dropped), tail...)
}

// appendDropped announces dropped events, if any.
func appendDropped(b []byte, dropped int) []byte {
	if dropped == 0 {
		return b
	}
	return append(b, ": dropped "+strconv.Itoa(dropped)+" events\n\n"...)
}
