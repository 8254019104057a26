package tracing

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"time"
)

// Tracer records the trace of one request for its watchers: the one-shot
// watcher that took it, and follow watchers. A nil *Tracer is valid and
// records nothing, but callers should test for nil before building event
// fields, so that untraced requests allocate nothing.
type Tracer struct {
	w      *Watcher // the one-shot watcher, or nil
	follow []*Watcher
	// followArr holds follow for most requests (MaxFollowers at most).
	followArr [MaxFollowers]*Watcher
	// id is the request's id on follow streams; a generated one is kept
	// as its digits (genID) until an event needs it as a string, so that
	// a trace an outcome filter drops never builds it.
	id    string
	genID [16]byte
	gen   bool
	start time.Time
	// startTime is start formatted (StartTime).
	startTime string
	last      int64
	// marks are the eventEnd (and backendCallResult's eventStart) of the
	// phases, for the timings of a followed trace.
	marks marks
	// code is the status of the last response snapshot.
	code int64
	// hold: only outcome filters take the request, so events are captured
	// and rendered only if one keeps the trace (capture.go); hb holds the
	// captures and their arena.
	hold bool
	hb   *holdBuffers
	// red redacts the trace's credentials (redaction.go); nil: none.
	red *Redaction
	// exp is the OpenTelemetry export's, for a sampled request (export.go).
	exp *exportSink
}

// marks are the phase boundaries of a followed trace: the first
// requestStarted, routeSelection and backendCallStart, and the last
// backendCallResult (its eventEnd, and its eventStart in call).
type marks struct {
	started, route, callStart, result, call int64
	seen                                    uint8
}

const (
	seenStarted = 1 << iota
	seenRoute
	seenCallStart
	seenResult
)

// Start is when the traced request was taken: eventStart/eventEnd count
// microseconds from it.
func (t *Tracer) Start() time.Time { return t.start }

// StartTime is Start as request snapshots show it (RFC 3339, UTC, to the
// nanosecond), formatted once per trace.
func (t *Tracer) StartTime() string {
	if t.startTime == "" {
		t.startTime = t.start.UTC().Format(time.RFC3339Nano)
	}
	return t.startTime
}

// Followed reports whether follow watchers trace the request.
func (t *Tracer) Followed() bool { return t != nil && len(t.follow) > 0 }

// at is the time of an event's eventEnd, to the microsecond, without
// reading the clock again.
func (t *Tracer) at(end int64) time.Time { return t.start.Add(time.Duration(end) * time.Microsecond) }

// Micros returns microseconds since Start at time at.
func (t *Tracer) Micros(at time.Time) int64 { return at.Sub(t.start).Microseconds() }

// newRequestID is a request id for a followed request the client sent none
// for: 16 hex digits.
func newRequestID() string {
	var b [16]byte
	return string(appendRequestID(b[:0]))
}

// appendRequestID appends a new request id to b. The id names a request
// on a follow stream and in logs, and need not be secret: a fast
// generator's 64 random bits (the runtime's, seeded per process).
func appendRequestID(b []byte) []byte {
	var raw [8]byte
	binary.BigEndian.PutUint64(raw[:], rand.Uint64())
	return hex.AppendEncode(b, raw[:])
}

// SetRequestID names the request on follow streams; set it before the
// first event.
func (t *Tracer) SetRequestID(id string) { t.id, t.gen = id, false }

// NewRequestID names the request with a new id (newRequestID's form) and
// returns its digits, valid for the request's lifetime, for the headers
// that carry it; set it before the first event.
func (t *Tracer) NewRequestID() []byte {
	appendRequestID(t.genID[:0])
	t.id, t.gen = "", true
	return t.genID[:]
}

// RequestID is the id follow streams see, or "".
func (t *Tracer) RequestID() string {
	if t == nil {
		return ""
	}
	if t.gen && t.id == "" {
		t.id = string(t.genID[:])
	}
	return t.id
}
