package tracing

import (
	"strconv"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace"
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

// SetRequestID names the request on follow streams; set it before the
// first event.
func (t *Tracer) SetRequestID(id string) { t.id, t.gen = id, false }

// NewRequestID names the request with a new id (NewRequestID's form) and
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

// at is the time of an event's eventEnd, to the microsecond, without
// reading the clock again.
func (t *Tracer) at(end int64) time.Time { return t.start.Add(time.Duration(end) * time.Microsecond) }

// Micros returns microseconds since Start at time at.
func (t *Tracer) Micros(at time.Time) int64 { return at.Sub(t.start).Microseconds() }

// Emit sends a point event of type typ with the given fields (besides type).
func (t *Tracer) Emit(sev trace.Severity, typ trace.MessageType, fields map[string]any) {
	t.EmitTimed(sev, typ, nil, fields)
}

// EmitTimed sends an event that spans from start to now. The trace keeps
// fields until the event is encoded: the caller must not change them.
func (t *Tracer) EmitTimed(sev trace.Severity, typ trace.MessageType, start *time.Time, fields map[string]any) {
	t.Record(sev, typ, start, Capture{Fields: fields})
}

// messageOf is an event's message: type and a copy of fields.
func messageOf(typ trace.MessageType, fields map[string]any) map[string]any {
	msg := make(map[string]any, len(fields)+2)
	msg["type"] = string(typ)
	for k, v := range fields {
		msg[k] = v
	}
	return msg
}

// endNow is the eventEnd of an event emitted now: microseconds since
// Start, never less than the previous event's (wall clocks can step).
func (t *Tracer) endNow() int64 {
	end := time.Since(t.start).Microseconds()
	if end < t.last {
		end = t.last
	}
	t.last = end
	return end
}

// fieldsCode is the status of a responseSnapshot's fields built as maps.
func fieldsCode(fields map[string]any) (int64, bool) {
	if st, ok := fields["requestState"].(map[string]any); ok {
		if resp, ok := st["response"].(map[string]any); ok {
			if c, ok := resp["code"].(int); ok {
				return int64(c), true
			}
		}
	}
	return 0, false
}

// markAt records a phase boundary for timings.
func (t *Tracer) markAt(typ trace.MessageType, end, start int64, timed bool) {
	m := &t.marks
	switch typ {
	case trace.RequestStarted:
		if m.seen&seenStarted == 0 {
			m.started, m.seen = end, m.seen|seenStarted
		}
	case trace.RouteSelection:
		if m.seen&seenRoute == 0 {
			m.route, m.seen = end, m.seen|seenRoute
		}
	case trace.BackendCallStart:
		if m.seen&seenCallStart == 0 {
			m.callStart, m.seen = end, m.seen|seenCallStart
		}
	case trace.BackendCallResult:
		m.result, m.seen = end, m.seen|seenResult
		if timed {
			m.call = start
		}
	}
}

// appendTimings appends the per-phase durations of a followed trace, in
// microseconds, as a JSON object (keys sorted): route selection, policies
// (up to the backend call, or to the end when the proxy answered itself),
// the backend call (its last attempt), response processing, and the
// total.
func (t *Tracer) appendTimings(b []byte, end int64) []byte {
	m := &t.marks
	member := func(b []byte, key string, v int64) []byte {
		b = append(b, key...)
		return strconv.AppendInt(b, v, 10)
	}
	switch {
	case m.seen&seenRoute == 0:
		b = member(b, `{"totalMicros":`, end)
	case m.seen&seenResult == 0:
		b = member(b, `{"policiesMicros":`, end-m.route)
		b = member(b, `,"routeSelectionMicros":`, m.route-m.started)
		b = member(b, `,"totalMicros":`, end)
	default:
		b = member(b, `{"backendCallMicros":`, m.result-m.call)
		b = member(b, `,"policiesMicros":`, m.callStart-m.route)
		b = member(b, `,"responseMicros":`, end-m.result)
		b = member(b, `,"routeSelectionMicros":`, m.route-m.started)
		b = member(b, `,"totalMicros":`, end)
	}
	return append(b, '}')
}

// PolicyResult is what one policy kind did for a traced request, in the
// reference's `policy` event: applied, with details (a sentence, and
// structured fields beside it), or skipped, with why.
type PolicyResult struct {
	skip    bool
	reason  string
	details string
	fields  map[string]any
}

// Applied is a policy that ran: details says what it did ("refused by
// local[1]: ..."), fields add structured values (nil for none).
func Applied(details string, fields map[string]any) PolicyResult {
	return PolicyResult{details: details, fields: fields}
}

// Skipped is a policy that exists for the request's gateway or route but
// did not run on it, and why.
func Skipped(reason string) PolicyResult { return PolicyResult{skip: true, reason: reason} }

// Policy traces one policy kind's result as a `policy` event
// (`{kind, result: {type: apply, details, ...}}` or `{kind, result: {type:
// skip, reason}}`). It is the one place where a policy kind reports, so a
// new kind needs only to call it; severity is warn when the policy refused
// the request (refused is set).
func (t *Tracer) Policy(kind string, r PolicyResult, refused bool) {
	if t == nil {
		return
	}
	result := map[string]any{}
	if r.skip {
		result["type"], result["reason"] = "skip", r.reason
	} else {
		result["type"], result["details"] = "apply", r.details
		for k, v := range r.fields {
			result[k] = v
		}
	}
	sev := trace.SeverityInfo
	if refused {
		sev = trace.SeverityWarn
	}
	t.Emit(sev, trace.PolicyResultType, map[string]any{"kind": kind, "result": result})
}
