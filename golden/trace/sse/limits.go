package sse

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gwdiag/gwdiag/golden/duration"
)

// Limits bounds what a reader takes from a proxy. The suite and the CLI
// validate proxies nobody here wrote, so a proxy that never ends a frame, a
// trace or a dump must cost a bounded amount of memory and time, and be
// named. A zero field takes its default (DefaultLimits); the defaults read
// every real trace and dump the project holds with a wide margin.
type Limits struct {
	// EventBytes bounds one SSE line and one frame (its joined data
	// lines), so one trace event. Default 1 MiB.
	EventBytes int64 `json:"eventBytes,omitempty"`
	// TraceEvents bounds the events of one trace. Default 10000.
	TraceEvents int `json:"traceEvents,omitempty"`
	// TraceBytes bounds the bytes of one trace stream, comments included
	// (a follow stream: of each trace). Default 64 MiB.
	TraceBytes int64 `json:"traceBytes,omitempty"`
	// FrameTime bounds how long one frame may take to arrive once its
	// first byte has: a proxy writes a frame at once, a drip never ends.
	// Default 30s.
	FrameTime duration.Duration `json:"frameTime,omitempty"`
	// BodyBytes bounds an admin response body (config dump, logging,
	// memory, tasks) and a data-plane response body the suite reads.
	// Default 64 MiB.
	BodyBytes int64 `json:"bodyBytes,omitempty"`
	// HeaderBytes bounds a response's header block. Default 64 KiB.
	HeaderBytes int64 `json:"headerBytes,omitempty"`
}

// DefaultLimits returns the bounds a zero Limits stands for.
func DefaultLimits() Limits {
	return Limits{
		EventBytes:  1 << 20,
		TraceEvents: 10000,
		TraceBytes:  64 << 20,
		FrameTime:   duration.Duration(30 * time.Second),
		BodyBytes:   64 << 20,
		HeaderBytes: 64 << 10,
	}
}

// WithDefaults fills the zero fields with DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	l.EventBytes = positiveOr(l.EventBytes, d.EventBytes)
	l.TraceEvents = positiveOr(l.TraceEvents, d.TraceEvents)
	l.TraceBytes = positiveOr(l.TraceBytes, d.TraceBytes)
	l.FrameTime = positiveOr(l.FrameTime, d.FrameTime)
	l.BodyBytes = positiveOr(l.BodyBytes, d.BodyBytes)
	l.HeaderBytes = positiveOr(l.HeaderBytes, d.HeaderBytes)
	return l
}

// positiveOr is v, or def where v is not above zero.
func positiveOr[T int | int64 | duration.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Transport returns an HTTP transport (http.DefaultTransport's dial and
// handshake timeouts) that refuses a response header block larger than
// HeaderBytes. Compression stays off: the suite and the CLI look at what
// the proxy sent, byte for byte, and a body bound then bounds the bytes on
// the wire.
func (l Limits) Transport() *http.Transport {
	l = l.WithDefaults()
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableCompression = true
	t.MaxResponseHeaderBytes = l.HeaderBytes
	return t
}

// LimitError says which bound a proxy went past, and by how much at least:
// the reader stopped there.
type LimitError struct {
	// What is the bounded thing: "trace event", "trace", "config dump"...
	What string
	// Limit is the bound; Got what the proxy sent at least (bytes, events
	// or, for FrameTime, the bytes of the frame when time ran out).
	Limit, Got int64
	// Unit is "bytes", "events" or "time".
	Unit string
	// In says where the bytes were: "in one frame", "in one trace".
	In string
	// Time is the bound of a time limit.
	Time time.Duration
}

// Error reads as "trace event exceeds 1 MiB (proxy sent at least 1048577
// bytes in one frame)".
func (e *LimitError) Error() string {
	switch e.Unit {
	case "events":
		return fmt.Sprintf("%s exceeds %d events (proxy sent at least %d)", e.What, e.Limit, e.Got)
	case "time":
		return fmt.Sprintf("%s took longer than %s to arrive (proxy sent %d bytes of it, then stalled or dripped)", e.What, e.Time, e.Got)
	}
	in := ""
	if e.In != "" {
		in = " " + e.In
	}
	return fmt.Sprintf("%s exceeds %s (proxy sent at least %d bytes%s)", e.What, Size(e.Limit), e.Got, in)
}

// Size writes a byte count the way a person sets it: 1 MiB, 64 KiB, 100 bytes.
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// ReadBody reads a response body of at most max bytes (<= 0: the default
// BodyBytes), what naming it in the error past the bound. It reads one byte
// more than max to tell a body of exactly max from a longer one, never more.
func ReadBody(r io.Reader, max int64, what string) ([]byte, error) {
	if max <= 0 {
		max = DefaultLimits().BodyBytes
	}
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if int64(len(b)) > max {
		return b[:max], &LimitError{What: what, Limit: max, Got: int64(len(b)), Unit: "bytes"}
	}
	return b, err
}

// IsLimit reports whether err is a bound a proxy went past.
func IsLimit(err error) bool {
	if err == nil {
		return false
	}
	var le *LimitError
	return errors.As(err, &le)
}

// IsHeaderLimit reports whether err is net/http refusing a response header
// block past the transport's MaxResponseHeaderBytes (it has no error type
// for it).
func IsHeaderLimit(err error) bool {
	return err != nil && strings.Contains(err.Error(), "server response headers exceeded")
}
