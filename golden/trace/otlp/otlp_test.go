package otlp_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/otlp"
	"github.com/gwdiag/gwdiag/golden/trace/otlp/receiver"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
)

// traceOf reads the first trace of a capture file.
func traceOf(t *testing.T, path string) []trace.Event {
	t.Helper()
	var evs []trace.Event
	err := sse.ReadTracesFile(path, nil, func(ct sse.CapturedTrace) error {
		if evs == nil {
			evs = ct.TraceEvents()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) == 0 {
		t.Fatalf("%s: no trace", path)
	}
	return evs
}

func attr(s otlp.Span, key string) (attribute.Value, bool) {
	for _, a := range s.Attrs {
		if string(a.Key) == key {
			return a.Value, true
		}
	}
	return attribute.Value{}, false
}

func named(spans []otlp.Span, name string) []otlp.Span {
	var out []otlp.Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// checkShape: the request's span is first and holds every other span, in
// time and as their parent.
func checkShape(t *testing.T, spans []otlp.Span) {
	t.Helper()
	if len(spans) == 0 || spans[0].Parent != -1 || spans[0].Kind != oteltrace.SpanKindServer {
		t.Fatalf("the request's span is not first: %+v", spans)
	}
	root := spans[0]
	for i, s := range spans[1:] {
		if s.Parent != 0 {
			t.Errorf("span %d %q: parent %d, want the request's", i+1, s.Name, s.Parent)
		}
		if s.Start > s.End || s.Start < root.Start || s.End > root.End {
			t.Errorf("span %d %q [%d, %d] outside the request's [%d, %d]", i+1, s.Name, s.Start, s.End, root.Start, root.End)
		}
	}
}

func TestTreeOfAForwardedRequest(t *testing.T) {
	spans := otlp.Tree(traceOf(t, "../../traces/a-forwarded-request-traces-every-required-event-in-order.jsonl"))
	checkShape(t, spans)
	root := spans[0]
	if root.Name != "GET default/httpbin" || root.Error {
		t.Errorf("request span %q error=%v, want GET default/httpbin, no error", root.Name, root.Error)
	}
	if v, _ := attr(root, "http.response.status_code"); v.AsInt64() != 200 {
		t.Errorf("status %v, want 200", v.Emit())
	}
	if v, _ := attr(root, "http.route"); !strings.HasSuffix(v.AsString(), "/default/httpbin") {
		t.Errorf("http.route %q", v.AsString())
	}
	if len(named(spans, otlp.NameRouteSelection)) != 1 {
		t.Errorf("route selection spans: %d, want 1", len(named(spans, otlp.NameRouteSelection)))
	}
	calls := named(spans, otlp.NameBackendCall)
	if len(calls) != 1 || calls[0].Kind != oteltrace.SpanKindClient || calls[0].Start != 7 || calls[0].End != 8 {
		t.Fatalf("backend calls %+v, want one client span [7, 8]", calls)
	}
	if otlp.BackendSpan(spans) < 0 || !spans[otlp.BackendSpan(spans)].Backend {
		t.Errorf("BackendSpan = %d", otlp.BackendSpan(spans))
	}
	// Snapshots are events of the request's span, at their time.
	var stages []string
	for _, e := range root.Events {
		if e.Name == string(trace.RequestSnapshot) {
			stages = append(stages, e.Name)
		}
	}
	if len(stages) != 4 {
		t.Errorf("request snapshots as events: %d, want 4", len(stages))
	}
}

func TestTreeOfARefusal(t *testing.T) {
	spans := otlp.Tree(traceOf(t, "../../traces/a-rate-limited-request-traces-a-429-and-no-backend-call.jsonl"))
	checkShape(t, spans)
	root := spans[0]
	if v, _ := attr(root, "http.response.status_code"); v.AsInt64() != 429 {
		t.Errorf("status %v, want 429", v.Emit())
	}
	if root.Error {
		t.Error("a 429 marked the server span an error: it is the client's")
	}
	if len(named(spans, otlp.NameBackendCall)) != 0 || otlp.BackendSpan(spans) != -1 {
		t.Error("a refused request has a backend call span")
	}
	pol := named(spans, otlp.NamePolicyPrefix+"localRateLimit")
	if len(pol) != 1 || !pol[0].Error || !strings.Contains(pol[0].Message, "refused by localRateLimit[0]") {
		t.Fatalf("policy spans %+v, want one refusing localRateLimit", pol)
	}
	for _, s := range []otlp.Span{root, pol[0]} {
		if v, _ := attr(s, otlp.AttrRateRefusedBy); !strings.HasPrefix(v.AsString(), "localRateLimit[0] of ") {
			t.Errorf("%s: refused_by %q", s.Name, v.AsString())
		}
		if v, _ := attr(s, otlp.AttrRateLimit); v.AsInt64() != 1 {
			t.Errorf("%s: limit %v, want 1", s.Name, v.Emit())
		}
		if v, ok := attr(s, otlp.AttrRateRemaining); !ok || v.AsInt64() != 0 {
			t.Errorf("%s: remaining %v, want 0", s.Name, v.Emit())
		}
	}
	if v, _ := attr(root, otlp.AttrCauseKind); v.AsString() != "rateLimit" {
		t.Errorf("cause %q, want rateLimit", v.AsString())
	}
	if v, _ := attr(root, otlp.AttrVerdict); !strings.Contains(v.AsString(), "429") {
		t.Errorf("verdict %q does not name the 429", v.AsString())
	}
}

// TestTreeOfAGlobalRefusal: a global limit's refusal puts the refusing
// descriptor (the service's OVER_LIMIT, not the first one sent) on the
// policy's span and the request's: its limit, what is left, when it
// resets, and the descriptor's entries.
func TestTreeOfAGlobalRefusal(t *testing.T) {
	var evs []trace.Event
	for i, m := range []string{
		`{"type":"requestStarted"}`,
		`{"type":"routeSelection","selectedRoute":"default/default/bind/3000/listener0/default/api"}`,
		`{"type":"policy","kind":"remoteRateLimit","result":{"type":"apply","details":"refused by the rate limit service","decision":"refused",` +
			`"service":"127.0.0.1:8081","domain":"d","from":"route default/api","failureMode":"failOpen","descriptors":[` +
			`{"entries":{"route":"api"},"type":"requests","code":"OK","limit":100,"unit":"day","remaining":99,"resetSeconds":600},` +
			`{"entries":{"user":"alice"},"type":"requests","code":"OVER_LIMIT","limit":2,"unit":"day","remaining":0,"resetSeconds":86399}]}}`,
		`{"type":"requestFinished","status":429,"cause":{"kind":"rateLimit","reason":"refused","policy":"remoteRateLimit"}}`,
	} {
		e, err := trace.Parse([]byte(`{"eventStart":null,"eventEnd":` + strconv.Itoa(i+1) + `,"severity":"info","message":` + m + `}`))
		if err != nil {
			t.Fatal(err)
		}
		if err := trace.StrictReasons(e); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	spans := otlp.Tree(evs)
	pol := named(spans, otlp.NamePolicyPrefix+"remoteRateLimit")
	if len(pol) != 1 || !pol[0].Error {
		t.Fatalf("policy spans %+v, want one refusing remoteRateLimit", pol)
	}
	for _, s := range []otlp.Span{spans[0], pol[0]} {
		for key, want := range map[string]string{otlp.AttrRateDecision: "refused", otlp.AttrRateLimit: "2", otlp.AttrRateRemaining: "0",
			otlp.AttrRateReset: "86399", otlp.AttrRateRefusedBy: `remoteRateLimit {"user":"alice"}`} {
			if v, _ := attr(s, key); v.Emit() != want {
				t.Errorf("%s: %s %q, want %q", s.Name, key, v.Emit(), want)
			}
		}
	}
}

func TestTreeOfABackendError(t *testing.T) {
	spans := otlp.Tree(traceOf(t, "../../traces/a-backend-transport-error-is-reported-in-backendcallresult.jsonl"))
	checkShape(t, spans)
	calls := named(spans, otlp.NameBackendCall)
	if len(calls) == 0 || !calls[len(calls)-1].Error {
		t.Fatalf("backend calls %+v, want the last an error", calls)
	}
	if !spans[0].Error {
		t.Error("a 5xx did not mark the request's span an error")
	}
}

// The real proxy's traces (agentgateway's docs; sse/testdata/agentgateway
// says where each is from) make trees too: a capture cut short, events
// gwdiag's proxy never sends (bodySnapshot, a backendCallResult that
// starts before its backendCallStart), no reasons.
func TestTreeOfRealTraces(t *testing.T) {
	files, _ := filepath.Glob("../sse/testdata/agentgateway/*.jsonl")
	if len(files) == 0 {
		t.Fatal("no real traces")
	}
	for _, f := range files {
		if strings.Contains(f, ".docs.") && strings.Contains(f, "standalone") {
			continue // their elided lines are not JSON
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			evs := traceOf(t, f)
			spans := otlp.Tree(evs)
			checkShape(t, spans)
		})
	}
	spans := otlp.Tree(traceOf(t, "../sse/testdata/agentgateway/k8s-latest.docs.jsonl"))
	calls := named(spans, otlp.NameBackendCall)
	if len(calls) != 1 || calls[0].Start != 153 || calls[0].End != 514 {
		t.Fatalf("backend call %+v, want [153, 514]", calls)
	}
	if v, _ := attr(calls[0], "server.address"); v.AsString() != "10.244.0.7" {
		t.Errorf("server.address %q", v.AsString())
	}
	if spans[0].Name != "GET httpbin/httpbin.00.http" {
		t.Errorf("request span %q", spans[0].Name)
	}
}

func TestTreeOfACutTrace(t *testing.T) {
	evs := traceOf(t, "../../traces/a-forwarded-request-traces-every-required-event-in-order.jsonl")
	var cut []trace.Event
	for _, e := range evs {
		if e.Type() == trace.BackendCallResult {
			break
		}
		cut = append(cut, e)
	}
	spans := otlp.Tree(cut)
	checkShape(t, spans)
	if v, _ := attr(spans[0], otlp.AttrComplete); v.AsBool() {
		t.Error("a trace without requestFinished is complete")
	}
	calls := named(spans, otlp.NameBackendCall)
	if len(calls) != 1 {
		t.Fatalf("a call under way: %d spans, want 1", len(calls))
	}
	if v, _ := attr(calls[0], "gateway.backend.unfinished"); !v.AsBool() {
		t.Error("the call under way is not marked unfinished")
	}
	if otlp.Tree(nil) != nil {
		t.Error("no events made a tree")
	}
}

func TestTraceparent(t *testing.T) {
	good := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc := otlp.ParseTraceparent(good)
	if !sc.IsValid() || !sc.IsRemote() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || !sc.IsSampled() {
		t.Fatalf("ParseTraceparent(%q) = %+v", good, sc)
	}
	for _, bad := range []string{"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
		"0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"} {
		if otlp.ParseTraceparent(bad).IsValid() {
			t.Errorf("ParseTraceparent(%q) is valid", bad)
		}
	}
	// A later version's extra fields are allowed.
	if !otlp.ParseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what").IsValid() {
		t.Error("a version 01 traceparent with a fifth field is refused")
	}
	ids := otlp.NewIDs(sc)
	if ids.Trace != sc.TraceID() || ids.Parent != sc.SpanID() || !ids.Root.IsValid() || !ids.Backend.IsValid() {
		t.Errorf("NewIDs(parent) = %+v", ids)
	}
	tp := otlp.ParseTraceparent(ids.Traceparent())
	if tp.TraceID() != ids.Trace || tp.SpanID() != ids.Backend {
		t.Errorf("Traceparent %q does not name the trace and the backend span", ids.Traceparent())
	}
	if a, b := otlp.DerivedIDs([]byte("x")), otlp.DerivedIDs([]byte("x")); a != b || a == otlp.DerivedIDs([]byte("y")) {
		t.Error("DerivedIDs is not a function of its key")
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  otlp.Config
		want string
	}{
		{otlp.Config{}, "no OTLP endpoint"},
		{otlp.Config{Endpoint: "127.0.0.1:4317", Protocol: "thrift"}, `protocol "thrift"`},
		{otlp.Config{Endpoint: "ftp://127.0.0.1:4317"}, `scheme "ftp"`},
		{otlp.Config{Endpoint: "http://"}, "want a URL"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
		if _, err := otlp.New(c.cfg); err == nil {
			t.Errorf("New(%+v) took it", c.cfg)
		}
	}
}

func startReceiver(t *testing.T) *receiver.Receiver {
	t.Helper()
	r, err := receiver.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// The tree reaches a collector as it is: over gRPC and over HTTP, with
// its ids, parents, times, status and the exporter's headers.
func TestExportReachesACollector(t *testing.T) {
	r := startReceiver(t)
	evs := traceOf(t, "../../traces/a-rate-limited-request-traces-a-429-and-no-backend-call.jsonl")
	spans := otlp.Tree(evs)
	for _, c := range []struct{ proto, endpoint string }{{otlp.GRPC, r.GRPC}, {otlp.HTTP, r.HTTP}} {
		t.Run(c.proto, func(t *testing.T) {
			e, err := otlp.New(otlp.Config{Endpoint: c.endpoint, Protocol: c.proto, Service: "gwdiag-test",
				Headers: map[string]string{"x-collector-token": "planted-" + c.proto}})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Shutdown(context.Background())
			parent := otlp.ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e47" + map[string]string{otlp.GRPC: "36", otlp.HTTP: "37"}[c.proto] + "-00f067aa0ba902b7-01")
			ids := otlp.NewIDs(parent)
			start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
			if !e.Export(start, ids, spans) {
				t.Fatal("Export dropped the first tree")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := e.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := r.Wait(ctx, func(s []receiver.Span) bool { return len(receiver.Trace(s, ids.Trace.String())) == len(spans) })
			if err != nil {
				t.Fatal(err)
			}
			got = receiver.Trace(got, ids.Trace.String())
			byName := map[string]receiver.Span{}
			for _, s := range got {
				byName[s.Name] = s
			}
			root, ok := byName[spans[0].Name]
			if !ok {
				t.Fatalf("no span %q in %+v", spans[0].Name, got)
			}
			if root.SpanID != ids.Root.String() || root.ParentSpanID != parent.SpanID().String() || root.Kind != "SPAN_KIND_SERVER" || root.Service != "gwdiag-test" {
				t.Errorf("request span %+v: want id %s, parent %s, server, service gwdiag-test", root, ids.Root, parent.SpanID())
			}
			if !root.Start.Equal(start.Add(time.Duration(spans[0].Start)*time.Microsecond)) || !root.End.Equal(start.Add(time.Duration(spans[0].End)*time.Microsecond)) {
				t.Errorf("request span [%v, %v]", root.Start, root.End)
			}
			if root.Attrs["http.response.status_code"] != int64(429) {
				t.Errorf("status attribute %v", root.Attrs["http.response.status_code"])
			}
			pol := byName[otlp.NamePolicyPrefix+"localRateLimit"]
			if pol.ParentSpanID != root.SpanID || !pol.Error {
				t.Errorf("policy span %+v: want a child of the request, error", pol)
			}
			if len(root.Events) != len(spans[0].Events) {
				t.Errorf("request span events %d, want %d", len(root.Events), len(spans[0].Events))
			}
			var seen bool
			for _, h := range r.Headers() {
				seen = seen || h["x-collector-token"] == "planted-"+c.proto
			}
			if !seen {
				t.Errorf("the exporter's header never reached the collector: %v", r.Headers())
			}
		})
	}
}

// A collector that never answers fills the queue: Export drops and counts,
// and never waits.
func TestExportNeverBlocks(t *testing.T) {
	r := startReceiver(t)
	r.Stall()
	e, err := otlp.New(otlp.Config{Endpoint: r.GRPC, Queue: 4, Flush: time.Millisecond, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	spans := otlp.Tree(traceOf(t, "../../traces/a-forwarded-request-traces-every-required-event-in-order.jsonl"))
	ids := otlp.NewIDs(oteltrace.SpanContext{})
	// The batch processor holds 4096 spans and the queue 4 trees: past
	// them every tree is dropped, at once.
	const n = 5000
	for range n {
		e.Export(time.Now(), ids, spans)
	}
	if e.Dropped() == 0 {
		t.Fatalf("%d trees to a stalled collector, none dropped", n)
	}
	r.Unstall()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// A collector that is not there: spans are lost, counted as failed
// batches, and serving goes on.
func TestExportToNobody(t *testing.T) {
	r := startReceiver(t)
	dead := r.GRPC
	r.Close()
	e, err := otlp.New(otlp.Config{Endpoint: dead, Protocol: otlp.GRPC, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	spans := otlp.Tree(traceOf(t, "../../traces/a-forwarded-request-traces-every-required-event-in-order.jsonl"))
	if !e.Export(time.Now(), otlp.NewIDs(oteltrace.SpanContext{}), spans) {
		t.Fatal("the first tree was dropped")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Flush waits for the collector's answer: the failure is counted by
	// then (and not handed to the SDK's global error handler, a log line).
	if err := e.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n, msg := e.Failures(); n == 0 || msg == "" {
		t.Errorf("failures %d %q, want counted with the error", n, msg)
	}
	_ = e.Shutdown(ctx)
}
