package tracing

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/watch"
)

// requestOf is the filter's view of r (the proxy builds it from its own
// request type).
func requestOf(r *http.Request) func() any {
	return func() any {
		h := map[string]any{}
		for k, v := range r.Header {
			h[strings.ToLower(k)] = strings.Join(v, ",")
		}
		return map[string]any{"method": r.Method, "path": r.URL.Path, "host": r.Host, "headers": h}
	}
}

func TestRegistryFilterAndOrder(t *testing.T) {
	var reg Registry
	if reg.Take(requestOf(httptest.NewRequest("GET", "/x", nil))) != nil {
		t.Fatal("Take with no watchers returned a tracer")
	}
	chat, err := watch.CompileFilter(`request.path == "/v1/chat/completions" && request.headers["x-team"] == "blue"`)
	if err != nil {
		t.Fatal(err)
	}
	wChat := reg.Watch(chat)
	wAny := reg.Watch(nil)
	req := func(path, team string) *http.Request {
		r := httptest.NewRequest("POST", path, nil)
		if team != "" {
			r.Header.Set("X-Team", team)
		}
		return r
	}
	tests := []struct {
		name string
		req  *http.Request
		want *Watcher
	}{
		{"filter rejects, next watcher takes it", req("/other", ""), wAny},
		{"missing header does not match", req("/v1/chat/completions", ""), nil},
		{"filter accepts", req("/v1/chat/completions", "blue"), wChat},
		{"nobody left", req("/v1/chat/completions", "blue"), nil},
	}
	for _, tt := range tests {
		tr := reg.Take(requestOf(tt.req))
		var got *Watcher
		if tr != nil {
			got = tr.w
		}
		if got != tt.want {
			t.Errorf("%s: got watcher %p, want %p", tt.name, got, tt.want)
		}
	}
	if reg.Waiting() {
		t.Error("watchers left after each got its request")
	}
}

func TestCompileErrors(t *testing.T) {
	for _, expr := range []string{`request.path ==`, `1 + 1`, `"a"`, `unknown == 1`} {
		if _, err := watch.CompileFilter(expr); err == nil {
			t.Errorf("watch.CompileFilter(%q) accepted it", expr)
		}
	}
}

func TestFullBufferDropsButKeepsFinal(t *testing.T) {
	var reg Registry
	w := reg.Watch(nil)
	tr := reg.Take(requestOf(httptest.NewRequest("GET", "/", nil)))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range bufferSize + 6 {
			tr.Emit(trace.SeverityInfo, trace.RequestSnapshot, map[string]any{"stage": trace.StageInitialRequest})
		}
		tr.Emit(trace.SeverityInfo, trace.RequestFinished, nil)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("emitting to a watcher nobody reads blocked")
	}
	rec := httptest.NewRecorder()
	serve(rec, httptest.NewRequest("GET", "/debug/trace", nil), w)
	body := rec.Body.String()
	if !strings.HasPrefix(body, ": ready\n\n") {
		t.Errorf("stream does not open with : ready: %.40q", body)
	}
	if n := strings.Count(body, "data: "); n != bufferSize+1 {
		t.Errorf("%d data frames, want %d (buffer) + 1 (requestFinished)", n, bufferSize+1)
	}
	if !strings.Contains(body, ": dropped 6 events\n\n") {
		t.Errorf("no drop announcement in stream")
	}
	if !strings.HasSuffix(body, `"message":{"type":"requestFinished"}}`+"\n\n") {
		t.Errorf("stream does not end with requestFinished: ...%q", body[len(body)-80:])
	}
}

func TestEventEndNeverDecreases(t *testing.T) {
	var reg Registry
	w := reg.Watch(nil)
	tr := reg.Take(requestOf(httptest.NewRequest("GET", "/", nil)))
	tr.last = 1 << 40 // as if the clock had stepped back
	start := tr.Start()
	tr.EmitTimed(trace.SeverityInfo, trace.BackendCallResult, &start, nil)
	evs, _, _ := drainEvents(t, w)
	if len(evs) != 1 || evs[0].EventEnd != 1<<40 || *evs[0].EventStart > evs[0].EventEnd {
		t.Errorf("event %+v, want eventEnd held at the previous value", evs)
	}
}

// drainEvents is w.DrainEvents, failing t on a frame that does not parse.
func drainEvents(t testing.TB, w *Watcher) ([]trace.Event, int, *trace.Event) {
	t.Helper()
	evs, dropped, final, err := w.DrainEvents()
	if err != nil {
		t.Fatal(err)
	}
	return evs, dropped, final
}

// TestRecordNextTakesTheLastTime: an event recorded with RecordNext ends
// when the event before it did, without reading the clock (a clock read
// now, an hour after the trace's start, would say so), and Record reads
// it.
func TestRecordNextTakesTheLastTime(t *testing.T) {
	var reg Registry
	w := reg.Watch(nil)
	tr := reg.Take(requestOf(httptest.NewRequest("GET", "/", nil)))
	tr.Record(trace.SeverityInfo, trace.RequestSnapshot, nil, Capture{})
	first := tr.last
	tr.start = tr.start.Add(-time.Hour)
	tr.RecordNext(trace.SeverityInfo, trace.PolicySelection, Capture{})
	tr.Record(trace.SeverityInfo, trace.RequestFinished, nil, Capture{})
	evs, _, final := drainEvents(t, w)
	if len(evs) != 2 || final == nil {
		t.Fatalf("%d events and final %v, want 2 and requestFinished", len(evs), final)
	}
	if evs[1].EventEnd != first || evs[1].EventStart != nil {
		t.Errorf("RecordNext's event: eventEnd %d (start %v), want %d, the last event's", evs[1].EventEnd, evs[1].EventStart, first)
	}
	if hour := time.Hour.Microseconds(); final.EventEnd < hour {
		t.Errorf("Record after RecordNext: eventEnd %d, want the clock's (≥ %d)", final.EventEnd, hour)
	}
}

// TestCancel: a cancelled watcher, one-shot or following, leaves its queue
// in order, is given no request, and the last one leaves the fast path
// (Waiting) false; cancelling twice changes nothing.
func TestCancel(t *testing.T) {
	var reg Registry
	a, b, c := reg.Watch(nil), reg.Watch(nil), reg.Watch(nil)
	f, err := reg.Follow(FollowOptions{Max: 10, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	b.Cancel()
	b.Cancel()
	if len(reg.queue) != 2 || reg.queue[0] != a || reg.queue[1] != c || reg.waiting.Load() != 2 {
		t.Fatalf("after cancelling the second of three: queue %v, waiting %d; want [a c], 2", reg.queue, reg.waiting.Load())
	}
	f.Cancel()
	if len(reg.followers) != 0 || reg.following.Load() != 0 {
		t.Fatalf("after cancelling the follower: %d followers, following %d; want none", len(reg.followers), reg.following.Load())
	}
	for _, want := range []*Watcher{a, c} {
		if tr := reg.Take(requestOf(httptest.NewRequest("GET", "/", nil))); tr == nil || tr.w != want {
			t.Fatalf("Take gave %v, want watcher %p", tr, want)
		}
	}
	if reg.Waiting() {
		t.Error("Waiting after every watcher got its request or was cancelled")
	}
}
