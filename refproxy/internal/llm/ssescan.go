package llm

import (
	"bytes"
	"fmt"
)

// Line states of the SSE scanner.
const (
	lineStart  = iota // nothing read on this line yet
	lineField         // reading the field name
	lineData          // in the value of a data field
	lineIgnore        // in a line that does not matter (comment, other field)
)

// maxField bounds the bytes kept of a field name; only "data" matters.
const maxField = 8

// sseScanner follows an SSE stream byte by byte. The data of each event is
// fed to a jsonScanner as it arrives, so no line is ever assembled whole.
type sseScanner struct {
	line      int
	field     [maxField]byte
	fieldLen  int
	skipSpace bool // a space right after "data:" is not part of the value
	prevCR    bool // a \n right after \r ends no second line
	hasData   bool // the current event has a data field
	ev        jsonScanner

	head      [6]byte // the first bytes of the event's data, to spot [DONE]
	headLen   int
	doneEvent bool // the OpenAI end-of-stream event "data: [DONE]" was dispatched

	seen    bool // an event carried a non-null usage
	last    Usage
	lastErr error
}

func (s *sseScanner) feed(p []byte) {
	for i := 0; i < len(p) && !s.doneEvent; i++ {
		c := p[i]
		if s.prevCR {
			s.prevCR = false
			if c == '\n' {
				continue
			}
		}
		if c == '\r' || c == '\n' {
			s.prevCR = c == '\r'
			s.endLine()
			continue
		}
		switch s.line {
		case lineStart, lineField:
			s.line = lineField
			if c != ':' {
				if s.fieldLen == maxField {
					s.line = lineIgnore
				} else {
					s.field[s.fieldLen] = c
					s.fieldLen++
				}
				continue
			}
			if string(s.field[:s.fieldLen]) != "data" {
				s.line = lineIgnore
				continue
			}
			s.line, s.skipSpace = lineData, true
			s.dataLine()
		case lineData:
			if s.skipSpace {
				s.skipSpace = false
				if c == ' ' {
					continue
				}
			}
			j := indexLineEnd(p[i:])
			if j < 0 {
				j = len(p) - i
			}
			if s.headLen < len(s.head) {
				s.headLen += copy(s.head[s.headLen:], p[i:i+j])
			}
			s.ev.feed(p[i : i+j])
			i += j - 1
		}
	}
}

// dataLine starts a data line; lines of one event are joined by \n.
func (s *sseScanner) dataLine() {
	if s.hasData {
		s.ev.feed([]byte{'\n'})
		if s.headLen < len(s.head) {
			s.head[s.headLen] = '\n'
			s.headLen++
		}
	}
	s.hasData = true
}

func (s *sseScanner) endLine() {
	switch s.line {
	case lineStart:
		s.dispatch()
	case lineField:
		if string(s.field[:s.fieldLen]) == "data" {
			s.dataLine() // "data" with no colon: an empty value
		}
	}
	s.line, s.fieldLen = lineStart, 0
}

// dispatch ends the current event.
func (s *sseScanner) dispatch() {
	if s.hasData {
		if u, ok, err := s.ev.found(); ok {
			s.seen, s.last, s.lastErr = true, u, err
		}
		s.doneEvent = string(s.head[:s.headLen]) == "[DONE]"
	}
	s.ev.reset()
	s.hasData, s.headLen = false, 0
}

// streamUsage is the usage of the whole stream, once it ended (eof) or was
// closed early. An event left open at the end is still looked at, so a cut
// usage chunk reports errTruncated rather than errNoUsage.
func (s *sseScanner) streamUsage(eof bool) (Usage, error) {
	if !s.doneEvent {
		s.dispatch()
	}
	switch {
	case s.seen:
		return s.last, s.lastErr
	case eof:
		return Usage{}, fmt.Errorf("%w: no SSE event carried usage", errNoUsage)
	default:
		return Usage{}, fmt.Errorf("%w: stream closed before the usage event", errTruncated)
	}
}

// indexLineEnd is bytes.IndexAny(p, "\r\n"), the same way.
func indexLineEnd(p []byte) int {
	n := bytes.IndexByte(p, '\n')
	end := n
	if end < 0 {
		end = len(p)
	}
	if r := bytes.IndexByte(p[:end], '\r'); r >= 0 {
		return r
	}
	return n
}
