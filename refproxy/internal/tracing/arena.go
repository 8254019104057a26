package tracing

import (
	"sync"

	"github.com/gwdiag/gwdiag/golden/trace/redact"
)

// The arena: the bytes a capture cannot hold by reference (headers the
// proxy rewrites, values fasthttp reuses) are copied into buffers of the
// trace's own, reused from request to request (holdPool), and named by
// Span and Pairs; Memo and Keep carry what one Render hands to the next.
// The buffers go back at requestFinished (release).

// Span is a piece of the tracer's arena.
type Span struct{ off, n int32 }

// Pairs is a run of name/value pairs in the tracer's arena (headers as the
// proxy saw them at a stage).
type Pairs struct{ off, n int32 }

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
