package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"cel.dev/cel-go/cel"

	"github.com/gwdiag/gwdiag/golden/trace"
)

// KeepaliveInterval is how often an idle stream gets a `: keepalive` comment.
var KeepaliveInterval = time.Second

// Handler serves /debug/trace: it registers a watcher (optionally filtered by
// ?expression=<CEL>), streams the trace of the request it gets as SSE data
// frames, and ends the stream after requestFinished. With follow=true it
// traces many requests instead (max, default 10, and duration, default 30s,
// bounded by MaxFollowMax and MaxFollowDuration; MaxFollowers at once),
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
			prg, err := Compile(expr)
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
			o, err := ParseFollow(q.Get("max"), q.Get("duration"))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			o.Filter = filter
			if expr := q.Get("outcome"); expr != "" {
				if o.Outcome, err = CompileOutcome(expr); err != nil {
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

// FollowPace is the least time between two writes of a busy follow
// stream (Watcher.paceWait).
var FollowPace = time.Millisecond

// FollowGrace is how long a follow stream past its duration waits for the
// traces it took to end.
var FollowGrace = 5 * time.Second

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
	tick := time.NewTicker(KeepaliveInterval)
	defer tick.Stop()
	// A follow stream ends when it has taken its requests and their traces
	// have ended, or at its deadline (plus a grace for the traces under way).
	var deadline, grace <-chan time.Time
	if watcher.follow != nil {
		dt := time.NewTimer(time.Until(watcher.Deadline()))
		defer dt.Stop()
		deadline = dt.C
	}
	var buf bytes.Buffer
	var lastWrite time.Time
	pace := time.NewTimer(time.Hour)
	pace.Stop()
	defer pace.Stop()
	var paced <-chan time.Time
	// drain writes what the watcher holds; false ends the stream.
	drain := func() bool {
		// Whether a follow stream is done is read before draining, so
		// that the drain holds every event pushed until then.
		done := watcher.follow != nil && watcher.Done()
		events, dropped, final := watcher.Drain()
		buf.Reset()
		for _, e := range events {
			frame(&buf, e)
		}
		watcher.recycle(events)
		if dropped > 0 {
			buf.WriteString(": dropped " + strconv.Itoa(dropped) + " events\n\n")
		}
		if final != nil {
			frame(&buf, *final)
		}
		if buf.Len() > 0 {
			if !write(buf.Bytes()) {
				return false
			}
			lastWrite = time.Now()
		}
		return final == nil && !done
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-deadline:
			if watcher.Pending() == 0 {
				flushFollow(&buf, watcher, "")
				write(buf.Bytes())
				return
			}
			gt := time.NewTimer(FollowGrace)
			defer gt.Stop()
			grace = gt.C
		case <-grace:
			flushFollow(&buf, watcher, ": ended with "+strconv.Itoa(watcher.Pending())+" traces incomplete\n\n")
			write(buf.Bytes())
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

// flushFollow puts what a follow watcher holds in buf, then tail.
func flushFollow(buf *bytes.Buffer, w *Watcher, tail string) {
	events, dropped, _ := w.Drain()
	buf.Reset()
	for _, e := range events {
		frame(buf, e)
	}
	if dropped > 0 {
		buf.WriteString(": dropped " + strconv.Itoa(dropped) + " events\n\n")
	}
	buf.WriteString(tail)
}

func frame(buf *bytes.Buffer, e trace.Event) {
	buf.WriteString("data: ")
	if b, ok := AppendEvent(buf.AvailableBuffer(), e); ok {
		buf.Write(b)
		buf.WriteString("\n\n")
		return
	}
	// What AppendEvent cannot encode, encoding/json tells why. An Encoder
	// writes straight into buf; its output is Marshal's and a newline.
	at := buf.Len() - len("data: ")
	if err := json.NewEncoder(buf).Encode(e); err != nil {
		// Event fields are built by the proxy from JSON-safe values; a failure
		// here is a bug, reported in-band rather than killing the stream.
		buf.Truncate(at)
		buf.WriteString(": cannot encode event: " + err.Error() + "\n\n")
		return
	}
	buf.WriteString("\n")
}
