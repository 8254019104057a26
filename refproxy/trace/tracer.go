package trace

import (
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
	id     string
	start  time.Time
	last   int64
	// marks are the eventEnd (and backendCallResult's eventStart) of the
	// phases, for the timings of a followed trace.
	marks map[trace.MessageType]int64
	call  int64 // backendCallResult.eventStart
	// held are the events kept for follow watchers with an outcome
	// filter, sent or dropped at requestFinished; code is the status of
	// the last response snapshot.
	held []trace.Event
	code int64
}

// Start is when the traced request was taken: eventStart/eventEnd count
// microseconds from it.
func (t *Tracer) Start() time.Time { return t.start }

// Followed reports whether follow watchers trace the request.
func (t *Tracer) Followed() bool { return t != nil && len(t.follow) > 0 }

// SetRequestID names the request on follow streams; set it before the
// first event.
func (t *Tracer) SetRequestID(id string) { t.id = id }

// RequestID is the id follow streams see, or "".
func (t *Tracer) RequestID() string {
	if t == nil {
		return ""
	}
	return t.id
}

// Micros returns microseconds since Start at time at.
func (t *Tracer) Micros(at time.Time) int64 { return at.Sub(t.start).Microseconds() }

// Emit sends a point event of type typ with the given fields (besides type).
func (t *Tracer) Emit(sev trace.Severity, typ trace.MessageType, fields map[string]any) {
	t.EmitTimed(sev, typ, nil, fields)
}

// EmitTimed sends an event that spans from start to now.
func (t *Tracer) EmitTimed(sev trace.Severity, typ trace.MessageType, start *time.Time, fields map[string]any) {
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
	e := trace.Event{EventEnd: end, Severity: sev, Message: msg}
	if start != nil {
		s := min(t.Micros(*start), end)
		e.EventStart = &s
	}
	if t.w != nil {
		t.w.push(e)
	}
	if len(t.follow) == 0 {
		return
	}
	t.mark(typ, e)
	if typ == trace.ResponseSnapshot {
		if st, ok := fields["requestState"].(map[string]any); ok {
			if resp, ok := st["response"].(map[string]any); ok {
				if c, ok := resp["code"].(int); ok {
					t.code = int64(c)
				}
			}
		}
	}
	fe := e
	fe.RequestID = t.id
	if typ == trace.RequestFinished {
		fm := make(map[string]any, len(msg)+1)
		for k, v := range msg {
			fm[k] = v
		}
		fm["timings"] = t.timings(end)
		fe.Message = fm
	}
	holding := false
	for _, w := range t.follow {
		if w.follow.outcome == nil {
			w.push(fe)
			continue
		}
		holding = true
		if typ != trace.RequestFinished {
			continue
		}
		if !w.follow.accepts(t.code, end) {
			w.discard()
			continue
		}
		for _, h := range t.held {
			w.push(h)
		}
		w.push(fe)
	}
	if holding && typ != trace.RequestFinished {
		t.held = append(t.held, fe)
	}
}

func (t *Tracer) mark(typ trace.MessageType, e trace.Event) {
	if t.marks == nil {
		t.marks = map[trace.MessageType]int64{}
	}
	if _, seen := t.marks[typ]; seen && typ != trace.BackendCallResult {
		return
	}
	t.marks[typ] = e.EventEnd
	if typ == trace.BackendCallResult && e.EventStart != nil {
		t.call = *e.EventStart
	}
}

// timings are the per-phase durations of a followed trace, in
// microseconds: route selection, policies (up to the backend call, or to
// the end when the proxy answered itself), the backend call (its last
// attempt), response processing, and the total.
func (t *Tracer) timings(end int64) map[string]any {
	m := t.marks
	out := map[string]any{"totalMicros": end}
	started := m[trace.RequestStarted]
	route, ok := m[trace.RouteSelection]
	if !ok {
		return out
	}
	out["routeSelectionMicros"] = route - started
	result, called := m[trace.BackendCallResult]
	if !called {
		out["policiesMicros"] = end - route
		return out
	}
	callStart := m[trace.BackendCallStart]
	out["policiesMicros"] = callStart - route
	out["backendCallMicros"] = result - t.call
	out["responseMicros"] = end - result
	return out
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
