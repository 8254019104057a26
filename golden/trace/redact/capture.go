package redact

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/gwdiag/gwdiag/golden/trace"
)

// MaxCaptureLine bounds a line of a capture, and the data of an SSE frame,
// that Capture reads (sixteen times the bound on a trace event gwdiag
// reads from a proxy): what it holds at once.
const MaxCaptureLine = 16 << 20

// CaptureStats counts what Capture read: the events (a JSON Lines line, or
// an SSE frame's data, that is a trace event) and how many it redacted,
// and the other lines (comments, blank lines, lines that are no event)
// and how many of those it changed. A blank line is another line.
type CaptureStats struct {
	Events, Redacted    int
	Other, OtherChanged int
}

// count counts one line or frame read: an event or another line, changed
// by redaction or not.
func (st *CaptureStats) count(isEvent, changed bool) {
	if isEvent {
		st.Events++
		if changed {
			st.Redacted++
		}
		return
	}
	st.Other++
	if changed {
		st.OtherChanged++
	}
}

// LineError is a line Capture could not take: longer than MaxCaptureLine.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// ErrLineTooLong is wrapped by the LineError of a line past MaxCaptureLine.
var ErrLineTooLong = fmt.Errorf("longer than %d MiB: no trace event or frame is", MaxCaptureLine>>20)

// Capture copies the saved capture r to w redacted, line by line: JSON
// Lines (as gwdiag trace --raw prints it), or an SSE capture as curl
// saves /debug/trace. It holds one line, or one SSE frame, at a time,
// whatever the capture's length. Every byte that needs no redaction is
// copied as it is: comments (": ready"), blank lines and the framing
// stay; an event is redacted as AppendParsed redacts it; an SSE frame
// whose data changes is written again as one "data: " line per line of
// its data, in place of the old ones. A line that is no event (a docs
// page's elision with "...", a note, curl's output) is redacted with
// AppendEvent's tolerant reading and AppendText, as one request's text.
// It returns at the first read or write error, or at a line past
// MaxCaptureLine (a *LineError); what it wrote before is redacted.
func (st *Stream) Capture(w io.Writer, r io.Reader) (CaptureStats, error) {
	c := capture{st: st, br: bufio.NewReaderSize(r, 64<<10), bw: bufio.NewWriterSize(w, 64<<10)}
	err := c.run()
	if ferr := c.bw.Flush(); err == nil {
		err = ferr
	}
	return c.stats, err
}

type capture struct {
	st    *Stream
	br    *bufio.Reader
	bw    *bufio.Writer
	stats CaptureStats
	line  int
	long  []byte // a line longer than br's buffer
	// the SSE frame being read: its lines as read, which of them are
	// data lines, and the data joined
	frame    [][]byte
	isData   []bool
	data     []byte
	frameLen int
	out, txt []byte // reused
}

// readLine reads the next line with its end (valid until the next call).
func (c *capture) readLine() ([]byte, error) {
	long := false
	for {
		chunk, err := c.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if !long {
				c.long, long = c.long[:0], true
			}
			if c.long = append(c.long, chunk...); len(c.long) > MaxCaptureLine {
				return nil, &LineError{Line: c.line + 1, Err: ErrLineTooLong}
			}
			continue
		}
		if long {
			c.long = append(c.long, chunk...)
			chunk = c.long
		}
		if len(chunk) > 0 {
			c.line++
		}
		if len(chunk) > MaxCaptureLine {
			return nil, &LineError{Line: c.line, Err: ErrLineTooLong}
		}
		return chunk, err
	}
}

func (c *capture) run() error {
	for {
		line, err := c.readLine()
		if len(line) > 0 {
			if werr := c.take(line); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return c.endFrame()
		}
		if err != nil {
			return err
		}
	}
}

// take handles one line, its end included.
func (c *capture) take(line []byte) error {
	body := bytes.TrimRight(line, "\r\n")
	if payload, ok := bytes.CutPrefix(body, []byte("data:")); ok {
		payload, _ = bytes.CutPrefix(payload, []byte(" "))
		if c.frameLen += len(line); c.frameLen > MaxCaptureLine {
			return &LineError{Line: c.line, Err: ErrLineTooLong}
		}
		if c.hasData() {
			c.data = append(c.data, '\n')
		}
		c.data = append(c.data, payload...)
		c.frame = append(c.frame, bytes.Clone(line))
		c.isData = append(c.isData, true)
		return nil
	}
	if len(c.frame) > 0 && len(body) > 0 {
		// A comment or another field inside a frame: kept in its place.
		if c.frameLen += len(line); c.frameLen > MaxCaptureLine {
			return &LineError{Line: c.line, Err: ErrLineTooLong}
		}
		c.frame = append(c.frame, bytes.Clone(c.otherLine(line, body)))
		c.isData = append(c.isData, false)
		return nil
	}
	if err := c.endFrame(); err != nil {
		return err
	}
	if len(body) == 0 || body[0] == ':' || isField(body) {
		_, err := c.bw.Write(c.otherLine(line, body))
		return err
	}
	// A JSON Lines line.
	out, isEvent, changed := c.event(body)
	c.stats.count(isEvent, changed)
	if !changed {
		_, err := c.bw.Write(line)
		return err
	}
	c.bw.Write(out)
	_, err := c.bw.Write(line[len(body):])
	return err
}

func (c *capture) hasData() bool {
	for _, d := range c.isData {
		if d {
			return true
		}
	}
	return false
}

// isField reports whether line is an SSE field other than data.
func isField(line []byte) bool {
	for _, f := range []string{"event:", "id:", "retry:"} {
		if bytes.HasPrefix(line, []byte(f)) {
			return true
		}
	}
	return false
}

// otherLine is a line that is no event, redacted as text.
func (c *capture) otherLine(line, body []byte) []byte {
	c.stats.Other++
	out, changed := c.st.r.AppendText(c.txt[:0], body, c.st.textSecrets())
	c.txt = out
	if !changed {
		return line
	}
	c.stats.OtherChanged++
	return append(append([]byte(nil), out...), line[len(body):]...)
}

// event redacts src, a JSON Lines line or a frame's data: as an event
// when it is one, else as text.
func (c *capture) event(src []byte) (out []byte, isEvent, changed bool) {
	if h, err := trace.ParseHeader(src); err == nil {
		c.out, changed = c.st.AppendParsed(c.out[:0], src, h)
		return c.out, true, changed
	}
	c.out, changed = c.st.AppendEvent(c.out[:0], src, trace.Header{})
	txt, changed2 := c.st.r.AppendText(c.txt[:0], c.out, c.st.textSecrets())
	c.txt = txt
	if changed2 {
		return c.txt, false, true
	}
	return c.out, false, changed
}

// endFrame writes the SSE frame read so far, redacted.
func (c *capture) endFrame() error {
	if len(c.frame) == 0 {
		return nil
	}
	frame, isData := c.frame, c.isData
	c.frame, c.isData, c.frameLen = c.frame[:0], c.isData[:0], 0
	out, isEvent, changed := c.event(c.data)
	c.data = c.data[:0]
	c.stats.count(isEvent, changed)
	if !changed {
		for _, l := range frame {
			if _, err := c.bw.Write(l); err != nil {
				return err
			}
		}
		return nil
	}
	// The data's lines in place of the old data lines: one for one when
	// as many (the redaction changes strings, not the lines between
	// them), else all in place of the first.
	parts := bytes.Split(out, []byte("\n"))
	n := 0
	for _, d := range isData {
		if d {
			n++
		}
	}
	k := 0
	for i, l := range frame {
		if !isData[i] {
			c.bw.Write(l)
			continue
		}
		eol := l[len(bytes.TrimRight(l, "\r\n")):]
		switch {
		case len(parts) == n:
			c.bw.WriteString("data: ")
			c.bw.Write(parts[k])
			c.bw.Write(eol)
			k++
		case k == 0:
			for _, p := range parts {
				c.bw.WriteString("data: ")
				c.bw.Write(p)
				c.bw.Write(eol)
			}
			k++
		}
	}
	_, err := c.bw.Write(nil)
	return err
}

// textSecrets are the secrets text that is no event is scrubbed of: those
// of the events without a request id.
func (st *Stream) textSecrets() *Secrets {
	s := st.open[""]
	if s == nil {
		s = &Secrets{}
		st.keep("", s)
	}
	return s
}
