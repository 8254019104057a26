package proxy

import (
	"fmt"
	"net"
	"testing"

	"github.com/valyala/fasthttp"
)

// fasthttpStreamAllocs is what fasthttp's client allocates per response when
// it streams the body (HostClient.StreamResponseBody, which the proxy needs
// for large and streamed bodies): a clientStreamBody and three closures
// (fasthttp v1.74.0, client.go, transport.RoundTrip).
const fasthttpStreamAllocs = 4

// TestForwardAllocations counts what an untraced request allocates through a
// real backend connection (the proxy's HostClient to a fasthttp server on
// loopback), where TestNoWatcherCostsNothing stubs the backend out: the
// proxy's own code must add nothing to what the library allocates.
func TestForwardAllocations(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	backend := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("text/plain")
		ctx.SetBodyString("ok\n")
	}}
	go backend.Serve(ln) //nolint:errcheck // ends with Shutdown
	t.Cleanup(func() { _ = backend.Shutdown() })

	cfg := fmt.Sprintf(`
binds:
- port: 0
  listeners:
  - routes:
    - name: backend
      matches: [{path: {pathPrefix: /}}]
      backends: [{host: %q}]
`, ln.Addr().String())
	for _, off := range []bool{true, false} {
		_, h := newBenchHandlerWith(t, off, cfg, false)
		e := newExchange()
		e.serve(h) // dial the backend connection the runs reuse
		if e.status != 200 {
			t.Fatalf("tracing off %v: status %d through %s, want 200", off, e.status, ln.Addr())
		}
		allocs := testing.AllocsPerRun(500, func() { e.serve(h) })
		if e.status != 200 {
			t.Fatalf("tracing off %v: status %d through %s, want 200", off, e.status, ln.Addr())
		}
		t.Logf("tracing off %v: %v allocations per request through a real backend connection", off, allocs)
		if allocs > fasthttpStreamAllocs && !raceEnabled {
			t.Errorf("tracing off %v: %v allocations per request, want at most fasthttp's %d", off, allocs, fasthttpStreamAllocs)
		}
	}
}
