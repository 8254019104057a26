package tui

import (
	"math/rand/v2"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/golden/trace/sse/ssetest"
)

// recordedFollow is the reference proxy's recorded follow stream (48
// interleaved requests) as the viewer gets it.
func recordedFollow(t *testing.T) []EventMsg {
	t.Helper()
	var out []EventMsg
	err := sse.ReadCaptureFile(ssetest.FollowFile(), nil, func(c sse.Captured) error {
		out = append(out, EventMsg{Raw: c.Raw, Event: c.Event})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFollowEventsBatch: events delivered in batches (EventsMsg) leave
// the viewer as they do one by one, whatever the batches and wherever the
// user moves in between: the same screen after every batch.
func TestFollowEventsBatch(t *testing.T) {
	for _, msgs := range [][]EventMsg{followMsgs(t), recordedFollow(t)} {
		r := rand.New(rand.NewPCG(31, uint64(len(msgs))))
		var one, batched tea.Model = NewFollow("t", StatusWatching), NewFollow("t", StatusWatching)
		size := tea.WindowSizeMsg{Width: 120, Height: 40}
		one, _ = one.Update(size)
		batched, _ = batched.Update(size)
		for i := 0; i < len(msgs); {
			n := min(1+r.IntN(30), len(msgs)-i)
			for _, m := range msgs[i : i+n] {
				one, _ = one.Update(m)
			}
			batched, _ = batched.Update(EventsMsg(msgs[i : i+n]))
			i += n
			if a, b := one.View(), batched.View(); a != b {
				t.Fatalf("after %d of %d events, one by one:\n%s\n\nin batches:\n%s", i, len(msgs), a, b)
			}
			if r.IntN(4) == 0 { // the user moves in the request list
				key := tea.KeyMsg{Type: []tea.KeyType{tea.KeyDown, tea.KeyUp, tea.KeyEnd}[r.IntN(3)]}
				one, _ = one.Update(key)
				batched, _ = batched.Update(key)
			}
		}
	}
}
