package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/otlp"
	"github.com/gwdiag/gwdiag/golden/trace/otlp/receiver"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
)

// otelConfig exports every request with x-sample: yes (randomSampling, an
// expression) and every request with a valid traceparent (clientSampling's
// default) to OTLP_ENDPOINT over OTLP_PROTOCOL; /limited allows three
// requests an hour.
const otelConfig = `
config:
  tracing:
    otlpEndpoint: OTLP_ENDPOINT
    otlpProtocol: OTLP_PROTOCOL
    headers:
      x-collector-token: planted-collector-token-7f3a
    randomSampling: 'request.headers["x-sample"] == "yes"'
binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: limited
      matches:
      - path:
          pathPrefix: /
      policies:
        localRateLimit:
        - maxTokens: 3
          tokensPerFill: 1
          fillInterval: 1h
      backends:
      - host: "{{.Echo}}"
`

const plantedBearer = "Bearer planted-otel-secret-0c9d"

// backendHeaders are the headers the echo backend saw, from its /headers
// answer.
func backendHeaders(t *testing.T, r reply) map[string]string {
	t.Helper()
	var body struct {
		Headers map[string]string `json:"headers"`
	}
	if err := json.Unmarshal([]byte(r.body), &body); err != nil {
		t.Fatalf("echo /headers answer %q: %v", r.body, err)
	}
	return body.Headers
}

// TestOTLPSpansAgreeWithTheDebugTrace: refproxy with config.tracing
// exports, for each sampled request, one trace whose spans say what its
// /debug/trace says (route, status, backend target, the refusing limit,
// times inside the request's span), continues a client's trace, tells its
// backend the backend call's span in traceparent, and exports neither the
// request's credentials nor the collector's token.
func TestOTLPSpansAgreeWithTheDebugTrace(t *testing.T) {
	for _, protocol := range []string{otlp.GRPC, otlp.HTTP} {
		t.Run(protocol, func(t *testing.T) {
			t.Parallel()
			rcv, err := receiver.Start()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(rcv.Close)
			endpoint := "http://" + rcv.GRPC
			if protocol == otlp.HTTP {
				endpoint = rcv.HTTP
			}
			e := start(t, strings.NewReplacer("OTLP_ENDPOINT", endpoint, "OTLP_PROTOCOL", protocol).Replace(otelConfig))
			stream, done := openFollow(t, e, "follow=true&max=4")
			defer done()

			client := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
			a := e.do(t, http.MethodGet, "/headers", "", "x-sample", "yes", "Authorization", plantedBearer)
			b := e.do(t, http.MethodGet, "/headers", "", "traceparent", client)
			c := e.do(t, http.MethodGet, "/headers", "")
			d := e.do(t, http.MethodGet, "/headers", "", "x-sample", "yes")
			for i, r := range []reply{a, b, c} {
				if r.status != http.StatusOK {
					t.Fatalf("request %d: %d %s", i, r.status, r.body)
				}
			}
			if d.status != http.StatusTooManyRequests {
				t.Fatalf("fourth request: %d, want 429", d.status)
			}
			tpA := otlp.ParseTraceparent(backendHeaders(t, a)["Traceparent"])
			tpB := otlp.ParseTraceparent(backendHeaders(t, b)["Traceparent"])
			if !tpA.IsValid() || !tpB.IsValid() {
				t.Fatalf("the backend of sampled requests got traceparent %q and %q", backendHeaders(t, a)["Traceparent"], backendHeaders(t, b)["Traceparent"])
			}
			if tpB.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || tpB.SpanID().String() == "b7ad6b7169203331" {
				t.Errorf("the client's trace reached the backend as %s: want its trace id, the proxy's span", backendHeaders(t, b)["Traceparent"])
			}
			if h, ok := backendHeaders(t, c)["Traceparent"]; ok {
				t.Errorf("an unsampled request's backend got traceparent %q", h)
			}

			// The debug traces of the same four requests.
			tr, err := sse.ReadTrace(stream)
			if err != nil {
				t.Fatal(err)
			}
			ids, traces := trace.ByRequest(tr.Events)
			if len(ids) != 4 {
				t.Fatalf("follow stream: %d traces, want 4", len(ids))
			}

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			roots := func(spans []receiver.Span) (n int) {
				for _, s := range spans {
					if s.Kind == "SPAN_KIND_SERVER" {
						n++
					}
				}
				return n
			}
			spans, err := rcv.Wait(ctx, func(s []receiver.Span) bool { return roots(s) >= 3 })
			if err != nil {
				t.Fatalf("spans of three sampled requests: %v", err)
			}
			if n := roots(spans); n != 3 {
				t.Errorf("%d request spans, want 3 (the unsampled request exported)", n)
			}
			check := func(name string, tp string, debug []trace.Event) []receiver.Span {
				t.Helper()
				var root receiver.Span
				for _, s := range spans {
					if s.Kind == "SPAN_KIND_SERVER" && (tp == "" && s.Attrs["http.response.status_code"] == int64(429) || tp != "" && s.TraceID == tp) {
						root = s
					}
				}
				if root.SpanID == "" {
					t.Fatalf("%s: no request span", name)
				}
				mine := receiver.Trace(spans, root.TraceID)
				want := otlp.Tree(debug)
				if len(mine) != len(want) {
					t.Errorf("%s: %d spans, the debug trace makes %d", name, len(mine), len(want))
				}
				fin := debug[len(debug)-1]
				if fin.Type() != trace.RequestFinished || root.Attrs["http.response.status_code"] != int64(fin.Message["status"].(float64)) {
					t.Errorf("%s: span status %v, debug trace's requestFinished %v", name, root.Attrs["http.response.status_code"], fin.Message)
				}
				for _, ev := range debug {
					if ev.Type() == trace.RouteSelection && root.Attrs["http.route"] != ev.Message["selectedRoute"] {
						t.Errorf("%s: span route %v, debug trace's %v", name, root.Attrs["http.route"], ev.Message["selectedRoute"])
					}
				}
				for _, s := range mine {
					if s.SpanID != root.SpanID && s.ParentSpanID != root.SpanID {
						t.Errorf("%s: span %q is not a child of the request's", name, s.Name)
					}
					if s.Start.Before(root.Start) || s.End.After(root.End) || s.End.Before(s.Start) {
						t.Errorf("%s: span %q [%v, %v] outside the request's [%v, %v]", name, s.Name, s.Start, s.End, root.Start, root.End)
					}
				}
				return mine
			}
			forwarded := func(name string, tp string) {
				t.Helper()
				var debug []trace.Event
				for _, id := range ids {
					if strings.Contains(fmt.Sprint(traces[id]), tp[3:35]) {
						debug = traces[id]
					}
				}
				if debug == nil {
					t.Fatalf("%s: no debug trace shows traceparent %s", name, tp)
				}
				mine := check(name, tp[3:35], debug)
				var call *receiver.Span
				for i := range mine {
					if mine[i].Name == otlp.NameBackendCall {
						call = &mine[i]
					}
				}
				if call == nil || call.SpanID != tp[36:52] {
					t.Fatalf("%s: backend call span %+v; the backend was told span %s", name, call, tp[36:52])
				}
				for _, ev := range debug {
					if ev.Type() == trace.BackendCallStart && call.Attrs[otlp.AttrBackendTarget] != ev.Message["target"] {
						t.Errorf("%s: backend target %v, debug trace's %v", name, call.Attrs[otlp.AttrBackendTarget], ev.Message["target"])
					}
				}
			}
			forwarded("sampled by the expression", backendHeaders(t, a)["Traceparent"])
			forwarded("a client's trace", backendHeaders(t, b)["Traceparent"])
			for _, s := range spans {
				if s.Kind == "SPAN_KIND_SERVER" && s.TraceID == tpB.TraceID().String() && s.ParentSpanID != "b7ad6b7169203331" {
					t.Errorf("the client's trace: request span's parent %s, want the client's span", s.ParentSpanID)
				}
			}
			var refusedDebug []trace.Event
			for _, id := range ids {
				if evs := traces[id]; evs[len(evs)-1].Message["status"] == float64(429) {
					refusedDebug = evs
				}
			}
			refused := check("the refusal", "", refusedDebug)
			var limitSpan *receiver.Span
			for i := range refused {
				if refused[i].Name == otlp.NamePolicyPrefix+"localRateLimit" {
					limitSpan = &refused[i]
				}
				if refused[i].Name == otlp.NameBackendCall {
					t.Error("the refusal has a backend call span")
				}
			}
			if limitSpan == nil || !limitSpan.Error || !strings.HasPrefix(fmt.Sprint(limitSpan.Attrs[otlp.AttrRateRefusedBy]), "localRateLimit[0] of ") || limitSpan.Attrs[otlp.AttrRateLimit] != int64(3) {
				t.Errorf("the refusing limit's span: %+v", limitSpan)
			}

			// No credential of the request, nor the collector's token, in
			// what was exported; the token reached the collector.
			all, _ := json.Marshal(spans)
			for _, secret := range []string{"planted-otel-secret-0c9d", "planted-collector-token-7f3a"} {
				if strings.Contains(string(all), secret) {
					t.Errorf("exported spans carry %q", secret)
				}
			}
			var token bool
			for _, h := range rcv.Headers() {
				token = token || h["x-collector-token"] == "planted-collector-token-7f3a"
			}
			if !token {
				t.Error("the collector never got config.tracing.headers")
			}
			resp, err := http.Get("http://" + e.proxy.AdminAddr() + "/config_dump")
			if err != nil {
				t.Fatal(err)
			}
			dump, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(dump), "planted-collector-token-7f3a") {
				t.Errorf("/config_dump shows the collector's token: %s", dump)
			}
			resp, err = http.Get("http://" + e.proxy.AdminAddr() + "/debug/otlp")
			if err != nil {
				t.Fatal(err)
			}
			var st struct {
				Enabled  bool   `json:"enabled"`
				Endpoint string `json:"endpoint"`
				Queued   uint64 `json:"queued"`
				Dropped  uint64 `json:"dropped"`
			}
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if err != nil || !st.Enabled || st.Endpoint != endpoint || st.Queued != 3 || st.Dropped != 0 {
				t.Errorf("/debug/otlp: %+v (%v), want enabled, %s, 3 queued, none dropped", st, err, endpoint)
			}
			shown, _ := json.Marshal(e.proxy.Config())
			if strings.Contains(string(shown), "planted-collector-token-7f3a") || !strings.Contains(string(shown), `"x-collector-token":"\u003credacted\u003e"`) {
				t.Errorf("the config as JSON shows the collector's token, or no headers: %s", shown)
			}
		})
	}
}

// TestOTLPCollectorGoneNeverSlowsServing: with the collector stalled (it
// takes exports and never answers) every request is served, past the
// export's queues too (the batch processor's 4096 spans, the exporter's
// 2048 requests: some 3,000 requests): what cannot be sent is dropped and
// counted. Then with the collector gone, the same.
func TestOTLPCollectorGoneNeverSlowsServing(t *testing.T) {
	t.Parallel()
	rcv, err := receiver.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rcv.Close)
	rcv.Stall()
	cfg := strings.NewReplacer("OTLP_ENDPOINT", "http://"+rcv.GRPC, "OTLP_PROTOCOL", otlp.GRPC, "maxTokens: 3", "maxTokens: 100000").Replace(otelConfig)
	e := start(t, cfg)
	// Requests go on until the export drops (the queues are full: the
	// collector takes nothing), at most 40000: a stalled export that
	// frees a batch every few seconds must not hide an unbounded queue.
	const workers, most = 8, 40000
	var sent atomic.Int64
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for sent.Add(1) <= most {
				if sent.Load()%256 == 0 && e.proxy.OTLPStatus().Dropped > 0 {
					break
				}
				r, err := e.try(http.MethodGet, "/headers", "", "x-sample", "yes")
				if err == nil && r.status != http.StatusOK {
					err = fmt.Errorf("status %d %s", r.status, r.body)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatalf("a request with the collector stalled: %v", err)
		}
	}
	if st := e.proxy.OTLPStatus(); st.Dropped == 0 || !st.Enabled || st.Queued == 0 {
		t.Errorf("%d sampled requests to a stalled collector: %+v; want some queued and some dropped (the export's queues are bounded)", sent.Load(), st)
	}
	rcv.Close()
	for i := range 50 {
		if r := e.do(t, http.MethodGet, "/headers", "", "x-sample", "yes"); r.status != http.StatusOK {
			t.Fatalf("request %d with the collector gone: %d %s", i, r.status, r.body)
		}
	}
}

// TestOTLPSpanCarriesTokenUsage: a chat completion through a token-limited
// LLM route exports its usage on the request's span, input and output
// apart (gen_ai.usage.*), and the tokens it charged, streamed or not; the
// request's span and its backend call (the LLM call) name the model the
// provider was asked for (the backend's own, replacing the client's) and
// the provider.
func TestOTLPSpanCarriesTokenUsage(t *testing.T) {
	t.Parallel()
	rcv, err := receiver.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rcv.Close)
	e := start(t, `
config:
  tracing:
    otlpEndpoint: http://`+rcv.GRPC+`
    randomSampling: true
binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: llm
      policies:
        localRateLimit:
        - {maxTokens: 100000, tokensPerFill: 100000, fillInterval: 1h, type: tokens}
      backends:
      - ai: {name: openai, provider: {openAI: {model: gpt-4o}}, hostOverride: "{{.LLM}}"}
`)
	for i, stream := range []bool{false, true} {
		if r := e.chat(t, stream, 7+i, 5); r.status != http.StatusOK {
			t.Fatalf("chat (stream %v): %d %s", stream, r.status, r.body)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spans, err := rcv.Wait(ctx, func(s []receiver.Span) bool {
		n := 0
		for _, sp := range s {
			if sp.Kind == "SPAN_KIND_SERVER" {
				n++
			}
		}
		return n == 2
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]int64{}
	for _, sp := range spans {
		if sp.Kind != "SPAN_KIND_SERVER" {
			continue
		}
		if sp.Attrs["gen_ai.request.model"] != "gpt-4o" || sp.Attrs["gen_ai.provider.name"] != "openai" {
			t.Errorf("request span %q: model %v, provider %v; want gpt-4o of openai", sp.Name, sp.Attrs["gen_ai.request.model"], sp.Attrs["gen_ai.provider.name"])
		}
		in, _ := sp.Attrs["gen_ai.usage.input_tokens"].(int64)
		out, _ := sp.Attrs["gen_ai.usage.output_tokens"].(int64)
		charged, _ := sp.Attrs[otlp.AttrTokens].(int64)
		if out != 5 || charged != in+out {
			t.Errorf("request span %q: input %d, output %d, charged %d; want output 5, charged their sum", sp.Name, in, out, charged)
		}
		got[in]++
	}
	if got[7] != 1 || got[8] != 1 {
		t.Errorf("input tokens of the two requests %v, want 7 and 8", got)
	}
	calls := 0
	for _, sp := range spans {
		if sp.Name == otlp.NameBackendCall && sp.Attrs["gen_ai.request.model"] == "gpt-4o" && sp.Attrs["gen_ai.operation.name"] == "chat" {
			calls++
		}
	}
	if calls != 2 {
		t.Errorf("%d backend call spans name the model, want 2", calls)
	}
}
