package proxy

import (
	"context"
	"math/rand/v2"
	"reflect"
	"time"

	"cel.dev/cel-go/cel"
	"github.com/valyala/fasthttp"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/otlp"
	"github.com/gwdiag/gwdiag/refproxy/celexpr"
	"github.com/gwdiag/gwdiag/refproxy/config"
	"github.com/gwdiag/gwdiag/refproxy/internal/tracing"
)

// otelExport is a table's OpenTelemetry export (config.tracing): the
// exporter, kept across reloads while its config is the same, and the two
// sampling decisions. A sampled request is traced as for a one-shot
// watcher and its events become its span tree in the exporter's worker
// (golden/trace/otlp); its backend is sent a traceparent naming its
// backend call span. An untraced request pays one pointer test.
type otelExport struct {
	exp            *otlp.Exporter
	random, client sampler
	// rewrite is Options.OTLPEvents.
	rewrite func([]trace.Event) []trace.Event
}

// sampler is a config.Sampling, its expression compiled.
type sampler struct {
	ratio float64
	prog  cel.Program
}

func newSampler(s *config.Sampling, def float64) (sampler, error) {
	if s == nil {
		return sampler{ratio: def}, nil
	}
	if s.Expr == "" {
		return sampler{ratio: s.Ratio}, nil
	}
	p, err := celexpr.CompileRequest(s.Expr, celexpr.Scalar)
	return sampler{prog: p}, err
}

// sample decides for one request; an expression sees it as `request`
// (as a trace filter does). An expression's error, or a result neither a
// bool nor a number, samples nothing.
func (s sampler) sample(ctx *fasthttp.RequestCtx, rd *tracing.Redaction) bool {
	ratio := s.ratio
	if s.prog != nil {
		out, _, err := s.prog.Eval(map[string]any{"request": newCELRequest(ctx, rd),
			"jwt": celexpr.NoClaims, "apiKey": celexpr.NoClaims, "basicAuth": celexpr.NoClaims})
		if err != nil {
			return false
		}
		switch v := out.Value().(type) {
		case bool:
			return v
		case float64:
			ratio = v
		case int64:
			ratio = float64(v)
		case uint64:
			ratio = float64(v)
		default:
			return false
		}
	}
	return ratio >= 1 || ratio > 0 && rand.Float64() < ratio
}

// begin decides whether the export samples the request: with the
// client's sampling when its traceparent is valid (the trace continues),
// else the random one. A sampled request gets a tracer (tr, or a new one)
// that hands its events to the exporter when it ends.
func (o *otelExport) begin(ctx *fasthttp.RequestCtx, tr *tracing.Tracer, rd *tracing.Redaction) *tracing.Tracer {
	s := o.random
	var parent oteltrace.SpanContext
	if v, ok := peekFold(&ctx.Request.Header, "traceparent"); ok {
		if parent = otlp.ParseTraceparent(b2s(v)); parent.IsValid() {
			s = o.client
		}
	}
	if !s.sample(ctx, rd) {
		return tr
	}
	if tr == nil {
		tr = tracing.NewExportTracer()
	}
	ids := otlp.NewIDs(parent)
	exp, rewrite := o.exp, o.rewrite
	tr.ExportTo(ids.Traceparent(), func(start time.Time, fs tracing.Frames) {
		events := fs.Events
		if rewrite != nil {
			events = func() []trace.Event { return rewrite(fs.Events()) }
		}
		exp.ExportLater(start, ids, events)
	})
	return tr
}

// setTraceparent tells the backend of a sampled request its trace: the
// client's traceparent, if any, is replaced.
func setTraceparent(req *fasthttp.Request, tr *tracing.Tracer) {
	if tp := tr.Traceparent(); tp != "" {
		delFold(&req.Header, "traceparent")
		req.Header.Set("traceparent", tp)
	}
}

// otelFor builds the export of cfg: the exporter running for the same
// config is kept, else a new one is started. It reports the exporter it
// replaces (to shut down once the table is in place), if any.
func (dp *Dataplane) otelFor(cfg *config.Config) (*otelExport, *otlp.Exporter, error) {
	var tc *config.Tracing
	if cfg.Config != nil {
		tc = cfg.Config.Tracing
	}
	old := dp.exporter
	if tc == nil || tc.OTLPEndpoint == "" {
		return nil, old, nil
	}
	random, err := newSampler(tc.RandomSampling, 0)
	if err != nil {
		return nil, nil, err
	}
	client, err := newSampler(tc.ClientSampling, 1)
	if err != nil {
		return nil, nil, err
	}
	oc := tc.OTLP()
	if old != nil && reflect.DeepEqual(old.Config().Headers, oc.Headers) && sameTarget(old.Config(), oc) {
		return &otelExport{exp: old, random: random, client: client, rewrite: dp.opts.OTLPEvents}, nil, nil
	}
	exp, err := otlp.New(oc)
	if err != nil {
		return nil, nil, err
	}
	return &otelExport{exp: exp, random: random, client: client, rewrite: dp.opts.OTLPEvents}, old, nil
}

func sameTarget(a, b otlp.Config) bool {
	return a.Endpoint == b.Endpoint && a.Protocol == b.Protocol && a.Path == b.Path && a.Service == b.Service
}

// stopExporter sends what an exporter the config no longer uses holds, and
// stops it, off the caller's path (bounded: a dead collector waits no
// longer than 5 s).
func (dp *Dataplane) stopExporter(e *otlp.Exporter) {
	if e == nil {
		return
	}
	dp.draining.Add(1)
	go func() {
		defer dp.draining.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.Shutdown(ctx)
	}()
}

// OTLPStatus is what /debug/otlp shows of the export.
type OTLPStatus struct {
	// Enabled: config.tracing names a collector.
	Enabled  bool   `json:"enabled"`
	Endpoint string `json:"endpoint,omitempty"`
	Protocol string `json:"protocol,omitempty"`
	// Queued requests' span trees; Dropped on a full queue; FailedBatches
	// the collector did not take, LastError its last answer.
	Queued        uint64 `json:"queued"`
	Dropped       uint64 `json:"dropped"`
	FailedBatches uint64 `json:"failedBatches"`
	LastError     string `json:"lastError,omitempty"`
}

// OTLPStatus is the export's state and counts.
func (dp *Dataplane) OTLPStatus() OTLPStatus {
	dp.applyMu.Lock()
	e := dp.exporter
	dp.applyMu.Unlock()
	if e == nil {
		return OTLPStatus{}
	}
	c := e.Config()
	failures, last := e.Failures()
	return OTLPStatus{Enabled: true, Endpoint: c.Endpoint, Protocol: c.Protocol, Queued: e.Queued(),
		Dropped: e.Dropped(), FailedBatches: failures, LastError: last}
}
