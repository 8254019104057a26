package sse_test

import (
	"testing"

	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/golden/trace/sse/ssetest"
)

// BenchmarkReadCapture reads a followed capture event by event.
func BenchmarkReadCapture(b *testing.B) {
	ssetest.Bench(b, ssetest.Options{IDs: true}, func(_ *testing.B, path string, _ int) error {
		return sse.ReadCaptureFile(path, nil, func(sse.Captured) error { return nil })
	})
}

// BenchmarkReadTraces reads a followed capture trace by trace.
func BenchmarkReadTraces(b *testing.B) {
	ssetest.Bench(b, ssetest.Options{IDs: true}, func(_ *testing.B, path string, _ int) error {
		return sse.ReadTracesFile(path, nil, func(sse.CapturedTrace) error { return nil })
	})
}
