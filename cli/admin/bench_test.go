package admin

import (
	"strings"
	"testing"
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
