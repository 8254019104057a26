package proxy

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/refproxy/config"
)

// stubTransport answers every upstream call in process, so that allocation
// counts measure the proxy's own request path and nothing of the network.
type stubTransport struct{}

func (stubTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: 200, ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"text/plain"}},
		Body:    http.NoBody,
		Request: r,
	}, nil
}

// discardWriter is a reusable ResponseWriter.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Flush()                      {}

func newBenchHandler(tb testing.TB, tracingOff bool) (*Dataplane, http.Handler) {
	tb.Helper()
	cfg, err := config.Parse("bench.yaml", []byte(`
binds:
- port: 0
  listeners:
  - routes:
    - name: other
      matches: [{path: {exact: /other}}]
      backends: [{host: "127.0.0.1:1"}]
    - name: httpbin
      matches: [{path: {pathPrefix: /}}]
      backends: [{host: "127.0.0.1:1"}]
`))
	if err != nil {
		tb.Fatal(err)
	}
	dp := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	dp.tracingOff = tracingOff
	if err := dp.Apply(cfg); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { dp.Shutdown(tb.Context()) })
	for _, l := range dp.table.Load().binds[0].listeners {
		for _, rt := range l.routes {
			for _, be := range rt.backends {
				be.rp.Transport = stubTransport{}
				be.direct = stubTransport{}
			}
		}
	}
	return dp, &bindHandler{dp: dp, key: dp.table.Load().binds[0].key}
}

func benchRequest() *http.Request {
	r := httptest.NewRequest(http.MethodGet, "http://gw.example/get?x=1", nil)
	r.RemoteAddr = "127.0.0.1:40000"
	r.Header.Set("User-Agent", "bench")
	return r
}

func serveOnce(h http.Handler, w *discardWriter, r *http.Request) {
	clear(w.h)
	h.ServeHTTP(w, r)
}

// TestNoWatcherCostsNothing is the zero-cost guarantee: with nobody
// watching, a request allocates exactly what it allocates with tracing
// switched off entirely.
func TestNoWatcherCostsNothing(t *testing.T) {
	allocs := func(off bool) float64 {
		_, h := newBenchHandler(t, off)
		w, r := &discardWriter{h: http.Header{}}, benchRequest()
		return testing.AllocsPerRun(500, func() { serveOnce(h, w, r) })
	}
	off, idle := allocs(true), allocs(false)
	if idle > off {
		t.Errorf("allocs per request with no watcher = %v, with tracing off = %v; want equal", idle, off)
	}
	t.Logf("allocs per request: tracing off %v, no watcher %v", off, idle)
}

func BenchmarkServe(b *testing.B) {
	b.Run("tracing-off", func(b *testing.B) {
		_, h := newBenchHandler(b, true)
		w, r := &discardWriter{h: http.Header{}}, benchRequest()
		b.ReportAllocs()
		for b.Loop() {
			serveOnce(h, w, r)
		}
	})
	b.Run("no-watcher", func(b *testing.B) {
		_, h := newBenchHandler(b, false)
		w, r := &discardWriter{h: http.Header{}}, benchRequest()
		b.ReportAllocs()
		for b.Loop() {
			serveOnce(h, w, r)
		}
	})
	b.Run("watcher", func(b *testing.B) {
		dp, h := newBenchHandler(b, false)
		w, r := &discardWriter{h: http.Header{}}, benchRequest()
		b.ReportAllocs()
		for b.Loop() {
			wt := dp.reg.Watch(nil)
			serveOnce(h, w, r)
			evs, _, final := wt.Drain()
			if len(evs) != 11 || final == nil {
				b.Fatalf("traced %d events + final %v, want 11 + requestFinished", len(evs), final != nil)
			}
			wt.Cancel()
		}
	})
}

func TestRouteSelectionAllocatesNothing(t *testing.T) {
	dp, _ := newBenchHandler(t, true)
	bt := dp.table.Load().binds[0]
	r := benchRequest()
	var rt *route
	if n := testing.AllocsPerRun(100, func() { rt, _ = bt.selectRoute(r, false) }); n != 0 {
		t.Errorf("selectRoute allocates %v times per request, want 0", n)
	}
	if rt == nil || !strings.HasSuffix(rt.key, "/httpbin") {
		t.Errorf("selected %v, want httpbin", rt)
	}
}
