package tracecmd

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace/otlp"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/refproxy/refproxytest"
	"github.com/gwdiag/gwdiag/steps/jaegersvc"
	"github.com/gwdiag/gwdiag/steps/mock"
)

// startJaeger runs Jaeger (make jaeger-bin builds it; a test run without
// it builds it here) until the test ends.
func startJaeger(t *testing.T) *jaegersvc.Jaeger {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	bin, err := jaegersvc.EnsureBinary(ctx, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	j, err := jaegersvc.Start(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Stop)
	return j
}

// jaegerID is a trace id as Jaeger's API writes it: leading zeros dropped.
func jaegerID(id string) string { return strings.TrimLeft(id, "0") }

// TestJaegerShowsTheTraces: in a real tracing backend (Jaeger, built from
// its Go module), a request through refproxy with config.tracing shows up
// as one trace, in the client's trace, with the spans its debug trace
// makes (each one, under the request's, at the debug trace's times); and the real proxy's capture sent by `gwdiag trace --otlp` shows
// up as its trace, at its own time.
func TestJaegerShowsTheTraces(t *testing.T) {
	j := startJaeger(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// refproxy, exporting to Jaeger.
	echo := mock.NewEcho()
	srv, err := mock.Listen("127.0.0.1:0", echo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	p := refproxytest.Start(t, `
config:
  tracing:
    otlpEndpoint: http://`+j.OTLP+`
binds:
- port: 0
  listeners:
  - routes:
    - name: echo
      backends:
      - host: "`+srv.Addr()+`"
`)
	// The request's debug trace too: a one-shot watcher, registered
	// (": ready") before the request.
	watch, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.AdminAddr()+"/debug/trace", nil)
	stream, err := http.DefaultClient.Do(watch)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	rd := sse.NewReader(stream.Body)
	if f, err := rd.Next(); err != nil || f.Comment != "ready" {
		t.Fatalf("trace stream: %+v %v, want : ready", f, err)
	}
	const client = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, _ := http.NewRequest(http.MethodGet, "http://"+p.BindAddrs()[0]+"/headers", nil)
	req.Header.Set("traceparent", "00-"+client+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	debug, err := sse.ReadTrace(rd)
	if err != nil {
		t.Fatal(err)
	}
	want := otlp.Tree(debug.Events)
	spans, err := j.WaitTrace(ctx, client, len(want), 30*time.Second)
	if err != nil {
		t.Fatalf("refproxy's trace in Jaeger: %v", err)
	}
	// Jaeger shows the tree the debug trace makes: the same spans, each
	// with its parent, at the same times relative to the request's.
	if len(spans) != len(want) {
		t.Errorf("Jaeger shows %d spans, the debug trace makes %d", len(spans), len(want))
	}
	byName := map[string]jaegersvc.Span{}
	for _, s := range spans {
		byName[s.Operation] = s
	}
	top := byName[want[0].Name]
	for _, w := range want {
		got, ok := byName[w.Name]
		switch {
		case !ok:
			t.Errorf("Jaeger has no span %q", w.Name)
		case w.Parent >= 0 && got.ParentSpanID != top.SpanID:
			t.Errorf("span %q in Jaeger is under %s, not the request's span", w.Name, got.ParentSpanID)
		case got.Start.Sub(top.Start) != time.Duration(w.Start-want[0].Start)*time.Microsecond || got.Duration != time.Duration(w.End-w.Start)*time.Microsecond:
			t.Errorf("span %q in Jaeger at +%v for %v, the debug trace's at +%dµs for %dµs", w.Name, got.Start.Sub(top.Start), got.Duration, w.Start-want[0].Start, w.End-w.Start)
		}
	}
	var root, call jaegersvc.Span
	for _, s := range spans {
		switch s.Operation {
		case "GET default/echo":
			root = s
		case otlp.NameBackendCall:
			call = s
		}
	}
	if root.SpanID == "" || root.Service != "refproxy" || root.ParentSpanID != "00f067aa0ba902b7" || root.Tags["http.response.status_code"] != float64(200) {
		t.Errorf("request span in Jaeger %+v: want GET default/echo of service refproxy, under the client's span, status 200", root)
	}
	if call.ParentSpanID != root.SpanID || call.Tags[otlp.AttrBackendTarget] != srv.Addr() {
		t.Errorf("backend call span in Jaeger %+v: want a child of the request's, to %s", call, srv.Addr())
	}

	// The real proxy's capture, sent by gwdiag.
	_, stderr, err := runTrace(t, "-f", realTraces+"k8s-latest.docs.jsonl", "--otlp", j.OTLP)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	m := regexp.MustCompile(`: trace ([0-9a-f]{32})`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("the summary names no trace id: %q", stderr)
	}
	spans, err = j.WaitTrace(ctx, jaegerID(m[1]), 3, 30*time.Second)
	if err != nil {
		t.Fatalf("the capture's trace in Jaeger: %v", err)
	}
	root = jaegersvc.Span{}
	for _, s := range spans {
		if s.Operation == "GET httpbin/httpbin.00.http" {
			root = s
		}
	}
	start := time.Date(2026, 5, 11, 16, 5, 22, 175838000, time.UTC)
	if root.Service != "gwdiag" || !root.Start.Equal(start.Add(time.Microsecond)) || root.Duration != 545*time.Microsecond {
		t.Errorf("the capture's request span in Jaeger %+v: want service gwdiag, at the capture's startTime, 545µs", root)
	}
}
