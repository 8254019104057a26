package tui

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/gwdiag/gwdiag/golden/trace"
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

// TestSavedCaptureKeepsOnlyTheShownRequest: the requests of a long saved
// capture arrive in batches; the viewer keeps every row but the events of
// the shown request only, reads a request back when it is selected and
// lets the one shown before go.
func TestSavedCaptureKeepsOnlyTheShownRequest(t *testing.T) {
	msgs := loadTrace(t)
	const n = 5000
	loads := make([]int, n)
	request := func(i int) Request {
		id := fmt.Sprintf("%016x", i)
		events := func() ([]trace.Event, []json.RawMessage) {
			var evs []trace.Event
			var raws []json.RawMessage
			for _, m := range msgs {
				ev := m.Event
				ev.RequestID = id
				evs, raws = append(evs, ev), append(raws, m.Raw)
			}
			return evs, raws
		}
		evs, raws := events()
		return Request{ID: id, Events: evs, Raws: raws, Load: func() ([]trace.Event, []json.RawMessage, error) {
			loads[i]++
			evs, raws := events()
			return evs, raws, nil
		}}
	}
	var m tea.Model = NewFollow("capture.jsonl", StatusReading)
	m, _ = m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	for start := 0; start < n; start += 512 {
		var batch RequestsMsg
		for i := start; i < min(start+512, n); i++ {
			batch = append(batch, request(i))
		}
		m, _ = m.Update(batch)
	}
	m, _ = m.Update(DoneMsg{})
	held := func() []int {
		var out []int
		for i, r := range m.(Model).requests {
			if r.events != nil {
				out = append(out, i)
			}
		}
		return out
	}
	if got := held(); fmt.Sprint(got) != "[0]" {
		t.Errorf("after reading: events held for requests %v, want [0]", got)
	}
	if v := m.View(); !strings.Contains(v, fmt.Sprintf("Requests (%d)", n)) || !strings.Contains(v, "0000000000000000") {
		t.Errorf("view lacks the request count or the first request:\n%s", v)
	}
	m, _ = m.Update(tea.KeyMsg{Type: tea.KeyDown})
	m, _ = m.Update(tea.KeyMsg{Type: tea.KeyDown})
	if got := held(); fmt.Sprint(got) != "[2]" {
		t.Errorf("after two downs: events held for requests %v, want [2]", got)
	}
	if loads[1] != 1 || loads[2] != 1 || loads[0] != 0 {
		t.Errorf("loads of requests 0, 1, 2: %d %d %d, want 0 1 1", loads[0], loads[1], loads[2])
	}
	if got := m.(Model).Events(); len(got) != len(msgs) || got[0].RequestID != fmt.Sprintf("%016x", 2) {
		t.Errorf("event list shows %d events of %q, want %d of request 3", len(got), got[0].RequestID, len(msgs))
	}
}
