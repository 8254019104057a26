package tracecmd

import (
	"fmt"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/gwdiag/gwdiag/cli/internal/tui"
	"github.com/gwdiag/gwdiag/golden/trace"
)

// queueMsgs are events 1 to n with a drop announced after every 40th, and
// the end; and the same in words.
func queueMsgs(n int) (msgs []tea.Msg, words []string) {
	for i := 1; i <= n; i++ {
		msgs = append(msgs, tui.EventMsg{Event: trace.Event{EventEnd: int64(i)}})
		words = append(words, fmt.Sprint("ev", i))
		if i%40 == 0 {
			msgs = append(msgs, tui.DroppedMsg{N: i})
			words = append(words, "dropped")
		}
	}
	return append(msgs, tui.DoneMsg{}), append(words, "done")
}

// received runs q to its end and returns what it sent, in words, and how
// many batches of events.
func received(q *viewerQueue) (words []string, batches int) {
	q.run(func(m tea.Msg) {
		switch m := m.(type) {
		case tui.EventMsg:
			words = append(words, fmt.Sprint("ev", m.Event.EventEnd))
		case tui.EventsMsg:
			batches++
			for _, e := range m {
				words = append(words, fmt.Sprint("ev", e.Event.EventEnd))
			}
		case tui.DroppedMsg:
			words = append(words, "dropped")
		case tui.DoneMsg:
			words = append(words, "done")
		}
	})
	return words, batches
}

// TestViewerQueue: the queue delivers every message in order, and returns
// after the last one once closed. Events pending together go as one
// EventsMsg, other messages (a drop announced) on their own, between them.
func TestViewerQueue(t *testing.T) {
	t.Run("pending together", func(t *testing.T) {
		msgs, want := queueMsgs(100)
		q := newViewerQueue()
		for _, m := range msgs {
			q.push(m)
		}
		q.close()
		got, batches := received(q)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("delivered\n%v\nwant\n%v", got, want)
		}
		if batches != 3 { // 1-40, 41-80, 81-100
			t.Errorf("%d batches of events, want 3", batches)
		}
	})
	t.Run("pushed while sending", func(t *testing.T) {
		msgs, want := queueMsgs(2000)
		q := newViewerQueue()
		go func() {
			for _, m := range msgs {
				q.push(m)
			}
			q.close()
		}()
		got, _ := received(q)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("delivered %d messages, out of order or not all; want %d", len(got), len(want))
		}
	})
}
