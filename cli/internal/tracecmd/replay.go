package tracecmd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/cli/internal/scrub"
	"github.com/gwdiag/gwdiag/cli/internal/tui"
	"github.com/gwdiag/gwdiag/golden/termtext"
	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
)

// replay shows a saved trace (JSON Lines or an SSE capture; - for stdin):
// with --raw each event as one JSON line, printed as it is read, else in
// the viewer. A trace with bad lines shows its valid events first, then
// fails naming each bad line, as agctl does.
//
// The viewer opens at once: the capture is read trace by trace while it
// runs. A capture of several requests (followed, or appended with >>)
// shows the request list; a request's events are read back from the file
// when it is shown, so only its row stays in memory otherwise.
func replay(cmd *cobra.Command, o *options, sc *scrub.Scrubber) error {
	if o.raw || o.otlp.endpoint != "" {
		// --raw prints each event, redacted; --otlp sends the same
		// bytes to the collector, trace by trace (without --raw, only
		// that).
		var out io.Writer = io.Discard
		if o.raw {
			out = cmd.OutOrStdout()
		}
		var sink *otlpSink
		if o.otlp.endpoint != "" {
			var err error
			if sink, err = o.otlp.sink(); err != nil {
				return err
			}
			out = io.MultiWriter(out, sink)
		}
		w := bufio.NewWriterSize(out, 1<<16)
		events := sc.Events()
		err := sse.ReadCaptureFile(o.file, cmd.InOrStdin(), func(c sse.Captured) error {
			raw, _ := events.Raw(c.Raw, trace.HeaderOf(c.Event))
			w.Write(raw)
			return w.WriteByte('\n')
		})
		if ferr := w.Flush(); err == nil {
			err = ferr
		}
		if sink != nil {
			err = errors.Join(err, sink.Close(cmd.ErrOrStderr()))
		}
		return err
	}
	name := sse.InputName(o.file)
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	traces, readErr := readInBackground(ctx, o.file, cmd.InOrStdin(), sc.Events())
	index := newLineIndex(ctx, o.file)
	index.scrub = sc
	first, ok := <-traces
	second, more := <-traces
	if !ok {
		if err := <-readErr; err != nil {
			return err
		}
	}
	var view tui.Model
	var held []tui.Request
	if first.ID == "" && !more {
		// One request without id: the event viewer.
		view = tui.New(name, tui.StatusComplete)
		m := tea.Model(view)
		for _, c := range first.Events {
			m, _ = m.Update(tui.EventMsg{Raw: c.Raw, Event: c.Event})
		}
		view = m.(tui.Model)
	} else {
		view = tui.NewFollow(name, tui.StatusReading)
		held = append(held, index.request(first))
		if more {
			held = append(held, index.request(second))
		}
		m, _ := view.Update(tui.RequestsMsg(held))
		view = m.(tui.Model)
	}
	if !more {
		m, _ := view.Update(tui.DoneMsg{Err: <-readErr})
		view = m.(tui.Model)
	}
	in := cmd.InOrStdin()
	// The viewer takes the terminal as it is (trace.go's run).
	out := termtext.Unwrap(cmd.OutOrStdout())
	if err := needTerminal(nil, out); err != nil {
		return err
	}
	if o.file == "-" {
		// stdin carried the trace: read keys from the terminal instead.
		tty, err := os.Open("/dev/tty")
		if err != nil {
			return fmt.Errorf("the trace came on stdin and there is no terminal for the viewer: %w (use --raw)", err)
		}
		defer tty.Close()
		in = tty
	} else if err := needTerminal(in, nil); err != nil {
		return err
	}
	prog := tea.NewProgram(view.WithClipboard(out), tea.WithAltScreen(), tea.WithInput(in), tea.WithOutput(out), tea.WithContext(cmd.Context()))
	fed := make(chan error, 1)
	if more {
		go func() { fed <- feed(prog, traces, readErr, index) }()
	} else {
		fed <- nil
	}
	_, err := prog.Run()
	// Quitting before the end of a long capture stops its reading.
	cancel()
	readingErr := <-fed
	if err != nil && cmd.Context().Err() == nil {
		return fmt.Errorf("trace viewer: %w", err)
	}
	if errors.Is(readingErr, context.Canceled) {
		return nil
	}
	return readingErr
}

// feedBatch is how many requests one message to the viewer carries: a
// capture of a hundred thousand requests is not a hundred thousand
// redraws, and a batch's events (dropped once their rows are made) stay
// a few megabytes.
const feedBatch = 128

// feed sends the capture's remaining requests to the viewer in batches,
// then the end of the reading, and returns the reading's error.
func feed(prog *tea.Program, traces <-chan sse.CapturedTrace, readErr <-chan error, index *lineIndex) error {
	var batch tui.RequestsMsg
	for t := range traces {
		batch = append(batch, index.request(t))
		if len(batch) == feedBatch {
			prog.Send(batch)
			batch = nil
		}
	}
	if len(batch) > 0 {
		prog.Send(batch)
	}
	err := <-readErr
	prog.Send(tui.DoneMsg{Err: err})
	return err
}

// readInBackground reads the capture's traces in a goroutine, redacted
// by events; the error channel has the reading's error once the traces
// channel is closed. The reading stops when ctx is done.
func readInBackground(ctx context.Context, file string, stdin io.Reader, events *scrub.Events) (<-chan sse.CapturedTrace, <-chan error) {
	traces, errc := make(chan sse.CapturedTrace, 64), make(chan error, 1)
	go func() {
		defer close(traces)
		errc <- sse.ReadTracesFile(file, stdin, func(t sse.CapturedTrace) error {
			events.Trace(&t)
			select {
			case traces <- t:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	return traces, errc
}

// lineIndex reads requests of a capture file back by their lines. It
// remembers the byte offset of every indexEvery-th line it passes, so a
// request is read back from the closest such line before it.
type lineIndex struct {
	path string // "" for stdin, which cannot be read again
	// scrub redacts a request read back, as it was redacted when read.
	scrub *scrub.Scrubber
	mu    sync.Mutex
	// offsets[k] is the byte offset of line k*indexEvery+1.
	offsets []int64
}

// indexEvery is the spacing of the lines whose offsets a lineIndex keeps:
// a hundred-thousand-request capture needs about a thousand offsets, and
// reading a request back skips at most this many lines.
const indexEvery = 1024

// newLineIndex indexes the file at path in the background until ctx is
// done; "-" (stdin) is not indexed.
func newLineIndex(ctx context.Context, path string) *lineIndex {
	if path == "-" {
		return &lineIndex{}
	}
	x := &lineIndex{path: path, offsets: []int64{0}}
	go x.build(ctx)
	return x
}

// build notes the offsets of the whole file, so reading back a request
// near its end does not skip every line before it.
func (x *lineIndex) build(ctx context.Context) {
	f, err := os.Open(x.path)
	if err != nil {
		return
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	var off int64
	for line := 1; ctx.Err() == nil; line++ {
		n, err := skipLine(br)
		if err != nil {
			return
		}
		off += n
		x.note(line+1, off)
	}
}

// note remembers off as the offset of line when it is an indexed line.
func (x *lineIndex) note(line int, off int64) {
	if (line-1)%indexEvery != 0 {
		return
	}
	x.mu.Lock()
	if (line-1)/indexEvery == len(x.offsets) {
		x.offsets = append(x.offsets, off)
	}
	x.mu.Unlock()
}

// request is t for the viewer: with its events, and a loader that reads
// them back (none for stdin: the viewer then keeps them).
func (x *lineIndex) request(t sse.CapturedTrace) tui.Request {
	evs, raws := split(t.Events)
	r := tui.Request{ID: t.ID, Events: evs, Raws: raws}
	if x.path != "" {
		first, last := t.Lines()
		id := t.ID
		r.Load = func() ([]trace.Event, []json.RawMessage, error) { return x.load(first, last, id) }
	}
	return r
}

func split(cs []sse.Captured) ([]trace.Event, []json.RawMessage) {
	evs, raws := make([]trace.Event, len(cs)), make([]json.RawMessage, len(cs))
	for i, c := range cs {
		evs[i], raws[i] = c.Event, c.Raw
	}
	return evs, raws
}

// errLoaded stops reading a request back past its last line.
var errLoaded = errors.New("loaded")

// load reads back the events of lines first..last with request id id.
func (x *lineIndex) load(first, last int, id string) ([]trace.Event, []json.RawMessage, error) {
	f, err := os.Open(x.path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	x.mu.Lock()
	k := min((first-1)/indexEvery, len(x.offsets)-1)
	off := x.offsets[k]
	x.mu.Unlock()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, nil, err
	}
	br := bufio.NewReaderSize(f, 1<<16)
	line := k*indexEvery + 1
	for line < first {
		n, err := skipLine(br)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: reading line %d back: %w", x.path, line, err)
		}
		off += n
		line++
		x.note(line, off)
	}
	var cs []sse.Captured
	err = sse.ReadCapture(br, x.path, func(c sse.Captured) error {
		if c.Line+first-1 > last {
			return errLoaded
		}
		if c.Event.RequestID == id {
			cs = append(cs, c)
		}
		return nil
	})
	var bad *sse.CaptureError
	if err != nil && !errors.Is(err, errLoaded) && !errors.As(err, &bad) {
		return nil, nil, err
	}
	x.scrub.Events().Trace(&sse.CapturedTrace{Events: cs})
	evs, raws := split(cs)
	return evs, raws, nil
}

// skipLine reads past one line and returns its length in bytes.
func skipLine(br *bufio.Reader) (int64, error) {
	var n int64
	for {
		b, err := br.ReadSlice('\n')
		n += int64(len(b))
		if err == nil {
			return n, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return n, err
		}
	}
}
