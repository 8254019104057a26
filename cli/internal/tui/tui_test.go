package tui

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/explain"
)

// loadTrace reads testdata/trace.jsonl, a full twelve-event standalone trace.
func loadTrace(t testing.TB) []EventMsg {
	t.Helper()
	f, err := os.Open("testdata/trace.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []EventMsg
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		raw := append(json.RawMessage(nil), sc.Bytes()...)
		ev, err := trace.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, EventMsg{Raw: raw, Event: ev})
	}
	if len(out) != 12 {
		t.Fatalf("testdata/trace.jsonl has %d events, want 12", len(out))
	}
	return out
}

// waitFor waits until the program has drawn a frame containing s.
func waitFor(t *testing.T, tm *teatest.TestModel, s string) {
	t.Helper()
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		return bytes.Contains(b, []byte(s))
	}, teatest.WithDuration(5*time.Second), teatest.WithCheckInterval(5*time.Millisecond))
}

// start runs a viewer at 80x24 that has received the whole trace and the
// "request sent" signal.
func start(t *testing.T, done bool) *teatest.TestModel {
	t.Helper()
	tm := teatest.NewTestModel(t, New("http://127.0.0.1:15000", StatusSending), teatest.WithInitialTermSize(80, 24))
	t.Cleanup(func() { _ = tm.Quit() })
	tm.Send(SentMsg{})
	for _, ev := range loadTrace(t) {
		tm.Send(ev)
	}
	if done {
		tm.Send(DoneMsg{})
	}
	return tm
}

// finish quits with q and returns the final model. Keys go through Send, like
// the events, so the program handles everything in order.
func finish(t *testing.T, tm *teatest.TestModel) Model {
	t.Helper()
	tm.Send(keyMsg("q"))
	return tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(Model)
}

// frame is the screen as text, without colours, for golden comparison.
func frame(m Model) []byte { return []byte(ansi.Strip(m.View()) + "\n") }

func TestGoldenFrames(t *testing.T) {
	tests := []struct {
		name  string
		done  bool
		keys  []string // typed one by one
		await string   // drawn after the last key
		check func(t *testing.T, m Model)
	}{
		{name: "list", await: "Events (12)", check: func(t *testing.T, m Model) {
			if m.Status() != statusSent {
				t.Errorf("status = %q, want %q", m.Status(), statusSent)
			}
		}},
		{name: "raw_event", keys: []string{"down", "down", "down", "e"}, await: `selectedRoute: default/default/bind/3000/listener0/default/httpbin`,
			check: func(t *testing.T, m Model) {
				if m.Selected() != 3 || m.Mode() != modeRaw {
					t.Errorf("selected %d mode %v, want 3 raw", m.Selected(), m.Mode())
				}
			}},
		{name: "snapshot", keys: []string{"down", "down", "down", "down", "down", "s"}, await: "route policies (requestSnapshot)",
			check: func(t *testing.T, m Model) {
				if m.Mode() != modeSnapshot {
					t.Errorf("mode = %v, want snapshot", m.Mode())
				}
			}},
		{name: "snapshot_diff", keys: []string{"down", "down", "down", "down", "down", "d"}, await: `+ request.headers.x-added: "yes"`,
			check: func(t *testing.T, m Model) {
				if m.Mode() != modeDiff {
					t.Errorf("mode = %v, want diff", m.Mode())
				}
			}},
		{name: "stream_complete", done: true, await: StatusComplete, check: func(t *testing.T, m Model) {
			if m.Status() != StatusComplete {
				t.Errorf("status = %q, want %q", m.Status(), StatusComplete)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tm := start(t, tt.done)
			for _, k := range tt.keys {
				tm.Send(keyMsg(k))
			}
			m := finish(t, tm)
			if !strings.Contains(m.View(), tt.await) {
				t.Errorf("screen lacks %q:\n%s", tt.await, ansi.Strip(m.View()))
			}
			tt.check(t, m)
			golden.RequireEqual(t, frame(m))
		})
	}
}

// keyMsg builds the key message bubbletea would read for a key name.
func keyMsg(k string) tea.KeyMsg {
	switch k {
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "up":
		return tea.KeyMsg{Type: tea.KeyUp}
	case "tab":
		return tea.KeyMsg{Type: tea.KeyTab}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
}

// TestDrawsToTerminal checks the program really draws: the output stream, not
// only the model, carries the list.
func TestDrawsToTerminal(t *testing.T) {
	tm := start(t, true)
	waitFor(t, tm, "Backend Result")
	finish(t, tm)
}

func TestStaysOpenAfterStreamComplete(t *testing.T) {
	tm := start(t, true)
	// Still running: a key after the stream ended changes the screen.
	tm.Send(keyMsg("s"))
	m := finish(t, tm)
	if m.Mode() != modeSnapshot {
		t.Errorf("mode = %v, want snapshot: keys must work after the stream completes", m.Mode())
	}
}

func TestTabMovesArrowsToDetailPane(t *testing.T) {
	tm := start(t, true)
	tm.Send(keyMsg("down")) // list: select event 2, a long snapshot
	tm.Send(keyMsg("tab"))
	for range 3 {
		tm.Send(keyMsg("down"))
	}
	tm.Send(keyMsg("tab"))
	m := finish(t, tm)
	if m.Selected() != 1 {
		t.Errorf("selected = %d, want 1: arrows in the detail pane must not move the list", m.Selected())
	}
	if m.DetailOffset() != 3 {
		t.Errorf("detail offset = %d, want 3", m.DetailOffset())
	}
	if m.Focus() != "list" {
		t.Errorf("focus = %s, want list after the second tab", m.Focus())
	}
}

func TestResize(t *testing.T) {
	tm := start(t, true)
	tm.Send(tea.WindowSizeMsg{Width: 120, Height: 40})
	tm.Send(keyMsg("e"))
	m := finish(t, tm)
	checkSize(t, m.View(), 120, 40)
	golden.RequireEqual(t, frame(m))
}

// checkSize asserts the screen is exactly h lines of at most w cells.
func checkSize(t *testing.T, view string, w, h int) {
	t.Helper()
	lines := strings.Split(view, "\n")
	if len(lines) != h {
		t.Errorf("view has %d lines, want %d", len(lines), h)
	}
	for i, l := range lines {
		if got := ansi.StringWidth(l); got > w {
			t.Errorf("line %d is %d cells wide, want <= %d: %q", i+1, got, w, ansi.Strip(l))
		}
	}
}

func TestViewFitsTerminal(t *testing.T) {
	events := loadTrace(t)
	for _, size := range []struct{ w, h int }{{80, 24}, {120, 40}, {60, 16}, {200, 60}} {
		for _, mode := range []string{"e", "s", "d"} {
			t.Run(fmt.Sprintf("%dx%d_%s", size.w, size.h, mode), func(t *testing.T) {
				var m tea.Model = New("file.jsonl", StatusComplete)
				m, _ = m.Update(tea.WindowSizeMsg{Width: size.w, Height: size.h})
				for _, ev := range events {
					m, _ = m.Update(ev)
				}
				m, _ = m.Update(keyMsg("down"))
				m, _ = m.Update(keyMsg(mode))
				checkSize(t, m.View(), size.w, size.h)
			})
		}
	}
}

func TestStatusLine(t *testing.T) {
	events := loadTrace(t)
	tests := []struct {
		name  string
		start string
		msgs  []tea.Msg
		want  string
	}{
		{"inject before send", StatusSending, nil, StatusSending},
		{"inject sent", StatusSending, []tea.Msg{SentMsg{}}, statusSent},
		{"watch waiting", StatusWatching, nil, StatusWatching},
		{"watch got a request", StatusWatching, []tea.Msg{events[0]}, statusReceived},
		{"complete", StatusSending, []tea.Msg{SentMsg{}, events[0], DoneMsg{}}, StatusComplete},
		{"sent after done keeps complete", StatusSending, []tea.Msg{DoneMsg{}, SentMsg{}}, StatusComplete},
		{"stream error", StatusWatching, []tea.Msg{DoneMsg{Err: fmt.Errorf("trace failed: boom")}}, "stream failed, press q to exit: boom"},
		{"dropped events", StatusSending, []tea.Msg{SentMsg{}, DroppedMsg{N: 2}, DroppedMsg{N: 1}}, statusSent + " (the proxy dropped 3 events)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m tea.Model = New("x", tt.start)
			for _, msg := range tt.msgs {
				m, _ = m.Update(msg)
			}
			lines := strings.Split(ansi.Strip(m.View()), "\n")
			if got := lines[len(lines)-2]; got != tt.want {
				t.Errorf("status line = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestQuitKeys(t *testing.T) {
	for _, k := range []tea.KeyMsg{keyMsg("q"), {Type: tea.KeyCtrlC}} {
		_, cmd := New("x", StatusComplete).Update(k)
		if cmd == nil {
			t.Fatalf("%s: no command, want tea.Quit", k)
		}
		if _, ok := cmd().(tea.QuitMsg); !ok {
			t.Errorf("%s: command does not quit", k)
		}
	}
}

// press sends one key to m and runs the command it returns, feeding the
// command's message back, as the program would.
func press(m Model, key string) Model {
	next, cmd := m.Update(keyMsg(key))
	m = next.(Model)
	if cmd != nil {
		if msg := cmd(); msg != nil {
			next, _ = m.Update(msg)
			m = next.(Model)
		}
	}
	return m
}

// TestFormatAndCopyKeys: f switches the details between YAML and JSON, as
// agctl's newer viewer does; c copies the details as shown to the
// terminal's clipboard with OSC 52.
func TestFormatAndCopyKeys(t *testing.T) {
	var term bytes.Buffer
	m := New("t", StatusComplete).WithClipboard(&term)
	for _, ev := range loadTrace(t) {
		next, _ := m.Update(ev)
		m = next.(Model)
	}
	for _, k := range []string{"down", "down", "down"} { // routeSelection
		m = press(m, k)
	}
	tests := []struct {
		name, key string
		title     string
		detail    string
	}{
		{"YAML by default", "", "Raw event (YAML) · event 4 of 12", "selectedRoute: default/default/bind/3000/listener0/default/httpbin"},
		{"f: JSON", "f", "Raw event (JSON) · event 4 of 12", `"selectedRoute": "default/default/bind/3000/listener0/default/httpbin"`},
		{"snapshot stays JSON", "s", "Snapshot (JSON) · event 4 of 12", `"method": "POST"`},
		{"f again: YAML", "f", "Snapshot (YAML) · event 4 of 12", "method: POST"},
	}
	for _, tt := range tests {
		if tt.key != "" {
			m = press(m, tt.key)
		}
		view := ansi.Strip(m.View())
		if !strings.Contains(view, tt.title) || !strings.Contains(m.detailText(), tt.detail) {
			t.Errorf("%s: want title %q and details with %q; screen:\n%s\ndetails:\n%s", tt.name, tt.title, tt.detail, view, m.detailText())
		}
	}

	m = press(m, "f") // JSON snapshot
	want := "\x1b]52;c;" + base64.StdEncoding.EncodeToString([]byte(m.detailText())) + "\a"
	m = press(m, "c")
	if term.String() != want {
		t.Errorf("c wrote %q to the terminal, want OSC 52 of the details %q", term.String(), want)
	}
	if !strings.HasPrefix(m.Status(), "details copied (") {
		t.Errorf("status after c = %q, want it to say the details were copied", m.Status())
	}

	none := press(New("t", StatusComplete), "c")
	if !strings.HasPrefix(none.Status(), "cannot copy") {
		t.Errorf("c without a terminal: status %q, want cannot copy", none.Status())
	}
}

// TestRealProxyEventsInTheList: the event types of the real proxy's newer
// releases show agctl's label and summary in the list (agctl's own test
// inputs, golden/trace/sse/testdata/agentgateway).
func TestRealProxyEventsInTheList(t *testing.T) {
	m := New("t", StatusComplete)
	for _, f := range []string{"trace_test-policyEvent-cors.jsonl", "trace_test-traceSampling.jsonl"} {
		raw, err := os.ReadFile("../../../golden/trace/sse/testdata/agentgateway/" + f)
		if err != nil {
			t.Fatal(err)
		}
		raw = bytes.TrimSpace(raw)
		ev, err := trace.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		next, _ := m.Update(EventMsg{Raw: raw, Event: ev})
		m = next.(Model)
	}
	view := ansi.Strip(m.View())
	for _, want := range []string{"Policy Event    cors: request has no Origin header", "Tracing         sample (client)"} {
		if !strings.Contains(view, want) {
			t.Errorf("list lacks %q:\n%s", want, view)
		}
	}
}

// readEvents reads a JSON Lines trace as viewer messages.
func readEvents(t *testing.T, path string) []EventMsg {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []EventMsg
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		raw := append(json.RawMessage(nil), sc.Bytes()...)
		ev, err := trace.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, EventMsg{Raw: raw, Event: ev})
	}
	return out
}

// TestVerdictAboveEvents: the viewer draws the verdict `gwdiag trace
// explain` prints (explain.Events) above the event list, updated as the
// events come: for refproxy's trace of a 429 (testdata/refproxy-429.jsonl,
// taken from refproxy with `gwdiag trace --raw`), its reason; for a real
// agentgateway trace (golden/trace/sse/testdata/agentgateway), what the
// events show and that the proxy gave no reason.
func TestVerdictAboveEvents(t *testing.T) {
	for _, tt := range []struct {
		file, want string
	}{
		{"testdata/refproxy-429.jsonl", "Verdict: 429 from route default/api: localRateLimit[0] (1 request per minute) exhausted, resets in 12 s"},
		{"../../../golden/trace/sse/testdata/agentgateway/k8s-12x.docs.jsonl",
			"Verdict: 200 from route httpbin/httpbin.00.http: backend 10.244.0.7:8080 answered 200; the proxy gave no reason"},
	} {
		t.Run(tt.file, func(t *testing.T) {
			tm := teatest.NewTestModel(t, New("t", StatusWatching), teatest.WithInitialTermSize(160, 30))
			t.Cleanup(func() { _ = tm.Quit() })
			waitFor(t, tm, "Verdict: "+verdictWaiting)
			evs := readEvents(t, tt.file)
			for _, ev := range evs {
				tm.Send(ev)
			}
			tm.Send(DoneMsg{})
			waitFor(t, tm, tt.want)
			m := finish(t, tm)
			var events []trace.Event
			for _, ev := range evs {
				events = append(events, ev.Event)
			}
			if got, want := m.Verdict(), explain.Events(events).Line; got != want {
				t.Errorf("verdict %q, trace explain's line %q", got, want)
			}
			lines := strings.Split(ansi.Strip(m.View()), "\n")
			if !strings.HasPrefix(lines[1], tt.want) || !strings.Contains(lines[2], "Type") {
				t.Errorf("want the verdict on line 2, above the event list:\n%s", strings.Join(lines[:4], "\n"))
			}
		})
	}
}

// planted are the control sequences testdata/terminal-escapes.jsonl plants
// in a trace (DERIVED from refproxy-429.jsonl): the request's path and
// user-agent (a client's), the route's name and the refusal's reason (a
// proxy's). Each must be shown escaped, never written as it is.
var planted = []string{
	"\x1b]52;c;", // OSC 52: set the clipboard
	"\x1b[2K",    // erase the line
	"\u009b1A",   // C1 CSI: cursor up
	"\u202e",     // right-to-left override
	"\r200 OK",   // return, to overwrite the line
	"\x1b[8m",    // conceal
}

// TestViewerShowsNeverObeys: whatever a trace's strings hold, the viewer
// writes no control sequence of theirs to the terminal, in the list, the
// verdict, each detail mode and format, and what c copies; it shows them
// escaped instead.
func TestViewerShowsNeverObeys(t *testing.T) {
	var term bytes.Buffer
	m := New("t", StatusComplete).WithClipboard(&term)
	m.resize(400, 60)
	for _, ev := range readEvents(t, "testdata/terminal-escapes.jsonl") {
		next, _ := m.Update(ev)
		m = next.(Model)
	}
	seen := ""
	check := func(where, s string) {
		t.Helper()
		for _, p := range planted {
			if strings.Contains(s, p) {
				t.Errorf("%s writes %q as it is:\n%q", where, p, s)
			}
		}
		seen += s
	}
	check("the verdict", m.Verdict())
	for i := range m.Events() {
		for _, keys := range [][]string{{}, {"f"}, {"s"}, {"f"}, {"d"}, {"e"}} {
			for _, k := range keys {
				m = press(m, k)
			}
			check(fmt.Sprintf("event %d, %s", i+1, m.Mode().title(m.asJSON)), m.View())
		}
		m = press(m, "c")
		copied, _ := strings.CutSuffix(strings.TrimPrefix(term.String(), "\x1b]52;c;"), "\a")
		b, err := base64.StdEncoding.DecodeString(copied)
		if err != nil {
			t.Fatalf("c wrote %q: %v", term.String(), err)
		}
		check(fmt.Sprintf("event %d copied", i+1), string(b))
		term.Reset()
		m = press(m, "down")
	}
	for _, shown := range []string{`\u001b]52;c;cm0gLXJmIH4=\u0007\u001b[2K\u009b1A`, `default/api\u202e`, `curl/7.88.1\u001b[8m`} {
		if !strings.Contains(seen, shown) {
			t.Errorf("the viewer never shows %s", shown)
		}
	}
}
