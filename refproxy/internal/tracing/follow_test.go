package tracing

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/watch"
)

// BenchmarkFollowWatcherMemory reports what one follow watcher holds at
// most: the watcher itself, empty, and with its buffer full of typical
// traces (12 events each, snapshots of a few headers) because its reader
// stalled. The proxy bounds the rest: MaxFollowers at once.
func BenchmarkFollowWatcherMemory(b *testing.B) {
	snapshot := map[string]any{"method": "GET", "uri": "http://example.com/get", "version": "HTTP/1.1",
		"headers": map[string]any{"host": "example.com", "user-agent": "curl/8.5.0", "accept": "*/*", "x-request-id": "0123456789abcdef"}}
	types := []trace.MessageType{trace.RequestStarted, trace.RequestSnapshot, trace.RequestSnapshot, trace.RouteSelection, trace.PolicySelection, trace.RequestSnapshot,
		trace.RequestSnapshot, trace.BackendCallStart, trace.BackendCallResult, trace.ResponseSnapshot, trace.ResponseSnapshot, trace.RequestFinished}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var empty, full uint64
	for range b.N {
		var reg Registry
		h0 := heap()
		w, err := reg.Follow(FollowOptions{Max: watch.MaxFollowMax, Duration: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		h1 := heap()
		for w.bufferLen() < followBufferSize {
			t := reg.Take(func() any { return snapshot })
			t.SetRequestID(newRequestID())
			for _, typ := range types {
				t.Emit(trace.SeverityInfo, typ, map[string]any{"requestState": map[string]any{"request": snapshot}})
			}
		}
		h2 := heap()
		empty += h1 - h0
		full += h2 - h0
		runtime.KeepAlive(w)
	}
	b.ReportMetric(float64(empty)/float64(b.N), "B/empty-watcher")
	b.ReportMetric(float64(full)/float64(b.N), "B/full-watcher")
}

func (w *Watcher) bufferLen() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// TestFollowBufferDropsAnnouncedFinalsKept: a follow watcher whose reader
// stalls keeps FollowBufferSize events, counts the rest as dropped for the
// stream to announce, and always keeps each trace's requestFinished.
func TestFollowBufferDropsAnnouncedFinalsKept(t *testing.T) {
	var reg Registry
	const traces = followBufferSize/12 + 100 // more events than the buffer holds
	w, err := reg.Follow(FollowOptions{Max: 2 * traces, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for range traces {
		tr := reg.Take(func() any { return map[string]any{} })
		tr.SetRequestID(newRequestID())
		for _, typ := range []trace.MessageType{trace.RequestStarted, trace.RequestSnapshot, trace.RequestSnapshot, trace.RouteSelection, trace.PolicySelection, trace.RequestSnapshot,
			trace.RequestSnapshot, trace.BackendCallStart, trace.BackendCallResult, trace.ResponseSnapshot, trace.ResponseSnapshot, trace.RequestFinished} {
			tr.Emit(trace.SeverityInfo, typ, nil)
		}
	}
	events, dropped, _ := drainEvents(t, w)
	finished := 0
	for _, e := range events {
		if e.Type() == trace.RequestFinished {
			finished++
		}
	}
	if finished != traces || len(events)+dropped != 12*traces || dropped == 0 || len(events) > followBufferSize+traces {
		t.Errorf("%d events kept, %d dropped, %d requestFinished; want every requestFinished, at most %d events, the rest counted as dropped",
			len(events), dropped, finished, followBufferSize+traces)
	}
	if w.Pending() != 0 || w.Done() {
		t.Errorf("pending %d, done %v: want 0 pending and not done (half its max taken)", w.Pending(), w.Done())
	}
}

// TestFollowWriterWokenPerTrace: a follow stream's writer is woken when a
// trace ends, not per event; the events before the end wait for it (or
// for the keepalive, which drains them too).
func TestFollowWriterWokenPerTrace(t *testing.T) {
	var reg Registry
	w, err := reg.Follow(FollowOptions{Max: 10, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Cancel()
	tr := reg.Take(func() any { return map[string]any{} })
	tr.SetRequestID("r1")
	woken := func() bool {
		select {
		case <-w.Notify():
			return true
		default:
			return false
		}
	}
	for _, typ := range []trace.MessageType{trace.RequestStarted, trace.RequestSnapshot, trace.RouteSelection} {
		tr.Emit(trace.SeverityInfo, typ, nil)
		if woken() {
			t.Fatalf("writer woken by %s, before the trace's end", typ)
		}
	}
	tr.Emit(trace.SeverityInfo, trace.RequestFinished, nil)
	if !woken() {
		t.Fatal("writer not woken at requestFinished")
	}
	if evs, _, _ := drainEvents(t, w); len(evs) != 4 {
		t.Errorf("drained %d events, want the trace's 4", len(evs))
	}
}

// TestFollowTakesExactlyMaxConcurrently: requests taken by 8 goroutines at
// once give a follow watcher exactly its max, never more, and a watcher
// that took its max leaves the registry (the request path's fast check
// then costs nothing).
func TestFollowTakesExactlyMaxConcurrently(t *testing.T) {
	var reg Registry
	if _, err := reg.Follow(FollowOptions{Max: 50, Duration: time.Minute}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var taken atomic.Int32
	for range 8 {
		wg.Go(func() {
			for range 40 {
				if tr := reg.Take(func() any { return map[string]any{} }); tr.Followed() {
					taken.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := taken.Load(); n != 50 {
		t.Errorf("%d requests taken by a follow watcher of max 50", n)
	}
	if reg.Waiting() || len(reg.followers) != 0 {
		t.Errorf("a follow watcher that took its max is still registered (%d, waiting %v)", len(reg.followers), reg.Waiting())
	}
}

// TestFollowPaceWait: a follow stream written less than FollowPace ago
// waits for the rest of it, unless its buffer is half full or its last
// trace has ended; one written longer ago, and a one-shot stream, are
// written at once.
func TestFollowPaceWait(t *testing.T) {
	var reg Registry
	w, err := reg.Follow(FollowOptions{Max: 2, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Cancel()
	last := time.Now()
	now := last.Add(followPace / 4)
	emit := func(tr *Tracer, typ trace.MessageType) { tr.Emit(trace.SeverityInfo, typ, nil) }
	tr := reg.Take(func() any { return map[string]any{} })
	tr.SetRequestID("r1")
	emit(tr, trace.RequestStarted)
	emit(tr, trace.RequestFinished)
	if got := w.paceWait(last, now); got != followPace*3/4 {
		t.Errorf("written %s ago, one trace held: wait %s, want %s", followPace/4, got, followPace*3/4)
	}
	if got := w.paceWait(last, last.Add(followPace)); got != 0 {
		t.Errorf("written %s ago: wait %s, want 0", followPace, got)
	}
	if got := w.paceWait(time.Time{}, now); got != 0 {
		t.Errorf("never written: wait %s, want 0", got)
	}
	tr = reg.Take(func() any { return map[string]any{} })
	tr.SetRequestID("r2")
	for range followBufferSize/2 - 2 - 1 {
		emit(tr, trace.RequestSnapshot)
	}
	if got := w.paceWait(last, now); got == 0 {
		t.Errorf("buffer one short of half full: wait 0, want the pace")
	}
	emit(tr, trace.RequestSnapshot)
	if got := w.paceWait(last, now); got != 0 {
		t.Errorf("buffer half full: wait %s, want 0", got)
	}
	w.Drain()
	if got := w.paceWait(last, now); got == 0 {
		t.Errorf("drained, a trace under way: wait 0, want the pace")
	}
	emit(tr, trace.RequestFinished) // the last of max 2
	if got := w.paceWait(last, now); got != 0 {
		t.Errorf("last trace ended: wait %s, want 0", got)
	}
	one := reg.Watch(nil)
	defer one.Cancel()
	if got := one.paceWait(last, now); got != 0 {
		t.Errorf("one-shot watcher: wait %s, want 0", got)
	}
}

// TestFollowStreamPacedEndToEnd serves a follow stream whose pace is an
// hour: its first trace is written at once (nothing was written before),
// a trace that ends right after it waits until the buffer is half full,
// and the stream's last trace is written, and the stream ended, at once.
// A stream that held any of them for its pace fails at the test's
// deadline.
func TestFollowStreamPacedEndToEnd(t *testing.T) {
	defer func(p time.Duration) { followPace = p }(followPace)
	followPace = time.Hour
	var reg Registry
	srv := httptest.NewServer(Handler(&reg))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"?follow=true&max=3&duration=1m", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(nil, 1<<20)
	// until reads the stream up to the line holding every one of want.
	until := func(what string, want ...string) {
		t.Helper()
		for lines.Scan() {
			found := true
			for _, s := range want {
				found = found && strings.Contains(lines.Text(), s)
			}
			if found {
				return
			}
		}
		t.Fatalf("stream ended (%v) before %s", lines.Err(), what)
	}
	until("the stream opened", ": ready")
	emit := func(tr *Tracer, typ trace.MessageType) { tr.Emit(trace.SeverityInfo, typ, nil) }
	start := func(id string) *Tracer {
		tr := reg.Take(func() any { return map[string]any{} })
		tr.SetRequestID(id)
		emit(tr, trace.RequestStarted)
		return tr
	}
	emit(start("r1"), trace.RequestFinished)
	until("the first trace, written at once", `"requestId":"r1"`, "requestFinished")
	emit(start("r2"), trace.RequestFinished)
	r3 := start("r3")
	for range followBufferSize / 2 {
		emit(r3, trace.RequestSnapshot)
	}
	until("a trace held until the buffer was half full", `"requestId":"r2"`, "requestFinished")
	emit(r3, trace.RequestFinished)
	until("the last trace, written at once", `"requestId":"r3"`, "requestFinished")
	for lines.Scan() {
	}
	if err := lines.Err(); err != nil {
		t.Fatalf("the stream did not end after its last trace: %v", err)
	}
}

// TestFollowQueueAllocatesNothing: events pushed while the writer writes
// what it drained go to the buffer it gave back before, so that a busy
// follow stream queues its events without growing a buffer per write.
func TestFollowQueueAllocatesNothing(t *testing.T) {
	var reg Registry
	w, err := reg.Follow(FollowOptions{Max: watch.MaxFollowMax, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Cancel()
	var fs Frames
	fs.b = append(fs.b, `data: {"eventStart":null,"eventEnd":1,"severity":"info","message":{"type":"requestStarted"},"requestId":"r"}`+"\n\n"...)
	fs.end()
	cycle := func() {
		out, _, _ := w.Drain()
		for range 100 { // while the writer writes out
			w.push(&fs, false)
		}
		w.recycle(out)
	}
	cycle()
	cycle()
	if n := testing.AllocsPerRun(100, cycle); n != 0 {
		t.Errorf("%v allocations a drain, want 0", n)
	}
}
