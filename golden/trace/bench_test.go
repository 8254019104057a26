package trace_test

import (
	"bytes"
	"testing"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse/ssetest"
)

// followEvents are the JSON objects of the recorded follow stream's data
// frames.
func followEvents(tb testing.TB) [][]byte {
	tb.Helper()
	stream, _, _, err := ssetest.FollowStream(1)
	if err != nil {
		tb.Fatal(err)
	}
	var out [][]byte
	for _, l := range bytes.Split(stream, []byte("\n")) {
		if d, ok := bytes.CutPrefix(l, []byte("data: ")); ok {
			out = append(out, d)
		}
	}
	return out
}

// BenchmarkParse decodes the events of a recorded follow stream of the
// reference proxy (the shapes a follow reader meets).
func BenchmarkParse(b *testing.B) {
	benchEvents(b, func(e []byte) error { _, err := trace.Parse(e); return err })
}

// BenchmarkParseHeader reads what a raw follow reader needs of the same
// events (trace.ParseHeader).
func BenchmarkParseHeader(b *testing.B) {
	benchEvents(b, func(e []byte) error { _, err := trace.ParseHeader(e); return err })
}

// benchEvents runs parse over followEvents, reporting bytes and time per
// event.
func benchEvents(b *testing.B, parse func([]byte) error) {
	events := followEvents(b)
	size := 0
	for _, e := range events {
		size += len(e)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		for _, e := range events {
			if err := parse(e); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/event")
}
