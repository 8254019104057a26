package sse_test

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/golden/trace/sse/ssetest"
)

// followCopies is how many copies of the recorded follow stream a
// benchmark reads at once: 480 requests, 5760 events, within the default
// bound of one stream (10000 events) that sse.NewReader applies.
const followCopies = 10

// perEvent runs read on the follow stream b.N times and reports the time,
// bytes and allocations per event.
func perEvent(b *testing.B, read func(stream []byte) error) {
	stream, events, _, err := ssetest.FollowStream(followCopies)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(stream)))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for b.Loop() {
		if err := read(stream); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	n := float64(b.N) * float64(events)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/event")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "B/event")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/event")
}

// BenchmarkFollowStream reads a recorded follow stream of the reference
// proxy: frames only, and frames decoded into events and grouped by
// request as BenchmarkFollowWatcherCost's reader does (sse.ReadTrace,
// trace.ByRequest).
func BenchmarkFollowStream(b *testing.B) {
	b.Run("frames", func(b *testing.B) {
		perEvent(b, func(stream []byte) error {
			r := sse.NewReader(bytes.NewReader(stream))
			for {
				if _, err := r.Next(); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
			}
		})
	})
	b.Run("ReadTrace+ByRequest", func(b *testing.B) {
		perEvent(b, func(stream []byte) error {
			tr, err := sse.ReadTrace(sse.NewReader(bytes.NewReader(stream)))
			if err != nil {
				return err
			}
			if ids, _ := trace.ByRequest(tr.Events); len(ids) != followCopies*48 {
				b.Fatalf("%d requests, want %d", len(ids), followCopies*48)
			}
			return nil
		})
	})
	b.Run("ReadCapture", func(b *testing.B) {
		perEvent(b, func(stream []byte) error {
			return sse.ReadCapture(bytes.NewReader(stream), "follow", func(sse.Captured) error { return nil })
		})
	})
}
