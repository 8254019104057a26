package redact

import (
	"slices"

	"github.com/gwdiag/gwdiag/golden/trace"
)

// Bounds of a Stream: the credentials it keeps per request, and the
// requests it keeps them for (a follow stream interleaves at most a few;
// a capture of a proxy that never finishes its traces must not grow).
const (
	MaxSecretsPerRequest = 64
	MaxOpenRequests      = 1024
)

// Stream redacts the events of one stream or capture, in order: the
// credentials an event's headers show are kept for the events of the same
// request after it (by requestId; the events of a stream without ids are
// one request at a time), and forgotten at its requestFinished. Its memory
// is bounded (MaxSecretsPerRequest, MaxOpenRequests).
type Stream struct {
	r     *Redactor
	names *names
	buf   []byte // mayRedact's
	spans []span // appendParsed's
	seen  seen   // appendParsed's
	out   []byte // Parsed's
	// fresh holds the secrets of an event of a request with none yet,
	// until they are kept: most requests have none to keep.
	fresh Secrets
	// markers of the secrets, and its method value (made once)
	markers markers
	mark    func(string) string
	open    map[string]*Secrets
	order   []string // ids in open, oldest first
	// Redacted counts the events that changed.
	Redacted int
}

// NewStream returns a Stream redacting with r.
func NewStream(r *Redactor) *Stream {
	st := &Stream{r: r, names: namesOf(r), open: map[string]*Secrets{}, markers: markers{r: r}}
	st.mark = st.markers.of
	return st
}

// AppendEvent appends the redacted event src (one JSON event, whose
// header h the caller read) to dst, and reports whether it changed (see
// Redactor.AppendEvent).
func (st *Stream) AppendEvent(dst, src []byte, h trace.Header) ([]byte, bool) {
	return st.appendEvent(dst, src, h, st.open[h.RequestID])
}

// appendEvent is AppendEvent with the request's secrets s (nil: none).
func (st *Stream) appendEvent(dst, src []byte, h trace.Header, s *Secrets) ([]byte, bool) {
	if !st.names.mayRedact(st.r, src, s, &st.buf) {
		// Most events: nothing to redact, nothing to learn.
		if h.Type == trace.RequestFinished {
			st.forget(h.RequestID)
		}
		return append(dst, src...), false
	}
	if s == nil {
		s = &Secrets{}
	}
	out, changed := st.r.AppendEvent(dst, src, s)
	return out, st.done(h, s, changed)
}

// done counts an event redacted, and keeps or forgets its request's
// secrets s; it returns changed.
func (st *Stream) done(h trace.Header, s *Secrets, changed bool) bool {
	if changed {
		st.Redacted++
	}
	if s.Len() > MaxSecretsPerRequest {
		// The longest kept: a short one is the least likely to be
		// found anywhere else.
		s.vals = s.vals[s.Len()-MaxSecretsPerRequest:]
	}
	switch {
	case h.Type == trace.RequestFinished:
		st.forget(h.RequestID)
	case s.Len() > 0 && st.open[h.RequestID] == nil:
		if s == &st.fresh {
			s = &Secrets{vals: slices.Clone(s.vals)}
		}
		st.keep(h.RequestID, s)
	}
	return changed
}

// Parsed is AppendParsed for a reader that passes events on: src itself
// when nothing changed (no copy made), else the redacted event, valid
// until the next call.
func (st *Stream) Parsed(src []byte, h trace.Header) ([]byte, bool) {
	out, changed := st.appendParsed(st.out[:0], src, h, false)
	if !changed {
		return src, false
	}
	st.out = out
	return out, true
}

// AppendParsed is AppendEvent for an event a reader has parsed
// (trace.Parse or trace.ParseHeader accepted src: it is JSON): the same
// result, found without reading each of its strings when it has no
// backslash (as events of the reference and the real proxy mostly have
// none), which is several times faster (BenchmarkStream).
func (st *Stream) AppendParsed(dst, src []byte, h trace.Header) ([]byte, bool) {
	return st.appendParsed(dst, src, h, true)
}

// appendParsed is AppendParsed; without whole, dst is left as it is when
// nothing changes.
func (st *Stream) appendParsed(dst, src []byte, h trace.Header, whole bool) ([]byte, bool) {
	s := st.open[h.RequestID]
	fresh := s == nil
	if fresh {
		st.fresh.Reset()
		s = &st.fresh
	}
	out, changed, ok := st.names.appendParsed(st.r, dst, src, s, &st.spans, &st.seen, st.mark, whole)
	if !ok {
		if fresh {
			s = nil
		}
		return st.appendEvent(dst, src, h, s)
	}
	return out, st.done(h, s, changed)
}

// Event is AppendEvent for an event whose header the caller did not read;
// what cannot be read as an event is redacted as one request's text.
func (st *Stream) Event(src []byte) ([]byte, bool) {
	h, _ := trace.ParseHeader(src)
	return st.AppendEvent(nil, src, h)
}

func (st *Stream) keep(id string, s *Secrets) {
	if len(st.order) >= MaxOpenRequests {
		delete(st.open, st.order[0])
		st.order = st.order[1:]
	}
	st.open[id] = s
	st.order = append(st.order, id)
}

func (st *Stream) forget(id string) {
	if _, ok := st.open[id]; !ok {
		return
	}
	delete(st.open, id)
	for i, o := range st.order {
		if o == id {
			st.order = append(st.order[:i], st.order[i+1:]...)
			break
		}
	}
}
