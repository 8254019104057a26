package trace

import (
	"sync"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace"
)

// Captured events: what a traced request records of an event when nobody
// may want it yet. A request taken only by follow watchers with an outcome
// filter is traced "on hold": whether its trace is kept is known only at
// requestFinished, and most are dropped (the filter looks for the rare 5xx).
// Such a request records each event as a Capture, by value, in buffers
// reused from request to request: no map, no JSON, no allocation per event.
// What the message says is built from the capture (Capture.Render) only
// when an outcome filter keeps the trace. A request with another watcher
// (one-shot, or following without an outcome filter) renders each capture
// at once, so every watcher sees the same events either way.
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

// Capture is one event's content until it is rendered. Render builds the
// message fields (besides type) from it; it must be a top-level function,
// so that storing it allocates nothing. The other fields are Render's to
// interpret.
type Capture struct {
	// Render returns a new map, which the trace owns.
	Render func(t *Tracer, c Capture) map[string]any
	// Fields, without Render, are the fields of an event built eagerly
	// (rare events: policies, retries, the reasons of the proxy's own
	// answers); the trace copies them.
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
	// memoC and memoV are what a Render kept for the next (Memo).
	memoC Capture
	memoV any
	// kept are the spans and pairs a capture stored for the next (Keep).
	keptSpans [4]Span
	keptPairs Pairs
	kept      bool
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

// AddPair copies one name/value pair into the run under way.
func (t *Tracer) AddPair(k, v []byte) {
	ks, vs := t.Copy(k), t.Copy(v)
	t.hb.pairs = append(t.hb.pairs, ks, vs)
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

// Record traces an event from a capture: rendered now when a watcher
// wants every event, held for requestFinished when only outcome filters
// decide (see above). start, when set, makes it a timed event.
func (t *Tracer) Record(sev trace.Severity, typ trace.MessageType, start *time.Time, c Capture) {
	if t == nil {
		return
	}
	if !t.hold {
		if typ == trace.ResponseSnapshot && c.Render != nil {
			t.code = int64(c.Code) // its message may hold it as JSON
		}
		t.emit(sev, typ, start, t.render(typ, c))
		return
	}
	h := held{sev: sev, typ: typ, c: c}
	h.end = t.endNow()
	if start != nil {
		h.timed, h.start = true, min(t.Micros(*start), h.end)
	}
	t.markAt(typ, h.end, h.start, h.timed)
	if typ == trace.ResponseSnapshot {
		t.code = int64(c.Code)
	}
	hb := t.buffers()
	if typ != trace.RequestFinished {
		hb.events = append(hb.events, h)
		return
	}
	t.finishHeld(h)
}

// render builds the message of a captured event (type included). The
// fields rendered last are kept for Previous.
func (t *Tracer) render(typ trace.MessageType, c Capture) map[string]any {
	if c.Render == nil {
		return messageOf(typ, c.Fields)
	}
	msg := c.Render(t, c)
	if msg == nil {
		msg = make(map[string]any, 1)
	}
	t.prev = msg
	msg["type"] = string(typ)
	return msg
}

// Previous is the message of the event rendered before the one being
// rendered (for a Render that shares its content), or nil.
func (t *Tracer) Previous() map[string]any { return t.prev }

// Memo is what a Render kept with SetMemo for the renders after it in the
// trace (e.g. the last request snapshot's capture and content, to share
// with the next snapshot when the request did not change), or zero.
func (t *Tracer) Memo() (Capture, any) {
	hb := t.buffers()
	return hb.memoC, hb.memoV
}

// SetMemo keeps c and v for Memo.
func (t *Tracer) SetMemo(c Capture, v any) {
	hb := t.buffers()
	hb.memoC, hb.memoV = c, v
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
// watcher that accepts it gets every event, rendered now; the others give
// its request back. The buffers go back to the pool.
func (t *Tracer) finishHeld(fin held) {
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
		hb := t.hb
		for i := range hb.events {
			t.pushHeld(&hb.events[i], keep)
		}
		t.pushHeld(&fin, keep)
	}
	t.release()
}

// pushHeld renders a held event and sends it to ws.
func (t *Tracer) pushHeld(h *held, ws []*Watcher) {
	msg := t.render(h.typ, h.c)
	if h.typ == trace.RequestFinished {
		msg["timings"] = t.timings(h.end)
	}
	e := trace.Event{EventEnd: h.end, Severity: h.sev, Message: msg, RequestID: t.RequestID()}
	if h.timed {
		s := h.start
		e.EventStart = &s
	}
	for _, w := range ws {
		w.push(e)
	}
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
	hb.memoC, hb.memoV = Capture{}, nil
	hb.kept = false
	if cap(hb.arena) <= 64<<10 {
		holdPool.Put(hb)
	}
}
