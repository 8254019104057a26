package sse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gwdiag/gwdiag/golden/trace"
)

// Captured is one event of a saved trace.
type Captured struct {
	// Raw is the event's JSON as the capture holds it: a JSON Lines line
	// byte for byte, or an SSE frame's data.
	Raw   []byte
	Event trace.Event
	// Line is the 1-based line the event starts on.
	Line int
}

// BadLine is a line of a saved trace that holds no trace event.
type BadLine struct {
	Line int
	Err  error
}

// CaptureError names every bad line of a saved trace. The reader has
// delivered the valid events before returning it: like agctl, a reader of a
// trace with a broken line shows what it can, then says what it could not.
type CaptureError struct {
	Name string
	Bad  []BadLine
}

// Error names the capture and each bad line, one per line.
func (e *CaptureError) Error() string {
	var b strings.Builder
	if len(e.Bad) == 1 {
		fmt.Fprintf(&b, "%s: 1 line is not a trace event:", e.Name)
	} else {
		fmt.Fprintf(&b, "%s: %d lines are not trace events:", e.Name, len(e.Bad))
	}
	for _, l := range e.Bad {
		fmt.Fprintf(&b, "\n  %s:%d: %v", e.Name, l.Line, l.Err)
	}
	return b.String()
}

// ReadCapture reads a saved trace and calls fn with each valid event, in
// order, as it is read. The trace may be JSON Lines (as `gwdiag trace --raw`
// and `agctl trace --raw` print it) or an SSE capture of /debug/trace (what
// `curl -N -X POST .../debug/trace` saves: `data:` frames, with the
// `: ready` and `: keepalive` comments skipped); blank lines are skipped.
// A line or frame that is not a JSON trace event does not stop the reading:
// ReadCapture returns a *CaptureError naming every such line at the end. An
// error from fn stops it and is returned.
func ReadCapture(r io.Reader, name string, fn func(Captured) error) error {
	fr := NewReader(r)
	fr.plain = true
	// A capture may hold any number of traces (a follow stream's): only
	// the event bound applies.
	fr.perTrace = false
	var bad []BadLine
	for {
		f, data, err := fr.NextBytes()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", name, err)
		}
		if f.IsComment {
			continue
		}
		ev, err := decode(data)
		if err != nil {
			bad = append(bad, BadLine{Line: f.Line, Err: err})
			continue
		}
		if err := fn(Captured{Raw: bytes.Clone(data), Event: ev, Line: f.Line}); err != nil {
			return err
		}
	}
	if len(bad) > 0 {
		return &CaptureError{Name: name, Bad: bad}
	}
	return nil
}

// ReadCaptureFile is ReadCapture on the file at path; "-" reads stdin,
// named "stdin" in errors.
func ReadCaptureFile(path string, stdin io.Reader, fn func(Captured) error) error {
	return readFile(path, stdin, func(r io.Reader, name string) error { return ReadCapture(r, name, fn) })
}

// InputName is how errors name the capture at path: "stdin" for "-".
func InputName(path string) string {
	if path == "-" {
		return "stdin"
	}
	return path
}

// readFile calls read with the file at path and its InputName; "-" is
// stdin (os.Stdin when stdin is nil).
func readFile(path string, stdin io.Reader, read func(r io.Reader, name string) error) error {
	if path == "-" {
		if stdin == nil {
			stdin = os.Stdin
		}
		return read(stdin, InputName(path))
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return read(f, path)
}

// decode parses one event, which must be a JSON object.
func decode(data []byte) (trace.Event, error) {
	b := bytes.TrimSpace(data)
	if len(b) == 0 || b[0] != '{' {
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return trace.Event{}, fmt.Errorf("not a JSON trace event: %v", err)
		}
		return trace.Event{}, errors.New("not a JSON trace event: want an object")
	}
	ev, err := trace.Parse(b)
	if err != nil {
		return trace.Event{}, fmt.Errorf("not a JSON trace event: %v", err)
	}
	return ev, nil
}
