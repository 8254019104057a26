package sse

import (
	"errors"
	"fmt"
	"io"

	"github.com/gwdiag/gwdiag/golden/trace"
)

// Bounds of ReadTraces. A capture that needs more is refused with a clear
// error instead of growing without end: memory stays bounded by
// MaxOpenTraces × MaxTraceEvents events whatever the capture's length.
const (
	// MaxTraceEvents is the most events one trace may hold. A request's
	// trace holds about twelve; an LLM stream a few hundred.
	MaxTraceEvents = 20_000
	// MaxOpenTraces is the most requests of a followed capture that may be
	// under way at once (started, not finished).
	MaxOpenTraces = 4_096
)

// CapturedTrace is one request's events in a capture.
type CapturedTrace struct {
	// Index is the trace's 1-based position in the capture, by its first
	// event.
	Index int
	// ID is the events' requestId, "" for a trace without one.
	ID     string
	Events []Captured
}

// Lines are the first and last lines of the trace in its capture.
func (t CapturedTrace) Lines() (first, last int) {
	if len(t.Events) == 0 {
		return 0, 0
	}
	return t.Events[0].Line, t.Events[len(t.Events)-1].Line
}

// TraceEvents are the trace's events without their capture details.
func (t CapturedTrace) TraceEvents() []trace.Event {
	out := make([]trace.Event, len(t.Events))
	for i, c := range t.Events {
		out[i] = c.Event
	}
	return out
}

// ReadTraces reads a capture (as ReadCapture does) and calls fn with each
// trace as soon as it is complete, so memory holds only the traces under
// way. Events with a requestId (a followed capture, whose requests may
// interleave) are grouped by it, and a trace ends with its requestFinished;
// events without one split at each requestStarted, and after each
// requestFinished. Traces still open at the end are delivered then, by
// index. A trace past MaxTraceEvents, or more than MaxOpenTraces traces
// under way, stops the reading with an error naming the line. Bad lines are
// reported as by ReadCapture, after the traces.
func ReadTraces(r io.Reader, name string, fn func(CapturedTrace) error) error {
	s := splitter{name: name, fn: fn, open: map[string]*CapturedTrace{}}
	err := ReadCapture(r, name, s.add)
	var bad *CaptureError
	if err != nil && !errors.As(err, &bad) {
		return err
	}
	if ferr := s.flush(); ferr != nil {
		return ferr
	}
	return err
}

// ReadTracesFile is ReadTraces on the file at path; "-" reads stdin, named
// "stdin" in errors.
func ReadTracesFile(path string, stdin io.Reader, fn func(CapturedTrace) error) error {
	return readFile(path, stdin, func(r io.Reader, name string) error { return ReadTraces(r, name, fn) })
}

// splitter groups events into traces for ReadTraces.
type splitter struct {
	name string
	fn   func(CapturedTrace) error
	next int
	// open are the traces under way by requestId ("" holds the current
	// trace of events without one).
	open map[string]*CapturedTrace
}

func (s *splitter) add(c Captured) error {
	id := c.Event.RequestID
	t := s.open[id]
	typ := c.Event.Type()
	if t != nil && id == "" && typ == trace.RequestStarted {
		// Without ids a requestStarted is the next request.
		if err := s.emit(id); err != nil {
			return err
		}
		t = nil
	}
	if t == nil {
		if len(s.open) >= MaxOpenTraces {
			return fmt.Errorf("%s:%d: more than %d requests under way at once (started, not finished): not a capture gwdiag can split into traces", s.name, c.Line, MaxOpenTraces)
		}
		s.next++
		t = &CapturedTrace{Index: s.next, ID: id}
		s.open[id] = t
	}
	if len(t.Events) >= MaxTraceEvents {
		first, _ := t.Lines()
		return fmt.Errorf("%s:%d: the trace that starts on line %d has more than %d events: not a trace of one request", s.name, c.Line, first, MaxTraceEvents)
	}
	t.Events = append(t.Events, c)
	if typ == trace.RequestFinished {
		return s.emit(id)
	}
	return nil
}

// emit delivers the open trace of id.
func (s *splitter) emit(id string) error {
	t := s.open[id]
	delete(s.open, id)
	return s.fn(*t)
}

// flush delivers the traces still open, by index.
func (s *splitter) flush() error {
	for len(s.open) > 0 {
		var first *CapturedTrace
		for _, t := range s.open {
			if first == nil || t.Index < first.Index {
				first = t
			}
		}
		if err := s.emit(first.ID); err != nil {
			return err
		}
	}
	return nil
}
