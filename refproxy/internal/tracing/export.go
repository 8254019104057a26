package tracing

import (
	"time"
)

// A request the OpenTelemetry export samples (config.tracing) is traced
// for it as for a one-shot watcher: each event encoded as a stream would
// send it (redacted the same way), and at requestFinished the events go,
// parsed back, to the export's function, which makes them the request's
// span tree (golden/trace/otlp). The stream's bytes are the one truth, so
// a span says what /debug/trace says.

// exportSink is a sampled request's events for the export.
type exportSink struct {
	fs          Frames
	traceparent string
	done        func(start time.Time, frames Frames)
}

// NewExportTracer is a tracer for a request nobody watches but the export
// samples; give it ExportTo before its first event.
func NewExportTracer() *Tracer { return &Tracer{start: time.Now()} }

// ExportTo gives the request's events, once it has finished, to done, as
// the frames a one-shot stream would have sent (done owns them; Events
// reads them): start is the events' zero. traceparent is what the
// request's backend is sent (Traceparent). A request on hold for outcome
// filters is then encoded at once, as for a one-shot watcher.
func (t *Tracer) ExportTo(traceparent string, done func(start time.Time, frames Frames)) {
	t.exp = &exportSink{traceparent: traceparent, done: done}
	t.hold = false
}

// Traceparent is the W3C traceparent the request's backend is sent, ""
// when the export does not sample it.
func (t *Tracer) Traceparent() string {
	if t == nil || t.exp == nil {
		return ""
	}
	return t.exp.traceparent
}
