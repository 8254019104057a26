package trace

import "time"

// Tracer records the trace of one request for its watcher. A nil *Tracer is
// valid and records nothing, but callers should test for nil before building
// event fields, so that untraced requests allocate nothing.
type Tracer struct {
	w     *Watcher
	start time.Time
	last  int64
}

// Start is when the traced request was taken: eventStart/eventEnd count
// microseconds from it.
func (t *Tracer) Start() time.Time { return t.start }

// Micros returns microseconds since Start at time at.
func (t *Tracer) Micros(at time.Time) int64 { return at.Sub(t.start).Microseconds() }

// Emit sends a point event of type typ with the given fields (besides type).
func (t *Tracer) Emit(sev Severity, typ MessageType, fields map[string]any) {
	t.EmitTimed(sev, typ, nil, fields)
}

// EmitTimed sends an event that spans from start to now.
func (t *Tracer) EmitTimed(sev Severity, typ MessageType, start *time.Time, fields map[string]any) {
	if t == nil {
		return
	}
	end := time.Since(t.start).Microseconds()
	// Wall clocks can step; eventEnd must never decrease within a trace.
	if end < t.last {
		end = t.last
	}
	t.last = end
	msg := make(map[string]any, len(fields)+1)
	msg["type"] = string(typ)
	for k, v := range fields {
		msg[k] = v
	}
	e := Event{EventEnd: end, Severity: sev, Message: msg}
	if start != nil {
		s := min(t.Micros(*start), end)
		e.EventStart = &s
	}
	t.w.push(e)
}
