// Package sse reads the JSON-over-SSE trace stream of /debug/trace: it opens
// the stream over real HTTP, splits it into frames (data and comments) and
// decodes the trace events. The conformance suite and the gwdiag CLI both
// read traces through it.
package sse

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace"
)

// Frame is one SSE frame: either a comment (": ready") or data.
type Frame struct {
	// Comment is the text of a comment line without the leading colon and
	// space; set only when the frame is a comment.
	Comment string
	// Data is the joined data lines of the frame.
	Data string
	// IsComment tells a comment frame from a data frame.
	IsComment bool
	// Line is the 1-based line of the stream the frame starts on, so that
	// a reader of a saved capture can name a bad frame's line.
	Line int
}

// Reader splits an SSE stream into frames, within Limits: a line or frame
// past EventBytes, a trace past TraceEvents or TraceBytes, or (with
// CloseOnStall) a frame slower than FrameTime ends the reading with a
// *LimitError, before the rest is read.
type Reader struct {
	r    *bufio.Reader
	line int
	// plain makes a line outside SSE framing (a JSON Lines record) a data
	// frame of its own: a saved trace may be JSON Lines or an SSE capture.
	plain  bool
	limits Limits
	// perTrace turns on the trace bounds (live streams, not captures,
	// which may hold any number of traces).
	perTrace bool
	events   int
	bytes    int64
	stall    io.Closer
	stalled  atomic.Bool
	// err is the bound already gone past: the stream is not read further.
	err error
	// event and whole name a frame and the stream in a LimitError.
	event, whole string
	// data is the current frame's data, long a line longer than the
	// bufio.Reader's buffer: both reused from frame to frame.
	data, long []byte
}

// NewReader reads frames from r within the default Limits.
func NewReader(r io.Reader) *Reader { return NewReaderLimits(r, Limits{}) }

// NewReaderLimits reads frames of one trace stream from r within l (zero
// fields: the defaults).
func NewReaderLimits(r io.Reader, l Limits) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), limits: l.WithDefaults(), perTrace: true, event: "trace event", whole: "trace"}
}

// CloseOnStall makes a frame that takes longer than FrameTime to arrive,
// once its first byte has, close c (the stream's body) and end the reading
// with a *LimitError: a proxy dripping a frame would otherwise hold the
// reader forever while staying under every byte bound.
func (r *Reader) CloseOnStall(c io.Closer) { r.stall = c }

// EndTrace starts a new trace for the trace bounds: a follow stream carries
// many traces, each bounded on its own.
func (r *Reader) EndTrace() { r.events, r.bytes = 0, 0 }

// Next returns the next frame, or io.EOF at the end of the stream. A comment
// line is returned as a frame of its own, so that ": ready" is seen as soon
// as it arrives. event: and id: lines are ignored.
func (r *Reader) Next() (Frame, error) {
	f, data, err := r.NextBytes()
	if err == nil && !f.IsComment {
		f.Data = string(data)
	}
	return f, err
}

// NextBytes is Next without a copy of a data frame's data: the frame's
// Data is left empty and data holds it, valid until the next call (the
// reader reuses its buffer). A follow reader decodes the data and keeps
// only the decoded event.
func (r *Reader) NextBytes() (f Frame, data []byte, err error) {
	if r.err != nil {
		return Frame{}, nil, r.err
	}
	f, err = r.timedNext()
	if err == nil && !f.IsComment && r.perTrace {
		r.events++
		if r.events > r.limits.TraceEvents {
			err = &LimitError{What: r.whole, Limit: int64(r.limits.TraceEvents), Got: int64(r.events), Unit: "events"}
		}
	}
	if err != nil && IsLimit(err) {
		r.err = err
	}
	if err == nil && !f.IsComment {
		data = r.data
	}
	return f, data, err
}

// Buffered reports whether a frame's bytes are already read from the
// stream: when not, the next call may wait for the proxy, and a reader that
// batches its output should flush it first.
func (r *Reader) Buffered() bool { return r.r.Buffered() > 0 }

// timedNext is next under FrameTime: the clock starts with the frame's
// first byte, so a stream may stay idle (waiting for a request) for as
// long as the caller likes.
func (r *Reader) timedNext() (Frame, error) {
	if r.stall == nil {
		return r.next()
	}
	if _, err := r.r.Peek(1); err != nil && r.r.Buffered() == 0 || r.frameBuffered() {
		// At the end, or the frame is already here: nothing to wait for.
		return r.next()
	}
	limit := time.Duration(r.limits.FrameTime)
	t := time.AfterFunc(limit, func() {
		r.stalled.Store(true)
		r.stall.Close()
	})
	start := r.bytes
	f, err := r.next()
	if t.Stop() || !r.stalled.Load() {
		return f, err
	}
	stalled := &LimitError{What: r.event, Unit: "time", Time: limit, Got: r.bytes - start}
	if err != nil {
		return Frame{}, stalled
	}
	// The frame came whole as the clock ran out, but the stream is closed:
	// deliver it, and the bound on the next call.
	r.err = stalled
	return f, nil
}

// frameBuffered reports whether the next frame is whole in the reader's
// buffer, as next reads it: lines ended by \n, then a comment, or data
// lines ended by an empty line. Reading it cannot wait for the stream, so
// it needs no clock: a follow stream's frames mostly come many to a read,
// and arming a timer for each cost its reader a tenth of its time.
func (r *Reader) frameBuffered() bool {
	if r.plain {
		return false
	}
	buf, _ := r.r.Peek(r.r.Buffered())
	data := false
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			return false
		}
		line := trimEOL(buf[:i])
		buf = buf[i+1:]
		switch {
		case len(line) == 0:
			if data {
				return true
			}
		case line[0] == ':':
			if !data {
				return true
			}
		case bytes.HasPrefix(line, dataField):
			data = true
		}
	}
}

// lineSlack is what an SSE line holds besides a frame's data: the field
// name and the line ending.
const lineSlack = int64(len("data: \r\n"))

// readLine reads one line within EventBytes, counting it into the
// trace's bytes. The line is valid until the next read: it is the
// bufio.Reader's own buffer, or r.long for a line longer than it.
func (r *Reader) readLine() ([]byte, error) {
	long := false
	for {
		chunk, err := r.r.ReadSlice('\n')
		r.bytes += int64(len(chunk))
		got := int64(len(chunk))
		if long {
			got += int64(len(r.long))
		}
		// A line holds one frame's data after "data: " and before "\r\n".
		if got > r.limits.EventBytes+lineSlack {
			return nil, &LimitError{What: r.event, Limit: r.limits.EventBytes, Got: got, Unit: "bytes", In: "in one frame"}
		}
		if r.perTrace && r.bytes > r.limits.TraceBytes {
			return nil, &LimitError{What: r.whole, Limit: r.limits.TraceBytes, Got: r.bytes, Unit: "bytes"}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			if !long {
				r.long, long = r.long[:0], true
			}
			r.long = append(r.long, chunk...)
			continue
		}
		if long {
			r.long = append(r.long, chunk...)
			return r.long, err
		}
		return chunk, err
	}
}

// next reads the next frame. A data frame's data is left in r.data (the
// frame's Data is not set), valid until the next call; no allocation is
// made for it once the buffers have grown to the stream's frames.
func (r *Reader) next() (Frame, error) {
	r.data = r.data[:0]
	lines := 0 // data lines in the frame
	size := int64(0)
	start := 0
	for {
		line, err := r.readLine()
		if err != nil {
			if _, limit := err.(*LimitError); limit {
				return Frame{}, err
			}
			if errors.Is(err, io.EOF) && len(line) == 0 {
				if lines > 0 {
					return Frame{Line: start}, nil
				}
				return Frame{}, io.EOF
			}
			if !errors.Is(err, io.EOF) {
				return Frame{}, err
			}
		}
		r.line++
		line = trimEOL(line)
		switch {
		case len(line) == 0 || r.plain && lines == 0 && len(bytes.TrimSpace(line)) == 0:
			if lines > 0 {
				return Frame{Line: start}, nil
			}
		case line[0] == ':':
			if lines == 0 {
				c := line[1:]
				if len(c) > 0 && c[0] == ' ' {
					c = c[1:]
				}
				return Frame{Comment: string(c), IsComment: true, Line: r.line}, nil
			}
		case bytes.HasPrefix(line, dataField):
			if lines == 0 {
				start = r.line
			}
			d := line[len(dataField):]
			if len(d) > 0 && d[0] == ' ' {
				d = d[1:]
			}
			size += int64(len(d)) + 1
			if size-1 > r.limits.EventBytes {
				return Frame{}, &LimitError{What: r.event, Limit: r.limits.EventBytes, Got: size - 1, Unit: "bytes", In: "in one frame"}
			}
			if lines > 0 {
				r.data = append(r.data, '\n')
			}
			r.data = append(r.data, d...)
			lines++
		case r.plain && lines == 0 && !sseField(line):
			r.data = append(r.data, line...)
			return Frame{Line: r.line}, nil
		}
		if err != nil { // EOF after a last unterminated line
			if lines > 0 {
				return Frame{Line: start}, nil
			}
			return Frame{}, io.EOF
		}
	}
}

var (
	dataField   = []byte("data:")
	otherFields = [][]byte{[]byte("event:"), []byte("id:"), []byte("retry:")}
)

// trimEOL cuts every \r and \n at the end of line.
func trimEOL(line []byte) []byte {
	for len(line) > 0 && (line[len(line)-1] == '\n' || line[len(line)-1] == '\r') {
		line = line[:len(line)-1]
	}
	return line
}

// sseField reports whether line is one of the SSE fields a trace stream
// may carry besides data, which a reader skips.
func sseField(line []byte) bool {
	for _, f := range otherFields {
		if bytes.HasPrefix(line, f) {
			return true
		}
	}
	return false
}

// EachData reads r to its end as an event stream, calling fn with the data
// of every data frame as it arrives (comments are skipped). It returns nil
// at the end of the stream and the read error otherwise. Chat completion
// streams are read through it: one frame is bounded by l.EventBytes, the
// whole stream by l.BodyBytes (a *LimitError past either).
func EachData(r io.Reader, l Limits, fn func(data string)) error {
	l = l.WithDefaults()
	l.TraceBytes, l.TraceEvents = l.BodyBytes, math.MaxInt
	fr := NewReaderLimits(r, l)
	fr.event, fr.whole = "stream event", "response stream"
	for {
		f, err := fr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !f.IsComment {
			fn(f.Data)
		}
	}
}

// Stream is an open /debug/trace stream.
type Stream struct {
	// Response is the HTTP response; its body is the stream.
	Response *http.Response
	// Method is the method the proxy accepted (POST, or GET from older proxies).
	Method string
	frames *Reader
}

// StatusError is returned by Open when the proxy refuses the stream.
type StatusError struct {
	Status int
	Body   string
	URL    string // the stream's URL, with its query
}

// Error says what the proxy answered.
func (e *StatusError) Error() string {
	return fmt.Sprintf("/debug/trace answered %d: %s", e.Status, strings.TrimSpace(e.Body))
}

// Open opens the trace stream of the admin server at adminAddr (host:port),
// with an optional CEL expression; see OpenURL.
func Open(ctx context.Context, client *http.Client, adminAddr, expression string) (*Stream, error) {
	return OpenURL(ctx, client, "http://"+adminAddr, expression)
}

// OpenURL opens the trace stream of the admin server at baseURL
// (http://host:port), with an optional CEL expression. It tries POST (newer
// proxies take only POST) and, without an expression, falls back to GET when
// POST is refused with 405 or 404 (older proxies route the endpoint by
// method). With an expression there is no fallback: an older proxy would
// ignore the filter and trace the wrong request.
func OpenURL(ctx context.Context, client *http.Client, baseURL, expression string) (*Stream, error) {
	q := url.Values{}
	if expression != "" {
		q.Set("expression", expression)
	}
	return OpenQuery(ctx, client, baseURL, q)
}

// OpenQuery is OpenURL with the stream's query parameters: expression,
// and follow, max and duration for a follow stream. Only a stream without
// parameters falls back to GET.
func OpenQuery(ctx context.Context, client *http.Client, baseURL string, q url.Values) (*Stream, error) {
	u := strings.TrimSuffix(baseURL, "/") + "/debug/trace"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var last error
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		req, err := http.NewRequestWithContext(ctx, method, u, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "text/event-stream")
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode == http.StatusOK {
			st := &Stream{Response: resp, Method: method}
			st.SetLimits(Limits{})
			return st, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		last = &StatusError{Status: resp.StatusCode, Body: string(body), URL: u}
		if len(q) > 0 || (resp.StatusCode != http.StatusMethodNotAllowed && resp.StatusCode != http.StatusNotFound) {
			break
		}
	}
	return nil, last
}

// SetLimits bounds what is read from the stream (zero fields: the
// defaults), a frame slower than FrameTime included. Call it before Next.
func (s *Stream) SetLimits(l Limits) {
	s.frames = NewReaderLimits(s.Response.Body, l)
	s.frames.CloseOnStall(s.Response.Body)
}

// Reader returns the stream's frame reader (EndTrace for a follow stream).
func (s *Stream) Reader() *Reader { return s.frames }

// Next returns the next frame of the stream.
func (s *Stream) Next() (Frame, error) { return s.frames.Next() }

// Close closes the stream.
func (s *Stream) Close() error { return s.Response.Body.Close() }

// Trace is what was read from one trace stream.
type Trace struct {
	Events []trace.Event
	// Comments are the comment frames in order (ready, keepalive, dropped N events).
	Comments []string
	// EndedAfterFinished is true when the stream reached EOF and its last
	// event was requestFinished.
	EndedAfterFinished bool
}

// ReadTrace reads events until the stream ends. Frames that are not valid
// JSON events are an error: the wire format is one JSON object per frame.
func ReadTrace(r *Reader) (Trace, error) {
	var t Trace
	for {
		f, data, err := r.NextBytes()
		if errors.Is(err, io.EOF) {
			t.EndedAfterFinished = len(t.Events) > 0 && t.Events[len(t.Events)-1].Type() == trace.RequestFinished
			return t, nil
		}
		if err != nil {
			return t, err
		}
		if f.IsComment {
			t.Comments = append(t.Comments, f.Comment)
			continue
		}
		ev, err := trace.Parse(data)
		if err != nil {
			return t, fmt.Errorf("frame %d is not a JSON trace event: %v: %q", len(t.Events)+1, err, data)
		}
		t.Events = append(t.Events, ev)
	}
}
