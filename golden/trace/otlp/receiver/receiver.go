// Package receiver is an OTLP trace receiver for tests and the suite: it
// takes spans over gRPC and over HTTP (protobuf), on loopback, through the
// OpenTelemetry protocol's own Go types (go.opentelemetry.io/proto/otlp),
// and keeps them to be looked at.
package receiver

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// Span is a received span, its ids in hex.
type Span struct {
	Service         string
	TraceID, SpanID string
	ParentSpanID    string
	Name            string
	Kind            string
	Start, End      time.Time
	Attrs           map[string]any
	Events          []Event
	Error           bool
	StatusMessage   string
}

// Event is a span's event.
type Event struct {
	Name  string
	Time  time.Time
	Attrs map[string]any
}

// Receiver listens for OTLP exports until Close.
type Receiver struct {
	// GRPC is the gRPC endpoint (host:port); HTTP the OTLP/HTTP base URL
	// (http://host:port; traces go to /v1/traces).
	GRPC, HTTP string

	grpcSrv *grpc.Server
	httpSrv *http.Server

	mu      sync.Mutex
	spans   []Span
	headers []map[string]string
	changed chan struct{}
	// fail, when set, makes every export fail (a collector that refuses).
	fail bool
	// hold, when set, makes every export wait for it to close (a
	// collector that does not answer).
	hold chan struct{}
}

// Start listens on two free loopback ports.
func Start() (*Receiver, error) { return StartOn("127.0.0.1") }

// StartOn listens on two free ports of host (an address of this machine
// that the exporting proxy reaches).
func StartOn(host string) (*Receiver, error) {
	r := &Receiver{changed: make(chan struct{})}
	gl, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	hl, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		gl.Close()
		return nil, err
	}
	r.GRPC, r.HTTP = gl.Addr().String(), "http://"+hl.Addr().String()
	r.grpcSrv = grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(r.grpcSrv, grpcService{r: r})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveHTTP)
	r.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.grpcSrv.Serve(gl) }()
	go func() { _ = r.httpSrv.Serve(hl) }()
	return r, nil
}

// Close answers the stalled exports and stops both listeners.
func (r *Receiver) Close() {
	r.Unstall()
	r.grpcSrv.Stop()
	_ = r.httpSrv.Close()
}

// Refuse makes every later export fail (true) or succeed again.
func (r *Receiver) Refuse(on bool) {
	r.mu.Lock()
	r.fail = on
	r.mu.Unlock()
}

// Stall makes every later export wait, unanswered, until Unstall or Close.
func (r *Receiver) Stall() {
	r.mu.Lock()
	if r.hold == nil {
		r.hold = make(chan struct{})
	}
	r.mu.Unlock()
}

// Unstall answers the stalled exports and the later ones again.
func (r *Receiver) Unstall() {
	r.mu.Lock()
	if r.hold != nil {
		close(r.hold)
		r.hold = nil
	}
	r.mu.Unlock()
}

// Spans is what was received so far, in order.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Headers are the headers (gRPC metadata) of each export received, by
// lower-case name.
func (r *Receiver) Headers() []map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]string(nil), r.headers...)
}

// Wait returns the spans once ok holds of them; ctx's end is an error
// naming what was received.
func (r *Receiver) Wait(ctx context.Context, ok func([]Span) bool) ([]Span, error) {
	for {
		r.mu.Lock()
		spans, changed := append([]Span(nil), r.spans...), r.changed
		r.mu.Unlock()
		if ok(spans) {
			return spans, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return spans, fmt.Errorf("%w: %d spans received", ctx.Err(), len(spans))
		}
	}
}

// Trace is the spans of one trace id.
func Trace(spans []Span, traceID string) []Span {
	var out []Span
	for _, s := range spans {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

var errRefused = errors.New("the receiver refuses exports")

func (r *Receiver) take(req *collectortrace.ExportTraceServiceRequest, headers map[string]string) error {
	r.mu.Lock()
	fail, hold := r.fail, r.hold
	r.mu.Unlock()
	if hold != nil {
		<-hold
	}
	if fail {
		return errRefused
	}
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, convert(service, s))
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.headers = append(r.headers, headers)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	return nil
}

func convert(service string, s *tracepb.Span) Span {
	out := Span{Service: service, TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
		ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Kind: s.GetKind().String(),
		Start: time.Unix(0, int64(s.GetStartTimeUnixNano())), End: time.Unix(0, int64(s.GetEndTimeUnixNano())),
		Attrs: attrs(s.GetAttributes()), Error: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
		StatusMessage: s.GetStatus().GetMessage()}
	for _, e := range s.GetEvents() {
		out.Events = append(out.Events, Event{Name: e.GetName(), Time: time.Unix(0, int64(e.GetTimeUnixNano())), Attrs: attrs(e.GetAttributes())})
	}
	return out
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	}
	return nil
}

type grpcService struct {
	collectortrace.UnimplementedTraceServiceServer
	r *Receiver
}

func (g grpcService) Export(ctx context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	h := map[string]string{}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		for k, vs := range md {
			if len(vs) > 0 {
				h[k] = vs[0]
			}
		}
	}
	if err := g.r.take(req, h); err != nil {
		return nil, err
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// maxBody bounds one OTLP/HTTP export.
const maxBody = 16 << 20

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, maxBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		http.Error(w, "not an OTLP protobuf export: "+err.Error(), http.StatusBadRequest)
		return
	}
	h := map[string]string{}
	for k, vs := range req.Header {
		h[strings.ToLower(k)] = vs[0]
	}
	if err := r.take(&msg, h); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}
