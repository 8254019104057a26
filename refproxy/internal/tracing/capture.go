package tracing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace"
)

// Captured events: what a traced request records of an event, and how it
// becomes the bytes a stream sends. A request taken only by follow
// watchers with an outcome filter is traced "on hold": whether its trace
// is kept is known only at requestFinished, and most are dropped (the
// filter looks for the rare 5xx). Such a request records each event as a
// Capture, by value, in buffers reused from request to request: no map, no
// JSON, no allocation per event. A request with another watcher (one-shot,
// or following without an outcome filter) encodes each capture at once.
// Either way an event is encoded once per kind of stream (one-shot, or
// follow: with its requestId), straight from its capture to the stream's
// SSE frame (Frames): Render writes the message's members as JSON, with
// no map in between, and every watcher queues those bytes.
//
// What a capture holds is what cannot be had later: bytes of the request
// or response that the proxy rewrites or fasthttp reuses (headers, copied
// into the tracer's arena), values of the moment (a status, an error).
// What does not change for the request's lifetime is held by reference
// (a route, a backend, a config table): Ref.

// Capture is one event's content until it is encoded. Render writes the
// message's members (besides type) from it; it must be a top-level
// function, so that storing it allocates nothing. The other fields are
// Render's to interpret.
type Capture struct {
	// Render appends the message's members but type as JSON, exactly as
	// json.Marshal writes a map's: `"key":value` pairs, compact, separated
	// by commas, in key order, every key sorting before "timings" (which
	// the tracer adds to a followed requestFinished, then type). Nothing
	// appended is a message of type alone. TestRenderedFramesAreCanonical
	// (refproxy/internal/proxy) holds every Render to json.Marshal.
	Render func(b []byte, t *Tracer, c Capture) []byte
	// Fields, without Render, are the fields of an event built eagerly
	// (rare events: policies, retries, the reasons of the proxy's own
	// answers); the trace keeps them until they are encoded. Neither: a
	// message of type alone.
	Fields map[string]any
	// Refs are values that do not change for the request's lifetime, e.g.
	// a *route: pointers, so that storing them allocates nothing.
	Refs  [4]any
	Str   string // a constant, e.g. a stage
	Code  int
	Flag  bool
	Err   error
	Spans [4]Span
	Pairs Pairs
}

// held is a captured event waiting for requestFinished.
type held struct {
	sev   trace.Severity
	typ   trace.MessageType
	timed bool
	start int64
	end   int64
	c     Capture
}

// Record traces an event from a capture: encoded now when a watcher
// wants every event, held for requestFinished when only outcome filters
// decide (see above). start, when set, makes it a timed event.
func (t *Tracer) Record(sev trace.Severity, typ trace.MessageType, start *time.Time, c Capture) {
	if t == nil {
		return
	}
	end := t.endNow()
	var from int64 = -1
	if start != nil {
		from = min(t.Micros(*start), end)
	}
	t.record(sev, typ, from, end, c)
}

// RecordNext is Record for a point event that follows the last one with
// no work between them worth a clock reading (the next stage's snapshot
// of a request that did not change, the backend call that starts right
// after the final request): its eventEnd is the last event's. A request
// on hold reads the clock six times, not twelve (docs/admin.md).
func (t *Tracer) RecordNext(sev trace.Severity, typ trace.MessageType, c Capture) {
	if t == nil {
		return
	}
	t.record(sev, typ, -1, t.last, c)
}

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

// record traces an event that ended at end (and started at start, when
// start is not negative: a timed event).
func (t *Tracer) record(sev trace.Severity, typ trace.MessageType, start, end int64, c Capture) {
	if typ == trace.ResponseSnapshot {
		if c.Render != nil {
			t.code = int64(c.Code)
		} else if code, ok := fieldsCode(c.Fields); ok {
			t.code = code
		}
	}
	if t.hold && typ != trace.RequestFinished {
		// Recorded in place: a capture is copied once. The timings'
		// marks wait for a trace an outcome filter keeps (finishHeld).
		// Every field is set: a slot past len is taken as it is.
		hb := t.buffers()
		n := len(hb.events)
		if n < cap(hb.events) {
			hb.events = hb.events[:n+1]
		} else {
			hb.events = append(hb.events, held{})
		}
		h := &hb.events[n]
		h.sev, h.typ, h.timed, h.start, h.end, h.c = sev, typ, start >= 0, max(start, 0), end, c
		return
	}
	h := held{sev: sev, typ: typ, timed: start >= 0, start: max(start, 0), end: end, c: c}
	if len(t.follow) > 0 {
		t.markAt(typ, end, h.start, h.timed)
	}
	if t.hold {
		t.finishHeld(&h)
		return
	}
	t.send(&h)
}

// A request is captured at several stages (its initial snapshot, after
// the route's policies, the final one), most often unchanged. A capture can
// keep what it copied (Keep), and a later one compare the request with it
// (Holds, Pair) and share those bytes (Kept) rather than copy them again.

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

// send encodes an event recorded by a request whose events go out as they
// happen, and gives it to its watchers: the one-shot watcher, the follow
// watchers without an outcome filter, and, at requestFinished, those with
// one that keep the trace (until then their frames are held).
func (t *Tracer) send(h *held) {
	fin := h.typ == trace.RequestFinished
	hb := t.buffers()
	if fin {
		// The captures of the trace are encoded: the arena goes back.
		defer t.release()
	}
	if t.exp != nil {
		t.exportEvent(h, fin)
	}
	if t.w != nil {
		hb.out.Reset()
		t.appendFrame(&hb.out, h, false)
		t.w.push(&hb.out, fin)
	}
	if len(t.follow) == 0 {
		return
	}
	hb.out.Reset()
	t.appendFrame(&hb.out, h, true)
	holding, heldFin := false, false
	for _, w := range t.follow {
		if w.follow.outcome == nil {
			w.push(&hb.out, fin)
			continue
		}
		holding = true
		if !fin {
			continue
		}
		if !w.follow.accepts(t.code, h.end) {
			w.discard(t.at(h.end))
			continue
		}
		if !heldFin {
			hb.held.b = append(hb.held.b, hb.out.b...)
			hb.held.end()
			heldFin = true
		}
		w.push(&hb.held, true)
	}
	if holding && !fin {
		hb.held.b = append(hb.held.b, hb.out.b...)
		hb.held.end()
	}
}

// exportEvent encodes h for the export; at requestFinished the events go.
func (t *Tracer) exportEvent(h *held, fin bool) {
	x := t.exp
	t.appendFrame(&x.fs, h, false)
	if !fin {
		return
	}
	t.exp = nil
	x.done(t.start, x.fs)
}

// appendFrame appends the SSE frame of h to fs: as a follow stream sends
// it (with the request's id, and a requestFinished's timings) when follow
// is set, else as a one-shot stream does.
func (t *Tracer) appendFrame(fs *Frames, h *held, follow bool) {
	start := len(fs.b)
	if h.c.Render == nil && h.c.Fields != nil {
		msg := messageOf(h.typ, h.c.Fields)
		if follow && h.typ == trace.RequestFinished {
			msg["timings"] = rawJSON(t.appendTimings(nil, h.end))
		}
		e := trace.Event{EventEnd: h.end, Severity: h.sev, Message: msg}
		if h.timed {
			s := h.start
			e.EventStart = &s
		}
		if follow {
			e.RequestID = t.RequestID()
		}
		fs.appendEvent(e)
		t.scrubFrame(fs, start, true)
		return
	}

	b := append(fs.b, "data: "...)
	b = appendHead(b, h.timed, h.start, h.end, h.sev)
	at := len(b)
	if h.c.Render != nil {
		b = h.c.Render(b, t, h.c)
	}
	if follow && h.typ == trace.RequestFinished {
		if len(b) > at {
			b = append(b, ',')
		}
		b = append(b, `"timings":`...)
		b = t.appendTimings(b, h.end)
	}
	if len(b) > at {
		b = append(b, ',')
	}
	b = append(b, `"type":`...)
	b = appendString(b, string(h.typ))
	b = append(b, '}')
	if id := t.RequestID(); follow && id != "" {
		b = append(b, `,"requestId":`...)
		b = appendString(b, id)
	}
	fs.b = append(b, "}\n\n"...)
	fs.end()
	if t.hb == nil || !t.hb.batch {
		t.scrubFrame(fs, start, false)
	}
}

// finishHeld decides an on-hold trace at requestFinished: each outcome
// watcher that accepts it gets every event, encoded now, once for all of
// them; the others give its request back. The buffers go back to the pool.
func (t *Tracer) finishHeld(fin *held) {
	var keep []*Watcher
	var keepArr [MaxFollowers]*Watcher
	keep = keepArr[:0]
	for _, w := range t.follow {
		if w.follow.accepts(t.code, fin.end) {
			keep = append(keep, w)
		} else {
			w.discard(t.at(fin.end))
		}
	}
	if len(keep) > 0 {
		// The marks are taken as the events are rendered: only
		// requestFinished's frame (last) uses them.
		hb := t.buffers()
		hb.out.Reset()
		// The frames are scrubbed together, once all are rendered: a
		// search over the whole trace costs a search per secret, not
		// one per secret and frame.
		hb.batch = true
		for i := range hb.events {
			h := &hb.events[i]
			t.markAt(h.typ, h.end, h.start, h.timed)
			t.appendFrame(&hb.out, h, true)
		}
		t.appendFrame(&hb.out, fin, true)
		hb.batch = false
		t.scrubFrames(&hb.out)
		for _, w := range keep {
			w.push(&hb.out, true)
		}
	}
	t.release()
}

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

// Events are the frames' events, as a stream's reader reads them: a frame
// that is not an event (an encoding failure, said in a comment) is left
// out.
func (f Frames) Events() []trace.Event {
	events := make([]trace.Event, 0, f.Len())
	for i := range f.Len() {
		data, ok := bytes.CutPrefix(bytes.TrimSuffix(f.Frame(i), []byte("\n\n")), []byte("data: "))
		if !ok {
			continue
		}
		if e, err := trace.Parse(data); err == nil {
			events = append(events, e)
		}
	}
	return events
}
