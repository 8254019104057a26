package tracecmd

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/gwdiag/gwdiag/cli/admin"
	"github.com/gwdiag/gwdiag/cli/internal/scrub"
	"github.com/gwdiag/gwdiag/cli/internal/tui"

	"github.com/gwdiag/gwdiag/golden/trace/sse/ssetest"
)

// BenchmarkDiff diffs a followed capture with itself (requests paired by
// id, equal bytes) and with a capture of a second run (other ids: paired
// in order, every request normalised and compared field by field).
func BenchmarkDiff(b *testing.B) {
	b.Run("self", func(b *testing.B) {
		ssetest.Bench(b, ssetest.Options{IDs: true}, func(_ *testing.B, path string, _ int) error {
			return diffCaptures(context.Background(), io.Discard, path, path, nil, scrub.Default())
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
			return diffCaptures(context.Background(), io.Discard, path, other, nil, scrub.Default())
		})
	})
}

// followSession is a follow session of `gwdiag trace --follow` against a
// stand-in admin server, closed when b ends, that sends at once the
// recorded follow stream repeated n times (ssetest.FollowStream); the
// stream and its number of events.
func followSession(b *testing.B, n int) (session, []byte, int) {
	stream, events, _, err := ssetest.FollowStream(n)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(stream)
	}))
	b.Cleanup(srv.Close)
	return session{client: &admin.Client{BaseURL: srv.URL}, follow: true, max: 1000, duration: time.Minute, scrub: scrub.Default()}, stream, events
}

// BenchmarkFollowRaw runs `gwdiag trace --follow --raw` (stdout
// io.Discard) against a stand-in admin server that sends a recorded follow
// stream of the reference proxy (480 requests, 5760 events, one request in
// four with a cookie) at once: the command's whole reading, redacting (the
// default) and printing path, HTTP included.
func BenchmarkFollowRaw(b *testing.B) {
	s, stream, events := followSession(b, 10)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.runRaw(context.Background(), io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
}

// BenchmarkFollowViewer runs `gwdiag trace --follow`'s viewer path on a
// recorded follow stream of the reference proxy (48 requests, 576 events)
// sent at once by a stand-in admin server: the stream read as the command
// reads it, its events handed to a viewer loop that does what bubbletea
// does for each message (Update, then View, on a 160x50 screen). one-by-one
// sends each event as its own message (as gwdiag did before the queue);
// queued goes through the command's viewerQueue. It reports the time per
// event until the viewer has taken the whole stream.
func BenchmarkFollowViewer(b *testing.B) {
	s, _, events := followSession(b, 1)
	for _, queued := range []bool{false, true} {
		name := "one-by-one"
		if queued {
			name = "queued"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				msgs := make(chan tea.Msg)
				viewed := make(chan struct{})
				go func() {
					var m tea.Model = tui.NewFollow("bench", tui.StatusWatching)
					m, _ = m.Update(tea.WindowSizeMsg{Width: 160, Height: 50})
					for msg := range msgs {
						m, _ = m.Update(msg)
						_ = m.View()
						if _, done := msg.(tui.DoneMsg); done {
							break
						}
					}
					close(viewed)
				}()
				send := func(msg tea.Msg) { msgs <- msg }
				var err error
				if queued {
					q := newViewerQueue()
					go q.run(send)
					err = s.stream(context.Background(), nil, func(ev admin.Event) { q.push(tui.EventMsg{Raw: ev.Raw, Event: ev.Event}) }, nil)
					q.push(tui.DoneMsg{Err: err})
					q.close()
				} else {
					err = s.stream(context.Background(), nil, func(ev admin.Event) { send(tui.EventMsg{Raw: ev.Raw, Event: ev.Event}) }, nil)
					send(tui.DoneMsg{Err: err})
				}
				if err != nil {
					b.Fatal(err)
				}
				<-viewed
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
		})
	}
}
