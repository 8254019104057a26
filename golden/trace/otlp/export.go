package otlp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/gwdiag/gwdiag/golden/trace"
)

// Protocols of Config.Protocol: OTLP over gRPC (the reference's default) or
// over HTTP with protobuf bodies.
const (
	GRPC = "grpc"
	HTTP = "http"
)

// DefaultPath is the OTLP/HTTP path of traces.
const DefaultPath = "/v1/traces"

// Config is where and how an Exporter sends spans.
type Config struct {
	// Endpoint is the collector: a URL (http://host:4317; https for
	// TLS) or host:port (plain text).
	Endpoint string
	// Protocol is GRPC (default) or HTTP.
	Protocol string
	// Path is the OTLP/HTTP path (default DefaultPath); gRPC has none.
	Path string
	// Headers go with every export (a collector's token, say). They are
	// credentials: nothing logs them.
	Headers map[string]string
	// Service is the resource's service.name.
	Service string
	// Queue bounds the requests waiting to be exported (default 2048):
	// past it a request's spans are dropped and counted, so that a slow or
	// dead collector never slows serving.
	Queue int
	// Flush is how long spans wait to be sent in a batch (default 1s).
	Flush time.Duration
	// Timeout bounds one export (default 5s).
	Timeout time.Duration
}

// Validate says what is wrong with a config, or nil.
func (c Config) Validate() error {
	if strings.TrimSpace(c.Endpoint) == "" {
		return errors.New("no OTLP endpoint")
	}
	switch c.Protocol {
	case "", GRPC, HTTP:
	default:
		return fmt.Errorf("OTLP protocol %q: want grpc or http", c.Protocol)
	}
	if _, _, _, err := c.target(); err != nil {
		return err
	}
	return nil
}

// target is the endpoint as host:port, the URL path and whether it is plain
// text.
func (c Config) target() (hostPort, path string, insecure bool, err error) {
	path = c.Path
	e := strings.TrimSpace(c.Endpoint)
	if !strings.Contains(e, "://") {
		e = "http://" + e
	}
	u, err := url.Parse(e)
	if err != nil || u.Host == "" {
		return "", "", false, fmt.Errorf("OTLP endpoint %q: want a URL such as http://127.0.0.1:4317 or host:port", c.Endpoint)
	}
	switch u.Scheme {
	case "http":
		insecure = true
	case "https":
	default:
		return "", "", false, fmt.Errorf("OTLP endpoint %q: scheme %q, want http or https", c.Endpoint, u.Scheme)
	}
	if path == "" && u.Path != "" && u.Path != "/" {
		path = u.Path
	}
	if path == "" {
		path = DefaultPath
	}
	return u.Host, path, insecure, nil
}

// IDs name a request's trace: its trace id, the client's span it continues
// (zero when it started the trace), its own span and the span its backend
// was told of (traceparent), zero to derive one.
type IDs struct {
	Trace   oteltrace.TraceID
	Parent  oteltrace.SpanID
	Root    oteltrace.SpanID
	Backend oteltrace.SpanID
}

// NewIDs are random ids for a request the proxy starts the trace of, or
// continues (parent set: its trace id is kept).
func NewIDs(parent oteltrace.SpanContext) IDs {
	var ids IDs
	if parent.IsValid() {
		ids.Trace, ids.Parent = parent.TraceID(), parent.SpanID()
	} else {
		_, _ = rand.Read(ids.Trace[:])
	}
	_, _ = rand.Read(ids.Root[:])
	_, _ = rand.Read(ids.Backend[:])
	return ids
}

// DerivedIDs are ids that depend only on key (a trace's bytes, say), so
// that exporting the same trace twice gives the same trace and spans.
func DerivedIDs(key []byte) IDs {
	sum := sha256.Sum256(key)
	var ids IDs
	copy(ids.Trace[:], sum[:16])
	copy(ids.Root[:], sum[16:24])
	copy(ids.Backend[:], sum[24:32])
	return ids
}

// spanID is the id of span i of a tree: the root's and the backend's are
// given, the others derived from them, so that a tree's ids are stable.
func (ids IDs) spanID(spans []Span, i int) oteltrace.SpanID {
	switch {
	case i == 0:
		return ids.Root
	case i == BackendSpan(spans) && ids.Backend.IsValid():
		return ids.Backend
	}
	h := sha256.New()
	h.Write(ids.Trace[:])
	h.Write(ids.Root[:])
	fmt.Fprintf(h, "%d", i)
	var id oteltrace.SpanID
	copy(id[:], h.Sum(nil))
	return id
}

// Traceparent is the W3C traceparent a request's backend is sent: the
// trace, and the backend call's span, sampled.
func (ids IDs) Traceparent() string {
	return "00-" + ids.Trace.String() + "-" + ids.Backend.String() + "-01"
}

// ParseTraceparent reads a W3C traceparent header (version 00, and the
// first four fields of a later version); invalid: a zero context.
func ParseTraceparent(v string) oteltrace.SpanContext {
	v = strings.TrimSpace(v)
	parts := strings.Split(v, "-")
	if len(parts) < 4 || len(parts[0]) != 2 || parts[0] == "ff" || parts[0] == "00" && len(parts) != 4 {
		return oteltrace.SpanContext{}
	}
	for _, c := range parts[0] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return oteltrace.SpanContext{}
		}
	}
	tid, err := oteltrace.TraceIDFromHex(parts[1])
	if err != nil {
		return oteltrace.SpanContext{}
	}
	sid, err := oteltrace.SpanIDFromHex(parts[2])
	if err != nil || len(parts[3]) != 2 {
		return oteltrace.SpanContext{}
	}
	var flags byte
	if _, err := fmt.Sscanf(parts[3], "%02x", &flags); err != nil || strings.ToLower(parts[3]) != parts[3] {
		return oteltrace.SpanContext{}
	}
	return oteltrace.NewSpanContext(oteltrace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: oteltrace.TraceFlags(flags), Remote: true})
}

// Exporter sends span trees to an OTLP collector, off the caller's path:
// Export queues (never blocks) and a worker hands the spans to the
// OpenTelemetry SDK's batch processor and OTLP exporter. When the
// collector is slow or gone the queue fills and requests' spans are
// dropped, counted (Dropped).
type Exporter struct {
	cfg      Config
	tp       *sdktrace.TracerProvider
	tracer   oteltrace.Tracer
	queue    chan job
	dropped  atomic.Uint64
	queued   atomic.Uint64
	failures atomic.Uint64
	lastErr  atomic.Pointer[string]
	done     chan struct{}
	stop     sync.Once
}

type job struct {
	start time.Time
	ids   IDs
	spans []Span
	// events, when set, gives the spans' events (ExportLater).
	events func() []trace.Event
	mark   chan struct{} // Flush's
	stop   bool          // Shutdown's
}

// New starts an exporter. It does not connect: a collector that is not
// there yet is reached when spans are sent.
func New(cfg Config) (*Exporter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 2048
	}
	if cfg.Flush <= 0 {
		cfg.Flush = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Service == "" {
		cfg.Service = "gwdiag"
	}
	hostPort, path, insecure, _ := cfg.target()
	var client otlptrace.Client
	if cfg.Protocol == HTTP {
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(hostPort), otlptracehttp.WithURLPath(path),
			otlptracehttp.WithTimeout(cfg.Timeout), otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false})}
		if insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
		}
		client = otlptracehttp.NewClient(opts...)
	} else {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(hostPort), otlptracegrpc.WithTimeout(cfg.Timeout),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false})}
		if insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(cfg.Headers))
		}
		client = otlptracegrpc.NewClient(opts...)
	}
	exp := otlptrace.NewUnstarted(client)
	if err := exp.Start(context.Background()); err != nil {
		return nil, fmt.Errorf("OTLP exporter to %s: %w", hostPort, err)
	}
	e := &Exporter{cfg: cfg, queue: make(chan job, cfg.Queue), done: make(chan struct{})}
	res := resource.NewSchemaless(attribute.String("service.name", cfg.Service))
	// The worker blocks on a full batch queue, so a slow collector
	// fills e.queue, where drops are counted; the request path never
	// waits.
	bsp := sdktrace.NewBatchSpanProcessor(failureCounter{exp, e}, sdktrace.WithBlocking(), sdktrace.WithBatchTimeout(cfg.Flush),
		sdktrace.WithMaxQueueSize(4096), sdktrace.WithExportTimeout(cfg.Timeout))
	e.tp = sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(bsp),
		sdktrace.WithIDGenerator(presetIDs{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	e.tracer = e.tp.Tracer("github.com/gwdiag/gwdiag/golden/trace/otlp")
	go e.work()
	return e, nil
}

// Config is the exporter's config, its defaults filled in.
func (e *Exporter) Config() Config { return e.cfg }

// Export queues a request's span tree: start is when the proxy took the
// request (the events' zero). It never blocks; false: the queue was full
// and the tree dropped (counted).
func (e *Exporter) Export(start time.Time, ids IDs, spans []Span) bool {
	if len(spans) == 0 {
		return true
	}
	return e.enqueue(job{start: start, ids: ids, spans: spans})
}

// ExportLater is Export for a request whose events are read by events, in
// the exporter's worker: the request's path only queues.
func (e *Exporter) ExportLater(start time.Time, ids IDs, events func() []trace.Event) bool {
	return e.enqueue(job{start: start, ids: ids, events: events})
}

// enqueue queues j without waiting; a full queue drops it, counted.
func (e *Exporter) enqueue(j job) bool {
	select {
	case e.queue <- j:
		e.queued.Add(1)
		return true
	default:
		e.dropped.Add(1)
		return false
	}
}

// Queued is how many requests' spans were queued for export.
func (e *Exporter) Queued() uint64 { return e.queued.Load() }

// Dropped is how many requests' spans were dropped on a full queue.
func (e *Exporter) Dropped() uint64 { return e.dropped.Load() }

// Failures is how many batches the collector did not take, and the last
// error ("" for none).
func (e *Exporter) Failures() (uint64, string) {
	n := e.failures.Load()
	if p := e.lastErr.Load(); p != nil {
		return n, *p
	}
	return n, ""
}

// Flush sends what is queued and waits for the collector's answer, up to
// ctx's deadline.
func (e *Exporter) Flush(ctx context.Context) error {
	// A marker: when the worker reaches it, what was queued before is in
	// the batch processor.
	mark := make(chan struct{})
	select {
	case e.queue <- job{mark: mark}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-mark:
	case <-ctx.Done():
		return ctx.Err()
	}
	return e.tp.ForceFlush(ctx)
}

// Shutdown sends what is queued, up to ctx's deadline, and stops.
func (e *Exporter) Shutdown(ctx context.Context) error {
	var err error
	e.stop.Do(func() {
		// A stop marker, not a closed queue: an Export racing with
		// Shutdown queues into a queue nobody reads (bounded), never
		// sends on a closed channel.
		select {
		case e.queue <- job{stop: true}:
		case <-ctx.Done():
			err = ctx.Err()
			return
		}
		select {
		case <-e.done:
		case <-ctx.Done():
			err = ctx.Err()
			return
		}
		err = e.tp.Shutdown(ctx)
	})
	return err
}

func (e *Exporter) work() {
	defer close(e.done)
	for j := range e.queue {
		if j.stop {
			return
		}
		if j.mark != nil {
			close(j.mark)
			continue
		}
		if j.events != nil {
			j.spans = Tree(j.events())
		}
		if len(j.spans) > 0 {
			e.emit(j)
		}
	}
}

// emit starts and ends the spans of one tree with their own times and ids.
func (e *Exporter) emit(j job) {
	at := func(us int64) time.Time { return j.start.Add(time.Duration(us) * time.Microsecond) }
	ctx := context.Background()
	if j.ids.Parent.IsValid() {
		ctx = oteltrace.ContextWithRemoteSpanContext(ctx, oteltrace.NewSpanContext(oteltrace.SpanContextConfig{
			TraceID: j.ids.Trace, SpanID: j.ids.Parent, TraceFlags: oteltrace.FlagsSampled, Remote: true}))
	}
	live := make([]oteltrace.Span, len(j.spans))
	ctxs := make([]context.Context, len(j.spans))
	for i, s := range j.spans {
		parent := ctx
		if s.Parent >= 0 && s.Parent < i {
			parent = ctxs[s.Parent]
		}
		pctx := context.WithValue(parent, presetKey{}, preset{trace: j.ids.Trace, span: j.ids.spanID(j.spans, i)})
		ctxs[i], live[i] = e.tracer.Start(pctx, s.Name, oteltrace.WithTimestamp(at(s.Start)),
			oteltrace.WithSpanKind(s.Kind), oteltrace.WithAttributes(s.Attrs...))
		for _, ev := range s.Events {
			live[i].AddEvent(ev.Name, oteltrace.WithTimestamp(at(ev.At)), oteltrace.WithAttributes(ev.Attrs...))
		}
		if s.Error {
			live[i].SetStatus(codes.Error, s.Message)
		}
	}
	// Children end before their parent, as a backend shows them.
	for i := len(j.spans) - 1; i >= 0; i-- {
		live[i].End(oteltrace.WithTimestamp(at(j.spans[i].End)))
	}
}

// presetIDs gives each span the id emit chose (the SDK asks its generator
// with the context the span is started with).
type presetIDs struct{}

type presetKey struct{}

type preset struct {
	trace oteltrace.TraceID
	span  oteltrace.SpanID
}

func (presetIDs) NewIDs(ctx context.Context) (oteltrace.TraceID, oteltrace.SpanID) {
	p, _ := ctx.Value(presetKey{}).(preset)
	return p.trace, p.span
}

func (presetIDs) NewSpanID(ctx context.Context, _ oteltrace.TraceID) oteltrace.SpanID {
	p, _ := ctx.Value(presetKey{}).(preset)
	return p.span
}

// failureCounter counts the batches the collector refused or never
// answered, and keeps the last error (Failures); the batch processor is
// told of none, so the SDK's global error handler (a log line per batch)
// never hears of a collector that is down.
type failureCounter struct {
	sdktrace.SpanExporter
	e *Exporter
}

func (f failureCounter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := f.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		f.e.failures.Add(1)
		msg := err.Error()
		f.e.lastErr.Store(&msg)
	}
	return nil
}
