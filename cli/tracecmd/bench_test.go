package tracecmd

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gwdiag/gwdiag/golden/trace/sse/ssetest"
)

// BenchmarkDiff diffs a followed capture with itself (requests paired by
// id, equal bytes) and with a capture of a second run (other ids: paired
// in order, every request normalised and compared field by field).
func BenchmarkDiff(b *testing.B) {
	b.Run("self", func(b *testing.B) {
		ssetest.Bench(b, ssetest.Options{IDs: true}, func(_ *testing.B, path string, _ int) error {
			return diffCaptures(context.Background(), io.Discard, path, path, nil)
		})
	})
	b.Run("rerun", func(b *testing.B) {
		ssetest.Bench(b, ssetest.Options{IDs: true}, func(b *testing.B, path string, events int) error {
			other := filepath.Join(filepath.Dir(path), "rerun.jsonl")
			if _, err := os.Stat(other); err != nil {
				b.StopTimer()
				_, err := ssetest.WriteFile(other, ssetest.Options{Events: events, IDs: true, IDBase: events})
				b.StartTimer()
				if err != nil {
					return err
				}
			}
			return diffCaptures(context.Background(), io.Discard, path, other, nil)
		})
	})
}
