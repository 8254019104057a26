// Package tui is the interactive trace viewer of `gwdiag trace`: the
// verdict (why the request ended as it did, the line `gwdiag trace
// explain` prints) above the event list (# Type Summary), then a detail
// pane showing the selected event as YAML, its snapshot, or the snapshot
// diff, with a status line below. In follow mode (NewFollow) a request
// list (# Request Method Path Status Time) comes first: the verdict, the
// event list and the detail show the selected request.
package tui

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/table"
	"github.com/charmbracelet/bubbles/viewport"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/gwdiag/gwdiag/cli/internal/eventview"
	"github.com/gwdiag/gwdiag/golden/termtext"
	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/explain"
)

// Status lines, agctl's words.
const (
	statusSent     = "request sent, waiting for trace to complete"
	StatusComplete = "stream complete, press q to exit"
	// StatusReading is shown while a long saved capture is being read.
	StatusReading  = "reading the capture..."
	StatusWatching = "waiting for the next request to reach the proxy"
	StatusSending  = "registering the trace, then sending the request"
	statusReceived = "request received, waiting for trace to complete"
)

// EventMsg delivers one trace event to the viewer.
type EventMsg struct {
	Raw   json.RawMessage
	Event trace.Event
}

// EventsMsg delivers trace events in order, as one message: a follow
// stream under load delivers many at once, and the viewer then files them
// all before it redraws, instead of redrawing after each.
type EventsMsg []EventMsg

// SentMsg tells the viewer the injected request was sent.
type SentMsg struct{}

// DoneMsg tells the viewer the stream ended; Err is nil when it completed.
type DoneMsg struct{ Err error }

// DroppedMsg tells the viewer the proxy dropped N events of this trace.
type DroppedMsg struct{ N int }

// mode is what the detail pane shows.
type mode int

// Detail modes, chosen with e, s and d.
const (
	modeRaw mode = iota
	modeSnapshot
	modeDiff
)

func (m mode) title(asJSON bool) string {
	format := "YAML"
	if asJSON {
		format = "JSON"
	}
	switch m {
	case modeSnapshot:
		return "Snapshot (" + format + ")"
	case modeDiff:
		return "Snapshot diff"
	}
	return "Raw event (" + format + ")"
}

type pane int

const (
	paneList pane = iota
	paneDetail
	paneRequests
)

// request is one followed request: its events, and what its row shows.
type request struct {
	id     string
	events []trace.Event
	raws   []json.RawMessage
	// load, for a request of a saved capture, reads its events back: the
	// viewer keeps only the shown request's events, so a capture of any
	// length is viewed in bounded memory.
	load func() ([]trace.Event, []json.RawMessage, error)
}

// Request is one whole request of a saved capture, for RequestsMsg.
type Request struct {
	ID     string
	Events []trace.Event
	Raws   []json.RawMessage
	// Load reads the request's events back when it is shown again.
	Load func() ([]trace.Event, []json.RawMessage, error)
}

// RequestsMsg adds whole requests of a saved capture to a follow viewer,
// in batches, as a reader delivers them. The viewer keeps each request's
// row and drops its events until it is shown (Request.Load).
type RequestsMsg []Request

// Model is the bubbletea model of the viewer.
type Model struct {
	title   string
	events  []trace.Event
	raws    []json.RawMessage
	list    table.Model
	detail  viewport.Model
	focus   pane
	mode    mode
	status  string
	dropped int
	done    bool
	width   int
	height  int
	// asJSON shows the raw event and the snapshot as JSON instead of YAML
	// (key f, as agctl).
	asJSON bool
	// clipboard receives the OSC 52 sequence that copies the details (key
	// c): the terminal, which puts it on the clipboard without a clipboard
	// daemon, also through ssh and tmux.
	clipboard io.Writer

	// follow mode: the requests, by arrival, and their list.
	follow   bool
	requests []*request
	reqList  table.Model
	// shown is 1 + the index of the request whose events the list shows,
	// 0 before any.
	shown int

	// explainer reads the events of a one-request trace as they come;
	// verdict is its line (in follow mode, the shown request's).
	explainer *explain.Explainer
	verdict   string
}

// verdictWaiting is the verdict before any event.
const verdictWaiting = "waiting for the trace"

// New returns a viewer titled title (e.g. the admin URL or file name) whose
// status line starts as status.
func New(title, status string) Model {
	t := table.New(table.WithColumns(columns(80)), table.WithFocused(true))
	st := table.DefaultStyles()
	st.Selected = st.Selected.Reverse(true).Foreground(lipgloss.NoColor{})
	t.SetStyles(st)
	m := Model{title: title, list: t, detail: viewport.New(80, 10), status: status,
		explainer: &explain.Explainer{}, verdict: verdictWaiting}
	m.resize(80, 24)
	return m
}

// WithClipboard returns m copying details (key c) to the terminal w with
// OSC 52; without it, c says it cannot copy.
func (m Model) WithClipboard(w io.Writer) Model {
	m.clipboard = w
	return m
}

// NewFollow returns a viewer of a follow stream: a request list above the
// events of the selected request.
func NewFollow(title, status string) Model {
	m := New(title, status)
	m.follow = true
	r := table.New(table.WithColumns(requestColumns(80)), table.WithFocused(true))
	st := table.DefaultStyles()
	st.Selected = st.Selected.Reverse(true).Foreground(lipgloss.NoColor{})
	r.SetStyles(st)
	m.reqList = r
	m.focus = paneRequests
	m.list.Blur()
	m.resize(80, 24)
	return m
}

func requestColumns(width int) []table.Column {
	num, id, method, status, took := 3, 16, 7, 6, 9
	path := width - (num + 2) - (id + 2) - (method + 2) - (status + 2) - (took + 2) - 2
	if path < 4 { // narrow: the id gives way first
		id = max(4, id-(4-path))
		path = max(4, width-(num+2)-(id+2)-(method+2)-(status+2)-(took+2)-2)
	}
	return []table.Column{{Title: "#", Width: num}, {Title: "Request", Width: id}, {Title: "Method", Width: method},
		{Title: "Path", Width: path}, {Title: "Status", Width: status}, {Title: "Time", Width: took}}
}

// requestRow is a request's row: method and path from its first snapshot,
// the status of its last response snapshot, and its total time.
func requestRow(i int, r *request) table.Row {
	method, path, status, took := "", "", "", "…"
	for _, ev := range r.events {
		if m, p := eventview.Request(ev); method == "" && (m != "" || p != "") {
			method, path = m, p
		}
		if code, ok := eventview.ResponseCode(ev); ok {
			status = strconv.Itoa(code)
		}
		if ev.Type() == trace.RequestFinished {
			us := float64(ev.EventEnd)
			if tm, ok := ev.Message["timings"].(map[string]any); ok {
				if t, ok := tm["totalMicros"].(float64); ok {
					us = t
				}
			}
			took = fmt.Sprintf("%.1fms", us/1000)
		}
	}
	return table.Row{strconv.Itoa(i + 1), termtext.Escape(r.id), termtext.Escape(method), termtext.Escape(path), status, took}
}

// eventRow is the n-th event's row: its label and summary, escaped
// (termtext).
func eventRow(n int, ev trace.Event) table.Row {
	return table.Row{strconv.Itoa(n), termtext.Escape(eventview.Label(ev)), termtext.Escape(eventview.Summary(ev))}
}

func columns(width int) []table.Column {
	// Each cell has one space of padding either side.
	num, typ := 3, 14
	sum := max(10, width-(num+2)-(typ+2)-2)
	return []table.Column{{Title: "#", Width: num}, {Title: "Type", Width: typ}, {Title: "Summary", Width: sum}}
}

// Init starts nothing: events arrive as messages sent by the caller.
func (m Model) Init() tea.Cmd { return nil }

// Update handles keys, window sizes and stream messages.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.resize(msg.Width, msg.Height)
		return m, nil
	case EventsMsg:
		if m.follow {
			m.followEvents(msg)
			return m, nil
		}
		var model tea.Model = m
		for _, ev := range msg {
			model, _ = model.Update(ev)
		}
		return model, nil
	case EventMsg:
		if m.follow {
			m.followEvents([]EventMsg{msg})
			return m, nil
		}
		m.events = append(m.events, msg.Event)
		m.raws = append(m.raws, msg.Raw)
		m.explainer.Add(msg.Event)
		m.verdict = m.explainer.Verdict().Line
		rows := m.list.Rows()
		rows = append(rows, eventRow(len(m.events), msg.Event))
		m.list.SetRows(rows)
		if len(m.events) == 1 {
			m.list.SetCursor(0)
			if m.status == StatusWatching {
				m.status = statusReceived
			}
		}
		m.refreshDetail(len(m.events) == 1)
		return m, nil
	case RequestsMsg:
		m.addRequests(msg)
		return m, nil
	case DroppedMsg:
		m.dropped += msg.N
		return m, nil
	case SentMsg:
		if !m.done {
			m.status = statusSent
		}
		return m, nil
	case copiedMsg:
		m.status = msg.status
		return m, nil
	case DoneMsg:
		m.done = true
		if msg.Err != nil {
			// The hint comes first: a long error is cut at the screen edge,
			// and gwdiag prints it whole after q.
			m.status = "stream failed, press q to exit: " + strings.TrimPrefix(msg.Err.Error(), "trace failed: ")
		} else {
			m.status = StatusComplete
		}
		return m, nil
	case tea.KeyMsg:
		switch msg.String() {
		case "q", "ctrl+c":
			return m, tea.Quit
		case "tab", "shift+tab":
			m.nextPane(msg.String() == "shift+tab")
			return m, nil
		case "e":
			m.setMode(modeRaw)
			return m, nil
		case "s":
			m.setMode(modeSnapshot)
			return m, nil
		case "d":
			m.setMode(modeDiff)
			return m, nil
		case "f":
			m.asJSON = !m.asJSON
			m.refreshDetail(true)
			return m, nil
		case "c":
			return m, m.copyDetails()
		}
		var cmd tea.Cmd
		if m.focus == paneRequests {
			before := m.reqList.Cursor()
			m.reqList, cmd = m.reqList.Update(msg)
			if m.reqList.Cursor() != before {
				m.showRequest(m.reqList.Cursor())
			}
			return m, cmd
		}
		if m.focus == paneList {
			before := m.list.Cursor()
			m.list, cmd = m.list.Update(msg)
			if m.list.Cursor() != before {
				m.refreshDetail(true)
			}
		} else {
			m.detail, cmd = m.detail.Update(msg)
		}
		return m, cmd
	}
	return m, nil
}

// nextPane moves the keyboard to the next pane (the previous one back).
func (m *Model) nextPane(back bool) {
	order := []pane{paneList, paneDetail}
	if m.follow {
		order = []pane{paneRequests, paneList, paneDetail}
	}
	i := 0
	for j, p := range order {
		if p == m.focus {
			i = j
		}
	}
	if back {
		i += len(order) - 1
	} else {
		i++
	}
	m.focus = order[i%len(order)]
	m.list.Blur()
	m.reqList.Blur()
	switch m.focus {
	case paneList:
		m.list.Focus()
	case paneRequests:
		m.reqList.Focus()
	}
}

// followEvents files events under their requests, adding a request when
// it is new, then updates the request list once; the event list shows the
// events of the selected request.
func (m *Model) followEvents(msgs []EventMsg) {
	rows := m.reqList.Rows()
	touched := map[int]bool{}
	first := false
	for _, msg := range msgs {
		idx := -1
		// The request is most likely one of the last ones.
		for i := len(m.requests) - 1; i >= 0; i-- {
			if m.requests[i].id == msg.Event.RequestID {
				idx = i
				break
			}
		}
		if idx < 0 {
			m.requests = append(m.requests, &request{id: msg.Event.RequestID})
			idx = len(m.requests) - 1
			if m.status == StatusWatching {
				m.status = statusReceived
			}
		}
		r := m.requests[idx]
		r.events = append(r.events, msg.Event)
		r.raws = append(r.raws, msg.Raw)
		if idx < len(rows) {
			rows[idx] = requestRow(idx, r)
		} else {
			rows = append(rows, requestRow(idx, r))
		}
		touched[idx] = true
		first = first || len(m.requests) == 1 && len(r.events) == 1
	}
	m.reqList.SetRows(rows)
	if first {
		m.reqList.SetCursor(0)
	}
	if cursor := m.reqList.Cursor(); touched[cursor] {
		m.showRequest(cursor)
	}
}

// addRequests adds whole requests of a saved capture: their rows, and
// their events only for the one shown.
func (m *Model) addRequests(rs RequestsMsg) {
	rows := m.reqList.Rows()
	for _, q := range rs {
		r := &request{id: q.ID, events: q.Events, raws: q.Raws, load: q.Load}
		m.requests = append(m.requests, r)
		rows = append(rows, requestRow(len(m.requests)-1, r))
		if r.load != nil && len(m.requests)-1 != m.reqList.Cursor() {
			r.events, r.raws = nil, nil
		}
	}
	m.reqList.SetRows(rows)
	if len(m.requests) == len(rs) && len(rs) > 0 {
		m.reqList.SetCursor(0)
		m.showRequest(0)
	}
}

// showRequest puts the request's events in the event list, keeping the
// event cursor when the request stays the same. A request of a saved
// capture is read back, and the one shown before is let go.
func (m *Model) showRequest(idx int) {
	if idx < 0 || idx >= len(m.requests) {
		return
	}
	r := m.requests[idx]
	if r.events == nil && r.load != nil {
		var err error
		if r.events, r.raws, err = r.load(); err != nil {
			m.status = fmt.Sprintf("request %d: %v", idx+1, err)
		}
	}
	if prev := m.shown - 1; prev >= 0 && prev != idx && m.requests[prev].load != nil {
		m.requests[prev].events, m.requests[prev].raws = nil, nil
	}
	m.shown = idx + 1
	same := len(m.events) > 0 && m.events[0].RequestID == r.id
	m.events, m.raws = r.events, r.raws
	m.verdict = explain.Events(r.events).Line
	rows := make([]table.Row, 0, len(r.events))
	for i, ev := range r.events {
		rows = append(rows, eventRow(i+1, ev))
	}
	cursor := m.list.Cursor()
	m.list.SetRows(rows)
	if !same {
		cursor = 0
	}
	m.list.SetCursor(min(cursor, len(rows)-1))
	m.refreshDetail(!same)
}

// copiedMsg reports what copying the details did, for the status line.
type copiedMsg struct{ status string }

// copyDetails copies the detail pane's text, as shown (mode and format),
// to the clipboard with the terminal's OSC 52 sequence.
func (m Model) copyDetails() tea.Cmd {
	text, w := m.detailText(), m.clipboard
	return func() tea.Msg {
		if w == nil {
			return copiedMsg{"cannot copy: no terminal to send the details to"}
		}
		seq := "\x1b]52;c;" + base64.StdEncoding.EncodeToString([]byte(text)) + "\a"
		if _, err := io.WriteString(w, seq); err != nil {
			return copiedMsg{"cannot copy the details: " + err.Error()}
		}
		return copiedMsg{fmt.Sprintf("details copied (%d bytes, OSC 52: the terminal must allow clipboard access)", len(text))}
	}
}

func (m *Model) setMode(mode mode) {
	m.mode = mode
	m.refreshDetail(true)
}

// Layout rows: title, verdict, list header, list rows, detail title,
// detail rows, status, help.
const chromeRows = 6

func (m *Model) resize(w, h int) {
	m.width, m.height = max(w, 20), max(h, chromeRows+4)
	body := m.height - chromeRows
	if m.follow {
		// A title row and a header row for the request list.
		reqRows := max(2, body/4)
		body -= reqRows + 2
		m.reqList.SetColumns(requestColumns(m.width))
		m.reqList.SetWidth(m.width)
		m.reqList.SetHeight(reqRows + 1)
	}
	listRows := body / 2
	m.list.SetColumns(columns(m.width))
	m.list.SetWidth(m.width)
	m.list.SetHeight(listRows + 1) // table height counts its header row
	m.detail.Width = m.width
	m.detail.Height = body - listRows
	m.refreshDetail(false)
}

func (m *Model) refreshDetail(top bool) {
	m.detail.SetContent(lipgloss.NewStyle().Width(m.width).Render(m.detailText()))
	if top {
		m.detail.GotoTop()
	}
}

// detailText is the detail pane's text, escaped (termtext): a proxy's
// strings are shown, never obeyed.
func (m Model) detailText() string { return termtext.Escape(m.details()) }

func (m Model) details() string {
	i := m.list.Cursor()
	if len(m.events) == 0 || i < 0 || i >= len(m.events) {
		return "no events yet"
	}
	switch m.mode {
	case modeSnapshot:
		j := eventview.SnapshotAt(m.events, i)
		if j < 0 {
			return "no snapshot at or before this event"
		}
		if m.asJSON {
			return eventview.SnapshotJSON(m.events[j])
		}
		return eventview.SnapshotText(m.events[j])
	case modeDiff:
		return eventview.DiffText(m.events, i)
	}
	if m.asJSON {
		return eventview.JSON(m.raws[i])
	}
	return eventview.YAML(m.raws[i])
}

var (
	focusStyle   = lipgloss.NewStyle().Bold(true).Reverse(true)
	blurStyle    = lipgloss.NewStyle().Faint(true)
	statusStyle  = lipgloss.NewStyle().Bold(true)
	verdictStyle = lipgloss.NewStyle().Bold(true)
	helpStyle    = lipgloss.NewStyle().Faint(true)
	lineTruncate = lipgloss.NewStyle().Inline(true)
)

// View renders the whole screen, exactly m.height lines of at most m.width cells.
func (m Model) View() string {
	trunc := lineTruncate.MaxWidth(m.width)
	paneTitle := func(name string, p pane) string {
		marker := "  "
		style := blurStyle
		if m.focus == p {
			marker, style = "> ", focusStyle
		}
		return style.Render(trunc.Render(marker + termtext.Escape(name)))
	}
	var b strings.Builder
	if m.follow {
		b.WriteString(paneTitle(fmt.Sprintf("Requests (%d) · %s", len(m.requests), m.title), paneRequests))
		b.WriteByte('\n')
		b.WriteString(m.reqList.View())
		b.WriteByte('\n')
		b.WriteString(paneTitle(fmt.Sprintf("Events (%d) of request %s", len(m.events), m.selectedID()), paneList))
	} else {
		b.WriteString(paneTitle(fmt.Sprintf("Events (%d) · %s", len(m.events), m.title), paneList))
	}
	b.WriteByte('\n')
	b.WriteString(verdictStyle.Render(trunc.Render("Verdict: " + termtext.Escape(m.verdict))))
	b.WriteByte('\n')
	b.WriteString(m.list.View())
	b.WriteByte('\n')
	detailTitle := m.mode.title(m.asJSON)
	if len(m.events) > 0 {
		detailTitle += fmt.Sprintf(" · event %d of %d", m.list.Cursor()+1, len(m.events))
	}
	b.WriteString(paneTitle(detailTitle, paneDetail))
	b.WriteByte('\n')
	b.WriteString(m.detail.View())
	b.WriteByte('\n')
	status := m.status
	if m.dropped > 0 {
		status += fmt.Sprintf(" (the proxy dropped %d events)", m.dropped)
	}
	b.WriteString(statusStyle.Render(trunc.Render(termtext.Escape(status))))
	b.WriteByte('\n')
	b.WriteString(helpStyle.Render(trunc.Render("tab pane · ↑↓ scroll · e/s/d event/snapshot/diff · f yaml/json · c copy · q quit")))
	return b.String()
}

func (m Model) selectedID() string {
	if i := m.reqList.Cursor(); i >= 0 && i < len(m.requests) {
		return m.requests[i].id
	}
	return "-"
}

// Focus reports which pane has the keyboard: "requests", "list" or
// "detail".
func (m Model) Focus() string {
	switch m.focus {
	case paneList:
		return "list"
	case paneRequests:
		return "requests"
	}
	return "detail"
}

// Requests returns the ids of the followed requests, in arrival order.
func (m Model) Requests() []string {
	ids := make([]string, len(m.requests))
	for i, r := range m.requests {
		ids[i] = r.id
	}
	return ids
}

// SelectedRequest returns the index of the selected request.
func (m Model) SelectedRequest() int { return m.reqList.Cursor() }

// mode returns the detail mode.
func (m Model) Mode() mode { return m.mode }

// Status returns the status line.
func (m Model) Status() string { return m.status }

// Verdict returns the verdict line (without its "Verdict: " label).
func (m Model) Verdict() string { return m.verdict }

// Events returns the events received so far.
func (m Model) Events() []trace.Event { return m.events }

// Selected returns the index of the selected event.
func (m Model) Selected() int { return m.list.Cursor() }

// DetailOffset returns how far the detail pane is scrolled, in lines.
func (m Model) DetailOffset() int { return m.detail.YOffset }
