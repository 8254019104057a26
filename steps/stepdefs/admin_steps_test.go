package stepdefs

import (
	"strings"
	"testing"
)

func TestReferenceBackends(t *testing.T) {
	tests := []struct {
		name, dump, wantErr string
	}{
		{"host backend", `{"backends":[{"backend":{"host":{"name":"b","namespace":"","target":"127.0.0.1:8000"}}}]}`, ""},
		{"ai backend", `{"backends":[{"backend":{"ai":{"name":"openai","target":{"providers":[]}}}}]}`, ""},
		{"an invented flat shape", `{"backends":[{"name":"httpbin","type":"Backend","endpoints":[]}]}`,
			`config_dump backends[0]: got 0 variants under "backend", want one (host, ai, ...)`},
		{"no target", `{"backends":[{"backend":{"host":{"name":"b"}}}]}`,
			`config_dump backends[0].backend.host: got name "b", target <nil>; want both`},
		{"no backends", `{"backends":[]}`, "config_dump backends: got none, want the configured backend"},
		{"not a dump", `{"backends":{}}`, "config_dump: line 1, column 13: field backends: want an array, got a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := referenceBackends([]byte(tt.dump))
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("got %v, want %q", err, tt.wantErr)
			}
		})
	}
}
