package eventview

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
)

func ev(t *testing.T, js string) trace.Event {
	t.Helper()
	e, err := trace.Parse([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestLabelAndSummary(t *testing.T) {
	tests := []struct {
		name, event, label, summary string
	}{
		{"start", `{"message":{"type":"requestStarted"}}`, "Request Start", "request started"},
		{"request snapshot", `{"message":{"type":"requestSnapshot","stage":"initial request","requestState":{"request":{"method":"GET","pathAndQuery":"/get?a=1","path":"/get"}}}}`,
			"Snapshot", "initial request: GET /get?a=1"},
		{"response snapshot", `{"message":{"type":"responseSnapshot","stage":"final response","requestState":{"response":{"code":429}}}}`,
			"Snapshot", "final response: 429"},
		{"route", `{"message":{"type":"routeSelection","selectedRoute":"httpbin/httpbin.00.http","evaluatedRoutes":["a","b"]}}`,
			"Route", `selected "httpbin/httpbin.00.http" (2 evaluated)`},
		{"no route", `{"message":{"type":"routeSelection","selectedRoute":null,"evaluatedRoutes":["a"]}}`,
			"Route", "no route selected (1 evaluated)"},
		{"policies", `{"message":{"type":"policySelection","effectivePolicy":{"cors":{},"apiKey":{"x":1},"jwt":null}}}`,
			"Policies", "effective policies: apiKey, cors"},
		{"no policies", `{"message":{"type":"policySelection","effectivePolicy":{"cors":null}}}`,
			"Policies", "effective policies: none"},
		{"no policies in a phase (1.3)", `{"message":{"type":"policySelection","phase":"gateway","effectivePolicy":{}}}`,
			"Policies", "gateway effective policies: none"},
		{"phased policies (1.3)", `{"message":{"type":"policySelection","phase":"route","effectivePolicy":{"cors":{}}}}`,
			"Policies", "route effective policies: cors"},
		{"backend start", `{"message":{"type":"backendCallStart","target":"10.244.0.7:8080"}}`, "Backend Start", "target=10.244.0.7:8080"},
		{"backend result", `{"message":{"type":"backendCallResult","status":200,"error":null}}`, "Backend Result", "status=200"},
		{"backend error", `{"message":{"type":"backendCallResult","status":503,"error":"connection refused"}}`, "Backend Result", "status=503 error=connection refused"},
		{"done", `{"message":{"type":"requestFinished"}}`, "Request Done", "request finished"},
		{"done with status and error (1.4)", `{"message":{"type":"requestFinished","status":502,"error":"upstream reset"}}`, "Request Done", "request finished status=502 error=upstream reset"},
		{"body snapshot (1.3)", `{"message":{"type":"bodySnapshot","stage":"raw response","body":"e30="}}`, "Body Snapshot", "raw response body snapshot"},
		{"policy skipped", `{"message":{"type":"policy","kind":"jwt","result":{"type":"skip","reason":"no token"}}}`, "Policy", "jwt skipped: no token"},
		{"policy applied", `{"message":{"type":"policy","kind":"cors","result":{"type":"apply","details":{"allowOrigins":["*"]}}}}`, "Policy", `cors applied: {"allowOrigins":["*"]}`},
		{"policy event, string details", `{"message":{"type":"policyEvent","kind":"cors","details":"request has no Origin header"}}`, "Policy Event", "cors: request has no Origin header"},
		{"policy event, JSON details", `{"message":{"type":"policyEvent","kind":"localRateLimit","details":{"remaining":0}}}`, "Policy Event", `localRateLimit: {"remaining":0}`},
		{"cel", `{"message":{"type":"cel","expr":"request.path == '/'","result":true}}`, "CEL", "request.path == '/' = true"},
		{"cel error", `{"message":{"type":"cel","expr":"x.y","error":"no such key"}}`, "CEL", "x.y error: no such key"},
		{"trace sampling", `{"message":{"type":"traceSampling","decision":"sample (client)"}}`, "Tracing", "sample (client)"},
		{"authorization", `{"message":{"type":"authorizationResult","result":"allowed","rules":[{"name":"a","matched":true,"mode":"allow"},{"name":"b","matched":false,"mode":"deny"},{"name":"c","matched":true,"mode":"require"}]}}`,
			"Authz", "allowed (1 allow, 0 deny, 1 require matches)"},
		{"llm route", `{"message":{"type":"llmRouteResolved","provider":"openai","route":"completions"}}`, "LLM Route", "provider=openai route=completions"},
		{"llm request", `{"message":{"type":"llmRequestDetected","provider":"openai","inputFormat":"completions","upstreamRouteType":"responses","requestModel":"gpt-4o","streaming":true}}`,
			"LLM Request", "openai gpt-4o completions -> responses streaming"},
		{"llm request (1.3 nativeFormat)", `{"message":{"type":"llmRequestDetected","provider":"anthropic","inputFormat":"messages","nativeFormat":"messages","requestModel":"claude","streaming":false}}`,
			"LLM Request", "anthropic claude messages -> messages"},
		{"llm stream", `{"message":{"type":"llmStreamingTranslation","from":"messages","to":"completions"}}`, "LLM Stream", "from=messages to=completions"},
		{"agctl's free event", `{"message":{"type":"event","message":"hello"}}`, "Event", "hello"},
		{"scope of a nested call", `{"scope":["extAuthz","backend"],"message":{"type":"backendCallStart","target":"10.0.0.1:9000"}}`, "Backend Start", "extAuthz > backend: target=10.0.0.1:9000"},
		{"unknown type: its fields, sorted", `{"message":{"type":"somethingNew","b":2,"a":"x","n":null}}`, "somethingNew", "a=x b=2"},
		{"no type", `{"message":{"x":1}}`, "(no type)", "x=1"},
		{"summary cut at 120 characters", `{"message":{"type":"event","message":"` + strings.Repeat("é", 130) + `"}}`, "Event", strings.Repeat("é", 119) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ev(t, tt.event)
			if got := Label(e); got != tt.label {
				t.Errorf("Label = %q, want %q", got, tt.label)
			}
			if got := Summary(e); got != tt.summary {
				t.Errorf("Summary = %q, want %q", got, tt.summary)
			}
		})
	}
}

func TestDiff(t *testing.T) {
	prev := ev(t, `{"message":{"type":"requestSnapshot","stage":"gateway policies","requestState":{"request":{"method":"GET","headers":{"a":"1","gone":"x"}}}}}`)
	cur := ev(t, `{"message":{"type":"requestSnapshot","stage":"route policies","requestState":{"request":{"method":"POST","headers":{"a":"1","new":"y"}},"backend":{"name":"b"}}}}`)
	got := strings.Join(diff(prev, cur), "\n")
	want := strings.Join([]string{
		`+ backend.name: "b"`,
		`- request.headers.gone: "x"`,
		`+ request.headers.new: "y"`,
		`~ request.method: "GET" -> "POST"`,
	}, "\n")
	if got != want {
		t.Errorf("Diff:\ngot\n%s\nwant\n%s", got, want)
	}
	if d := diff(prev, prev); len(d) != 0 {
		t.Errorf("Diff of a snapshot with itself = %q, want none", d)
	}
}

func TestDiffText(t *testing.T) {
	events := []trace.Event{
		ev(t, `{"message":{"type":"requestStarted"}}`),
		ev(t, `{"message":{"type":"requestSnapshot","stage":"initial request","requestState":{"request":{"method":"GET"}}}}`),
		ev(t, `{"message":{"type":"routeSelection"}}`),
		ev(t, `{"message":{"type":"requestSnapshot","stage":"route policies","requestState":{"request":{"method":"GET"}}}}`),
	}
	tests := []struct {
		at   int
		want string
	}{
		{0, "no snapshot at or before this event"},
		{1, "initial request (requestSnapshot)\nfirst snapshot: nothing to compare with\n"},
		{2, "initial request (requestSnapshot)\nfirst snapshot: nothing to compare with\n"},
		{3, "route policies (requestSnapshot) vs initial request\nno changes\n"},
	}
	for _, tt := range tests {
		if got := DiffText(events, tt.at); got != tt.want {
			t.Errorf("DiffText at %d:\ngot  %q\nwant %q", tt.at, got, tt.want)
		}
	}
}

// TestRealTraces: every event the real proxy and agctl's tests produced
// (golden/trace/sse/testdata/agentgateway, sources in its README) gets a
// label and a non-empty summary; agctl's expectations hold.
func TestRealTraces(t *testing.T) {
	dir := "../../../golden/trace/sse/testdata/agentgateway/"
	files, err := filepath.Glob(dir + "*.*l")
	if err != nil || len(files) < 8 {
		t.Fatalf("real traces: %v, %v", files, err)
	}
	files = append(files, dir+"k8s-latest.DERIVED-sse-framing.sse")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			n := 0
			err := sse.ReadCaptureFile(f, nil, func(c sse.Captured) error {
				n++
				if Label(c.Event) == "" || Summary(c.Event) == "" {
					t.Errorf("line %d: label %q, summary %q; want both", c.Line, Label(c.Event), Summary(c.Event))
				}
				return nil
			})
			var ce *sse.CaptureError
			if err != nil && !errors.As(err, &ce) || n == 0 {
				t.Fatalf("%d events, %v", n, err)
			}
		})
	}
	for _, tt := range []struct{ file, label, summary string }{
		{"trace_test-policyEvent-cors.jsonl", "Policy Event", "cors: request has no Origin header"},
		{"trace_test-traceSampling.jsonl", "Tracing", "sample (client)"},
		{"trace_test-event-INFO-uppercase.jsonl", "Event", "hello"},
	} {
		var got []trace.Event
		if err := sse.ReadCaptureFile(dir+tt.file, nil, func(c sse.Captured) error { got = append(got, c.Event); return nil }); err != nil || len(got) != 1 {
			t.Fatalf("%s: %d events, %v", tt.file, len(got), err)
		}
		if l, s := Label(got[0]), Summary(got[0]); l != tt.label || s != tt.summary {
			t.Errorf("%s: got %q %q, want agctl's %q %q", tt.file, l, s, tt.label, tt.summary)
		}
	}
}
