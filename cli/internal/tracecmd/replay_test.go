package tracecmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/golden/trace/sse/ssetest"
)

// TestLineIndexReadsRequestsBack: the viewer reads each request of a long
// capture back from the file by its lines, with or without the background
// index, and gets exactly the events the reader delivered, also for
// requests whose lines interleave.
func TestLineIndexReadsRequestsBack(t *testing.T) {
	lines, err := ssetest.Template()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for k := 0; k < 300; k += 2 {
		// two requests at a time, their events interleaved
		for _, l := range lines {
			for _, id := range []int{k, k + 1} {
				fmt.Fprintf(&b, `{"requestId":"r%d",%s`+"\n", id, l[1:])
			}
		}
	}
	path := filepath.Join(t.TempDir(), "capture.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var traces []sse.CapturedTrace
	if err := sse.ReadTracesFile(path, nil, func(tr sse.CapturedTrace) error { traces = append(traces, tr); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(traces) != 300 {
		t.Fatalf("read %d traces, want 300", len(traces))
	}
	for _, indexed := range []bool{false, true} {
		t.Run(fmt.Sprintf("indexed=%v", indexed), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			x := &lineIndex{path: path, offsets: []int64{0}}
			if indexed {
				x.build(ctx)
				if want := (len(traces)*len(lines)-1)/indexEvery + 1; len(x.offsets) != want {
					t.Fatalf("index holds %d offsets, want %d", len(x.offsets), want)
				}
			}
			// from the end backwards, so an unindexed read skips most lines
			for i := len(traces) - 1; i >= 0; i -= 37 {
				tr := traces[i]
				evs, raws, err := x.request(tr).Load()
				if err != nil {
					t.Fatal(err)
				}
				if len(evs) != len(tr.Events) || len(raws) != len(tr.Events) {
					t.Fatalf("request %s: read back %d events, want %d", tr.ID, len(evs), len(tr.Events))
				}
				for j, c := range tr.Events {
					if string(raws[j]) != string(c.Raw) || evs[j].RequestID != tr.ID {
						t.Errorf("request %s event %d: read back %s\nwant %s", tr.ID, j+1, raws[j], c.Raw)
					}
				}
			}
		})
	}
}
