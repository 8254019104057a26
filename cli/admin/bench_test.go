package admin

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/golden/trace/sse/ssetest"
)

// BenchmarkReadStream measures parsing a twelve-event trace stream with
// keepalives, the CLI's per-trace cost.
func BenchmarkReadStream(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(": ready\n\n")
	for range 11 {
		sb.WriteString("data: " + evRoute + "\n\n: keepalive\n\n")
	}
	sb.WriteString("data: " + evFinished + "\n\n")
	stream := sb.String()
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		if err := ReadStream(strings.NewReader(stream), Handler{Event: func(Event) {}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadFollowStream reads a recorded follow stream of the
// reference proxy (480 requests, 5760 events) as gwdiag trace --follow
// does: compacted raw JSON and decoded event for each. The stream is a
// closer, as an HTTP body is, so that a frame's stall bound is armed as
// it is for gwdiag.
func BenchmarkReadFollowStream(b *testing.B) {
	stream, events, _, err := ssetest.FollowStream(10)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		if err := ReadStream(io.NopCloser(bytes.NewReader(stream)), Handler{Follow: true, Event: func(Event) {}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
}

// BenchmarkReadFollowStreamRaw reads the same stream as gwdiag trace
// --follow --raw does: each event's Header only, its raw JSON lent.
func BenchmarkReadFollowStreamRaw(b *testing.B) {
	stream, events, _, err := ssetest.FollowStream(10)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		if err := ReadStream(io.NopCloser(bytes.NewReader(stream)), Handler{Follow: true, HeaderOnly: true, BorrowRaw: true, Event: func(Event) {}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
}
