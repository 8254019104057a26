package redact

import "github.com/gwdiag/gwdiag/golden/trace"

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
	open  map[string]*Secrets
	order []string // ids in open, oldest first
	// Redacted counts the events that changed.
	Redacted int
}

// NewStream returns a Stream redacting with r.
func NewStream(r *Redactor) *Stream { return &Stream{r: r, open: map[string]*Secrets{}} }

// AppendEvent appends the redacted event src (one JSON event, whose
// header h the caller read) to dst, and reports whether it changed (see
// Redactor.AppendEvent).
func (st *Stream) AppendEvent(dst, src []byte, h trace.Header) ([]byte, bool) {
	s := st.open[h.RequestID]
	if s == nil {
		s = &Secrets{}
	}
	out, changed := st.r.AppendEvent(dst, src, s)
	if changed {
		st.Redacted++
	}
	switch {
	case h.Type == trace.RequestFinished:
		st.forget(h.RequestID)
	case s.Len() > 0 && st.open[h.RequestID] == nil:
		st.keep(h.RequestID, s)
	}
	if s.Len() > MaxSecretsPerRequest {
		// The longest kept: a short one is the least likely to be
		// found anywhere else.
		s.vals = s.vals[s.Len()-MaxSecretsPerRequest:]
	}
	return out, changed
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
