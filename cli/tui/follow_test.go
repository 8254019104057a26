package tui

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"
)

// followMsgs is two copies of the test trace as a follow stream carries
// them: interleaved, each event with its request's id, requestFinished
// with timings.
func followMsgs(t *testing.T) []EventMsg {
	t.Helper()
	var a, b []EventMsg
	for i, id := range []string{"aaaa000000000001", "bbbb000000000002"} {
		for _, m := range loadTrace(t) {
			ev := m.Event
			ev.RequestID = id
			if ev.Type() == "requestFinished" {
				msg := map[string]any{}
				for k, v := range ev.Message {
					msg[k] = v
				}
				msg["timings"] = map[string]any{"totalMicros": float64(1500 * (i + 1))}
				ev.Message = msg
			}
			raw, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				a = append(a, EventMsg{Raw: raw, Event: ev})
			} else {
				b = append(b, EventMsg{Raw: raw, Event: ev})
			}
		}
	}
	var out []EventMsg
	for i := range a {
		out = append(out, a[i], b[i])
	}
	return out
}

// TestFollowViewer: interleaved events are filed under their requests; the
// request list shows each with method, path, status and time; the event
// list shows the selected request's events, and moving in the request
// list switches them; tab goes requests, events, detail.
func TestFollowViewer(t *testing.T) {
	tm := teatest.NewTestModel(t, NewFollow("http://127.0.0.1:15000", StatusWatching), teatest.WithInitialTermSize(100, 30))
	t.Cleanup(func() { _ = tm.Quit() })
	for _, m := range followMsgs(t) {
		tm.Send(m)
	}
	tm.Send(DoneMsg{})
	tm.Send(keyMsg("down")) // the second request
	tm.Send(keyMsg("tab"))  // the event list
	tm.Send(keyMsg("down"))
	m := finish(t, tm)
	if got := m.Requests(); !slices.Equal(got, []string{"aaaa000000000001", "bbbb000000000002"}) {
		t.Errorf("requests %q", got)
	}
	if m.SelectedRequest() != 1 || len(m.Events()) != 12 || m.Events()[0].RequestID != "bbbb000000000002" {
		t.Errorf("selected request %d with %d events of %q; want the second, 12 events", m.SelectedRequest(), len(m.Events()), m.Events()[0].RequestID)
	}
	if m.Focus() != "list" || m.Selected() != 1 {
		t.Errorf("focus %s, event %d; want the event list, event 2", m.Focus(), m.Selected())
	}
	if m.Status() != StatusComplete {
		t.Errorf("status %q", m.Status())
	}
	golden.RequireEqual(t, frame(m))
}

// TestFollowViewerFitsTerminal: the follow layout is exactly the
// terminal's size, in every pane and mode.
func TestFollowViewerFitsTerminal(t *testing.T) {
	msgs := followMsgs(t)
	for _, size := range []struct{ w, h int }{{80, 24}, {120, 40}, {60, 16}, {200, 60}} {
		for _, keys := range [][]string{nil, {"down"}, {"tab", "down", "s"}, {"tab", "tab", "d"}} {
			t.Run(fmt.Sprintf("%dx%d_%v", size.w, size.h, keys), func(t *testing.T) {
				var m tea.Model = NewFollow("http://127.0.0.1:15000", StatusWatching)
				m, _ = m.Update(tea.WindowSizeMsg{Width: size.w, Height: size.h})
				for _, ev := range msgs {
					m, _ = m.Update(ev)
				}
				for _, k := range keys {
					m, _ = m.Update(keyMsg(k))
				}
				checkSize(t, m.View(), size.w, size.h)
			})
		}
	}
}
