package eventview

import (
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/refproxy/trace"
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
			"Policies", "no effective policies"},
		{"phased policies (1.3)", `{"message":{"type":"policySelection","phase":"route","effectivePolicy":{"cors":{}}}}`,
			"Policies", "route effective policies: cors"},
		{"backend start", `{"message":{"type":"backendCallStart","target":"10.244.0.7:8080"}}`, "Backend Start", "target=10.244.0.7:8080"},
		{"backend result", `{"message":{"type":"backendCallResult","status":200,"error":null}}`, "Backend Result", "status=200"},
		{"backend error", `{"message":{"type":"backendCallResult","status":503,"error":"connection refused"}}`, "Backend Result", "status=503 error=connection refused"},
		{"done", `{"message":{"type":"requestFinished"}}`, "Request Done", "request finished"},
		{"body snapshot (1.3)", `{"message":{"type":"bodySnapshot","stage":"raw response","body":"e30="}}`, "Body", "raw response"},
		{"unknown type", `{"message":{"type":"somethingNew"}}`, "somethingNew", ""},
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
	got := strings.Join(Diff(prev, cur), "\n")
	want := strings.Join([]string{
		`+ backend.name: "b"`,
		`- request.headers.gone: "x"`,
		`+ request.headers.new: "y"`,
		`~ request.method: "GET" -> "POST"`,
	}, "\n")
	if got != want {
		t.Errorf("Diff:\ngot\n%s\nwant\n%s", got, want)
	}
	if d := Diff(prev, prev); len(d) != 0 {
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
