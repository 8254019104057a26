package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace/otlp/receiver"
)

// otelBenchConfig is benchConfig with config.tracing to endpoint, sampling
// every request without a trace of its own with probability sampling.
func otelBenchConfig(endpoint, sampling string) string {
	return "config:\n  tracing:\n    otlpEndpoint: " + endpoint + "\n    randomSampling: " + sampling + "\n" + benchConfig
}

// TestUnsampledCostsNothing: with config.tracing set and a request the
// sampling leaves out, the request path allocates what it allocates with
// tracing off (nothing, the backend a stub): the export costs a request
// it does not sample one header lookup.
func TestUnsampledCostsNothing(t *testing.T) {
	_, off := newBenchHandler(t, true)
	_, unsampled := newBenchHandlerFor(t, false, otelBenchConfig("127.0.0.1:1", "false"))
	e := newExchange()
	a := allocsPerRun(500, func() { e.serve(off) })
	b := allocsPerRun(500, func() { e.serve(unsampled) })
	if b > a {
		t.Errorf("allocs per unsampled request with config.tracing = %v, with tracing off = %v; want equal", b, a)
	}
}

// BenchmarkServeOTLP is the request path with config.tracing: not set,
// set but sampling nothing, sampling every request to a live collector,
// and to a collector that is gone (spans dropped and counted, never
// waited for). docs/benchmarks.md keeps the figures.
func BenchmarkServeOTLP(b *testing.B) {
	run := func(b *testing.B, cfg string, off bool) {
		_, h := newBenchHandlerFor(b, off, cfg)
		e := newExchange()
		b.ReportAllocs()
		for b.Loop() {
			e.serve(h)
		}
		if e.status != 200 {
			b.Fatalf("status %d", e.status)
		}
	}
	b.Run("tracing-off", func(b *testing.B) { run(b, benchConfig, true) })
	b.Run("no-config-tracing", func(b *testing.B) { run(b, benchConfig, false) })
	b.Run("sampling-0", func(b *testing.B) { run(b, otelBenchConfig("127.0.0.1:1", "0"), false) })
	b.Run("sampling-1", func(b *testing.B) {
		r, err := receiver.Start()
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		run(b, otelBenchConfig("http://"+r.GRPC, "1"), false)
	})
	b.Run("sampling-1-collector-gone", func(b *testing.B) {
		r, err := receiver.Start()
		if err != nil {
			b.Fatal(err)
		}
		dead := r.GRPC
		r.Close()
		run(b, otelBenchConfig("http://"+dead, "1"), false)
	})
}

// TestSampledRequestReachesTheCollector: the bench's sampled path is not
// measuring nothing: its requests reach the collector as spans.
func TestSampledRequestReachesTheCollector(t *testing.T) {
	r, err := receiver.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, h := newBenchHandlerFor(t, false, otelBenchConfig("http://"+r.GRPC, "1"))
	e := newExchange()
	e.serve(h)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	spans, err := r.Wait(ctx, func(s []receiver.Span) bool { return len(s) > 0 })
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "GET default/httpbin") {
		t.Errorf("spans %v, want the request's", names)
	}
}
