package trace

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace"
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
		w, err := reg.Follow(FollowOptions{Max: MaxFollowMax, Duration: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		h1 := heap()
		for w.bufferLen() < FollowBufferSize {
			t := reg.Take(func() any { return snapshot })
			t.SetRequestID(NewRequestID())
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
	return len(w.events)
}

// TestFollowBufferDropsAnnouncedFinalsKept: a follow watcher whose reader
// stalls keeps FollowBufferSize events, counts the rest as dropped for the
// stream to announce, and always keeps each trace's requestFinished.
func TestFollowBufferDropsAnnouncedFinalsKept(t *testing.T) {
	var reg Registry
	w, err := reg.Follow(FollowOptions{Max: 200, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	const traces = 100 // 1200 events
	for range traces {
		tr := reg.Take(func() any { return map[string]any{} })
		tr.SetRequestID(NewRequestID())
		for _, typ := range []trace.MessageType{trace.RequestStarted, trace.RequestSnapshot, trace.RequestSnapshot, trace.RouteSelection, trace.PolicySelection, trace.RequestSnapshot,
			trace.RequestSnapshot, trace.BackendCallStart, trace.BackendCallResult, trace.ResponseSnapshot, trace.ResponseSnapshot, trace.RequestFinished} {
			tr.Emit(trace.SeverityInfo, typ, nil)
		}
	}
	events, dropped, _ := w.Drain()
	finished := 0
	for _, e := range events {
		if e.Type() == trace.RequestFinished {
			finished++
		}
	}
	if finished != traces || len(events)+dropped != 12*traces || dropped == 0 || len(events) > FollowBufferSize+traces {
		t.Errorf("%d events kept, %d dropped, %d requestFinished; want every requestFinished, at most %d events, the rest counted as dropped",
			len(events), dropped, finished, FollowBufferSize+traces)
	}
	if w.Pending() != 0 || w.Done() {
		t.Errorf("pending %d, done %v: want 0 pending and not done (max 200, 100 taken)", w.Pending(), w.Done())
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
	if evs, _, _ := w.Drain(); len(evs) != 4 {
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
