package configdump

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEndpoints(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	u := func(v uint64) *uint64 { return &v }
	tests := []struct {
		name string
		doc  string
		want []EndpointStat
	}{
		{"service endpoints, active and rejected, named by the uid's last part",
			`{"services":[{"name":"echo","namespace":"default","endpoints":[{"active":{"//Pod/default/b":{"info":{"health":1,"request_latency":0.5,"total_requests":2}}},
			  "rejected":{"//Pod/default/a":{"info":{"health":0,"total_requests":1,"evictedUntil":"3s"}}}}]}]}`,
			[]EndpointStat{
				{Type: TypeService, Name: "echo", Namespace: "default", Endpoint: "a", Info: Info{TotalRequests: u(1), EvictedUntil: "3s"}},
				{Type: TypeService, Name: "echo", Namespace: "default", Endpoint: "b", Info: Info{Health: 1, RequestLatency: f(0.5), TotalRequests: u(2)}},
			}},
		{"AI providers, camelCase",
			`{"backends":[{"backend":{"ai":{"name":"openai","namespace":"default","target":{"providers":[{"active":{"backend":{"info":{"health":0.875,"requestLatency":1.5,"totalRequests":1}}}}]}}}}]}`,
			[]EndpointStat{{Type: TypeBackend, Name: "openai", Namespace: "default", Endpoint: "backend", Info: Info{Health: 0.875, RequestLatencyCamel: f(1.5), TotalRequestsCamel: u(1)}}}},
		{"a plain string target has no statistics",
			`{"backends":[{"backend":{"host":{"name":"h","namespace":"","target":"127.0.0.1:8000"}}}]}`, nil},
		{"refproxy's host endpoints",
			`{"backends":[{"backend":{"host":{"name":"h","namespace":"default","target":"127.0.0.1:8000","endpoints":[{"active":{"127.0.0.1:8000":{"info":{"health":1,"total_requests":0}}}}]}}}]}`,
			[]EndpointStat{{Type: TypeBackend, Name: "h", Namespace: "default", Endpoint: "127.0.0.1:8000", Info: Info{Health: 1, TotalRequests: u(0)}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Parse([]byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, d.Endpoints()); diff != "" {
				t.Errorf("endpoints (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInfoForms(t *testing.T) {
	snake, camel := 0.25, 0.5
	n, m := uint64(3), uint64(4)
	tests := []struct {
		name         string
		info         Info
		wantLatency  float64
		wantRequests uint64
	}{
		{"snake_case", Info{RequestLatency: &snake, TotalRequests: &n}, 0.25, 3},
		{"camelCase", Info{RequestLatencyCamel: &camel, TotalRequestsCamel: &m}, 0.5, 4},
		{"neither", Info{}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.info.Latency(); got != tt.wantLatency {
				t.Errorf("Latency() = %v, want %v", got, tt.wantLatency)
			}
			if got := tt.info.Requests(); got != tt.wantRequests {
				t.Errorf("Requests() = %v, want %v", got, tt.wantRequests)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"empty", "  \n", "empty document"},
		{"syntax, with its line", "{\n  \"binds\": [,]\n}", "line 2, column 13: invalid character ','"},
		{"wrong type, with its field", `{"backends": [{"backend": {"host": {"name": 7}}}]}`, "field backends.backend.name: want a string, got a JSON number"},
		{"YAML list", "- a\n", "want an object (binds, backends, services, policies, ...), got a list"},
		{"bad YAML", "a: [\n", "neither JSON nor YAML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(%q) error = %v, want one containing %q", tt.doc, err, tt.want)
			}
		})
	}
}

// TestGenericKeepsNumbers: a dump written out again keeps its numbers digit
// for digit, and fields the model does not name.
func TestGenericKeepsNumbers(t *testing.T) {
	g, err := Generic([]byte(`{"services":[],"extra":{"latency":0.30290916037250004,"big":18446744073709551615}}`))
	if err != nil {
		t.Fatal(err)
	}
	extra := g["extra"].(map[string]any)
	if got := extra["latency"]; got != any(jsonNumber("0.30290916037250004")) {
		t.Errorf("latency = %#v, want the number as written", got)
	}
	if got := extra["big"]; got != any(jsonNumber("18446744073709551615")) {
		t.Errorf("big = %#v, want the number as written", got)
	}
}

func jsonNumber(s string) json.Number { return json.Number(s) }
