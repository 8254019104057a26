package specminimal

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// tracer holds the one trace watcher slot: a new watcher ends the one
// waiting before it, with no events.
type tracer struct {
	mu      sync.Mutex
	waiting *trace
	all     []*trace
}

// trace is one watcher and, once a request took it, that request's events.
type trace struct {
	events chan event    // the request's events, in order
	ended  chan struct{} // closed when a newer watcher took the slot, or at Close
	once   sync.Once
	begin  time.Time
}

type event struct {
	EventStart *int64         `json:"eventStart"`
	EventEnd   int64          `json:"eventEnd"`
	Severity   string         `json:"severity"`
	Message    map[string]any `json:"message"`
}

// maxEvents bounds a request's events: the standalone subset is 8.
const maxEvents = 32

// watch registers a new watcher, ending the waiting one.
func (tr *tracer) watch() *trace {
	t := &trace{events: make(chan event, maxEvents), ended: make(chan struct{})}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.waiting != nil {
		tr.waiting.end()
	}
	tr.waiting = t
	tr.all = append(tr.all, t)
	return t
}

// take gives the waiting watcher, if any, to the request that began then.
func (tr *tracer) take(begin time.Time) *trace {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	t := tr.waiting
	if t != nil {
		tr.waiting = nil
		t.begin = begin
	}
	return t
}

// leave unregisters a watcher whose client went away.
func (tr *tracer) leave(t *trace) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.waiting == t {
		tr.waiting = nil
	}
	for i, x := range tr.all {
		if x == t {
			tr.all = append(tr.all[:i], tr.all[i+1:]...)
			break
		}
	}
}

// endAll ends every stream (Close).
func (tr *tracer) endAll() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, t := range tr.all {
		t.end()
	}
	tr.all, tr.waiting = nil, nil
}

func (t *trace) end() { t.once.Do(func() { close(t.ended) }) }

// now is milliseconds since the request began (0 with no watcher).
func (t *trace) now() int64 {
	if t == nil {
		return 0
	}
	return time.Since(t.begin).Milliseconds()
}

// emit queues an event; it never blocks traffic (a full buffer drops).
// A nil trace (no watcher) does nothing.
func (t *trace) emit(start *int64, typ string, fields map[string]any) {
	if t == nil {
		return
	}
	msg := map[string]any{"type": typ}
	for k, v := range fields {
		msg[k] = v
	}
	select {
	case t.events <- event{EventStart: start, EventEnd: t.now(), Severity: "info", Message: msg}:
	default:
	}
}

// serveTrace streams the next request's trace as JSON over SSE and ends
// after requestFinished.
func (p *Proxy) serveTrace(w http.ResponseWriter, r *http.Request) {
	t := p.tracer.watch()
	defer p.tracer.leave(t)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	for {
		select {
		case e := <-t.events:
			b, _ := json.Marshal(e)
			if _, err := w.Write(append(append([]byte("data: "), b...), "\n\n"...)); err != nil {
				return
			}
			_ = rc.Flush()
			if e.Message["type"] == "requestFinished" {
				return
			}
		case <-t.ended:
			return
		case <-r.Context().Done():
			return
		}
	}
}
