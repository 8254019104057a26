package config

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTracingSampling: the schema's StringBoolFloat, each form.
func TestTracingSampling(t *testing.T) {
	for _, c := range []struct {
		v     string
		ratio float64
		expr  string
	}{
		{"true", 1, ""}, {"false", 0, ""}, {"0.25", 0.25, ""}, {"1", 1, ""}, {"0", 0, ""},
		{`"0.5"`, 0.5, ""}, {`"true"`, 1, ""},
		{`'request.headers["x-sample"] == "yes"'`, 0, `request.headers["x-sample"] == "yes"`},
		{`'random() < 0.1'`, 0, "random() < 0.1"},
	} {
		cfg, err := Parse("t.yaml", []byte("config:\n  tracing:\n    otlpEndpoint: collector:4317\n    randomSampling: "+c.v+"\n"))
		if err != nil {
			t.Errorf("%s: %v", c.v, err)
			continue
		}
		s := cfg.Config.Tracing.RandomSampling
		if s == nil || s.Ratio != c.ratio || s.Expr != c.expr {
			t.Errorf("%s: %+v, want ratio %v expr %q", c.v, s, c.ratio, c.expr)
		}
	}
}

// TestTracingHeadersAreSecrets: a collector's token never shows where the
// config is shown.
func TestTracingHeadersAreSecrets(t *testing.T) {
	cfg, err := Parse("t.yaml", []byte("config:\n  tracing:\n    otlpEndpoint: http://collector:4318\n    otlpProtocol: http\n    headers: {authorization: Bearer planted-otlp-token}\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(cfg)
	if strings.Contains(string(b), "planted-otlp-token") {
		t.Errorf("the config as JSON shows the token: %s", b)
	}
	if oc := cfg.Config.Tracing.OTLP(); oc.Headers["authorization"] != "Bearer planted-otlp-token" || oc.Protocol != "http" || oc.Service != "refproxy" {
		t.Errorf("export config %+v", oc)
	}
}
