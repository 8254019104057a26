package tracing

import (
	"sync"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/redact"
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

// Span is a piece of the tracer's arena.
type Span struct{ off, n int32 }

// Pairs is a run of name/value pairs in the tracer's arena (headers as the
// proxy saw them at a stage).
type Pairs struct{ off, n int32 }

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
	// (refproxy/proxy) holds every Render to json.Marshal.
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

// holdBuffers are an on-hold request's captures and their arena, reused.
type holdBuffers struct {
	events []held
	arena  []byte
	pairs  []Span
	// memoC and memo are what a Render kept for the next (Memo).
	memoC  Capture
	memo   Span
	memoOK bool
	// out is the frames of the event(s) being sent; held, in a request
	// that outcome filters and other watchers follow, the frames kept for
	// the outcome filters until requestFinished.
	out, held Frames
	// kept are the spans and pairs a capture stored for the next (Keep).
	keptSpans [4]Span
	keptPairs Pairs
	kept      bool
	// secrets are the trace's credentials (redaction.go): views of the
	// arena, or strings the proxy gave; pending the captured values of
	// credential headers whose secrets are taken when one is needed
	// (Secrets). needles are their JSON forms, ended at needleEnds, made
	// for needlesFor secrets; anyNonASCII: some secret's JSON form
	// depends on its surroundings. scratch is the scrubbing pass's
	// output.
	secrets     redact.Secrets
	secretList  []string // secrets, in the order they came (needles)
	pending     []pendingSecret
	needles     []byte
	needleEnds  []int32
	anchors     []int32 // the byte of each needle searched for
	needlesFor  int
	anyNonASCII bool
	scratch     []byte
	// redacted are the header values redacted so far, for the next
	// snapshot that shows them (AppendRedacted).
	redacted []redactedValue
	// batch: the frames being rendered are scrubbed together when all
	// are (scrubFrames), but for those of events built as maps.
	batch bool
}

var holdPool = sync.Pool{New: func() any {
	return &holdBuffers{events: make([]held, 0, 16), arena: make([]byte, 0, 2048), pairs: make([]Span, 0, 32)}
}}

// arenaBytes appends b to the arena of t (its hold buffers, or a private
// one for a request rendered at once).
func (t *Tracer) buffers() *holdBuffers {
	if t.hb == nil {
		t.hb = holdPool.Get().(*holdBuffers)
	}
	return t.hb
}

// Copy keeps a copy of b in the tracer's arena.
func (t *Tracer) Copy(b []byte) Span {
	hb := t.buffers()
	s := Span{int32(len(hb.arena)), int32(len(b))}
	hb.arena = append(hb.arena, b...)
	return s
}

// CopyString is Copy for a string.
func (t *Tracer) CopyString(s string) Span {
	hb := t.buffers()
	sp := Span{int32(len(hb.arena)), int32(len(s))}
	hb.arena = append(hb.arena, s...)
	return sp
}

// Bytes is the content of a span; valid until the trace ends.
func (t *Tracer) Bytes(s Span) []byte { return t.hb.arena[s.off : s.off+s.n] }

// String is the content of a span as a new string.
func (t *Tracer) String(s Span) string { return string(t.Bytes(s)) }

// PairsStart begins a run of pairs (AddPair, then PairsEnd).
func (t *Tracer) PairsStart() Pairs { return Pairs{off: int32(len(t.buffers().pairs))} }

// AddPair copies one name/value pair into the run under way. The value
// of a header the trace redacts is registered as a secret of the request
// (a view of the copy): every frame rendered after it is scrubbed of it.
func (t *Tracer) AddPair(k, v []byte) {
	hb := t.buffers()
	off, nk := int32(len(hb.arena)), int32(len(k))
	hb.arena = append(append(hb.arena, k...), v...)
	hb.pairs = append(hb.pairs, Span{off, nk}, Span{off + nk, int32(len(v))})
	if !t.red.maybe(b2s(k)) || len(v) == 0 {
		return
	}
	if name, ok := t.red.sensitive(b2s(k)); ok {
		hb.pending = append(hb.pending, pendingSecret{name, Span{off + nk, int32(len(v))}})
	}
}

// PairsEnd ends the run begun with p.
func (t *Tracer) PairsEnd(p Pairs) Pairs {
	p.n = int32(len(t.hb.pairs)) - p.off
	return p
}

// Len is how many name/value pairs p holds.
func (p Pairs) Len() int { return int(p.n) / 2 }

// Pair is the i-th pair of p (Pairs.Len); the slices are valid until the
// trace ends.
func (t *Tracer) Pair(p Pairs, i int) (k, v []byte) {
	at := p.off + int32(2*i)
	return t.Bytes(t.hb.pairs[at]), t.Bytes(t.hb.pairs[at+1])
}

// EachPair calls f with each pair of p, in order; the slices are valid
// until the trace ends.
func (t *Tracer) EachPair(p Pairs, f func(k, v []byte)) {
	ps := t.hb.pairs[p.off : p.off+p.n]
	for i := 0; i+1 < len(ps); i += 2 {
		f(t.Bytes(ps[i]), t.Bytes(ps[i+1]))
	}
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

// appendFrame appends the SSE frame of h to fs: as a follow stream sends
// it (with the request's id, and a requestFinished's timings) when follow
// is set, else as a one-shot stream does.
func (t *Tracer) appendFrame(fs *Frames, h *held, follow bool) {
	start := len(fs.b)
	if h.c.Render == nil && h.c.Fields != nil {
		msg := messageOf(h.typ, h.c.Fields)
		if follow && h.typ == trace.RequestFinished {
			msg["timings"] = JSON(t.appendTimings(nil, h.end))
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

// Memo is what a Render kept with SetMemo for the renders after it in the
// trace (e.g. the last request snapshot's capture and its state's JSON,
// to share with the next snapshot when the request did not change), if
// anything.
func (t *Tracer) Memo() (Capture, Span, bool) {
	hb := t.buffers()
	return hb.memoC, hb.memo, hb.memoOK
}

// SetMemo keeps c and s for Memo.
func (t *Tracer) SetMemo(c Capture, s Span) {
	hb := t.buffers()
	hb.memoC, hb.memo, hb.memoOK = c, s, true
}

// A request is captured at several stages (its initial snapshot, after
// the route's policies, the final one), most often unchanged. A capture can
// keep what it copied (Keep), and a later one compare the request with it
// (Holds, Pair) and share those bytes (Kept) rather than copy them again.

// Keep stores spans and p, copied by the capture under way, for Kept.
func (t *Tracer) Keep(spans [4]Span, p Pairs) {
	hb := t.buffers()
	hb.keptSpans, hb.keptPairs, hb.kept = spans, p, true
}

// Kept is what Keep stored last in this trace, if anything.
func (t *Tracer) Kept() (spans [4]Span, p Pairs, ok bool) {
	hb := t.buffers()
	return hb.keptSpans, hb.keptPairs, hb.kept
}

// Holds reports whether span s holds the bytes b.
func (t *Tracer) Holds(s Span, b []byte) bool { return string(t.Bytes(s)) == string(b) }

// SameBytes reports whether spans a and b hold the same bytes.
func (t *Tracer) SameBytes(a, b Span) bool { return string(t.Bytes(a)) == string(t.Bytes(b)) }

// SamePairs reports whether runs a and b hold the same pairs, in order.
func (t *Tracer) SamePairs(a, b Pairs) bool {
	if a.n != b.n {
		return false
	}
	ps := t.hb.pairs
	for i := range a.n {
		if !t.SameBytes(ps[a.off+i], ps[b.off+i]) {
			return false
		}
	}
	return true
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

// release gives the hold buffers back.
func (t *Tracer) release() {
	hb := t.hb
	if hb == nil {
		return
	}
	t.hb = nil
	clear(hb.events) // drop references (errors, routes) held by captures
	hb.events, hb.arena, hb.pairs = hb.events[:0], hb.arena[:0], hb.pairs[:0]
	hb.memoC, hb.memoOK = Capture{}, false
	hb.kept = false
	hb.secrets.Reset()
	clear(hb.secretList)
	hb.secretList = hb.secretList[:0]
	hb.pending = hb.pending[:0]
	hb.needles, hb.needleEnds, hb.anchors, hb.needlesFor, hb.anyNonASCII = hb.needles[:0], hb.needleEnds[:0], hb.anchors[:0], 0, false
	hb.scratch = hb.scratch[:0]
	hb.redacted = hb.redacted[:0]
	hb.out.Reset()
	hb.held.Reset()
	if cap(hb.arena) <= 64<<10 && cap(hb.out.b) <= 256<<10 && cap(hb.held.b) <= 256<<10 && cap(hb.scratch) <= 256<<10 {
		holdPool.Put(hb)
	}
}
