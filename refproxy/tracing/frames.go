package tracing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/gwdiag/gwdiag/golden/trace"
)

// Frames are events encoded once, as the stream sends them: SSE data
// frames ("data: <event JSON>\n\n"), back to back. A tracer encodes an
// event when it happens (or, held for an outcome filter, when the filter
// keeps its trace), and a watcher queues the bytes: its stream writes them
// as they are.
type Frames struct {
	b    []byte
	ends []int32
}

// Reset empties f, keeping its memory.
func (f *Frames) Reset() { f.b, f.ends = f.b[:0], f.ends[:0] }

// Len is how many frames f holds.
func (f *Frames) Len() int { return len(f.ends) }

// Frame is the i-th frame.
func (f *Frames) Frame(i int) []byte {
	start := int32(0)
	if i > 0 {
		start = f.ends[i-1]
	}
	return f.b[start:f.ends[i]]
}

// end closes the frame appended to f.b since the last one.
func (f *Frames) end() { f.ends = append(f.ends, int32(len(f.b))) }

// appendEvent appends e as a frame.
func (f *Frames) appendEvent(e trace.Event) {
	f.b = appendEventFrame(f.b, e)
	f.end()
}

// appendEventFrame appends e as an SSE data frame. What AppendEvent cannot
// encode, encoding/json tells why: the frame is then a comment saying so
// (event fields are built by the proxy from JSON-safe values; a failure is
// a bug, reported in-band rather than killing the stream).
func appendEventFrame(b []byte, e trace.Event) []byte {
	b = append(b, "data: "...)
	if out, ok := appendEvent(b, e); ok {
		return append(out, "\n\n"...)
	}
	j, err := json.Marshal(e)
	if err == nil {
		return append(append(b, j...), "\n\n"...)
	}
	return append(b[:len(b)-len("data: ")], ": cannot encode event: "+err.Error()+"\n\n"...)
}

// appendHead appends an event's JSON up to its message's members:
// `{"eventStart":..,"eventEnd":..,"severity":..,"message":{`, as
// appendEvent writes them.
func appendHead(b []byte, timed bool, start, end int64, sev trace.Severity) []byte {
	b = append(b, `{"eventStart":`...)
	if timed {
		b = strconv.AppendInt(b, start, 10)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"eventEnd":`...)
	b = strconv.AppendInt(b, end, 10)
	b = append(b, `,"severity":`...)
	b = appendString(b, string(sev))
	return append(b, `,"message":{`...)
}

// ParseFrames reads frames (Frames, or a stream's bytes without comments)
// as a stream's reader does: each data frame parsed by trace.Parse.
func ParseFrames(b []byte) ([]trace.Event, error) {
	var out []trace.Event
	for len(b) > 0 {
		f, rest, ok := bytes.Cut(b, []byte("\n\n"))
		if !ok {
			return out, fmt.Errorf("frame %d not ended by a blank line: %q", len(out), b)
		}
		b = rest
		data, ok := bytes.CutPrefix(f, []byte("data: "))
		if !ok || bytes.IndexByte(data, '\n') >= 0 {
			return out, fmt.Errorf("frame %d is not one data line: %q", len(out), f)
		}
		e, err := trace.Parse(data)
		if err != nil {
			return out, fmt.Errorf("frame %d: %v: %s", len(out), err, data)
		}
		out = append(out, e)
	}
	return out, nil
}
