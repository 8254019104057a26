package config

import (
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gwdiag/gwdiag/golden/trace/otlp"
	"github.com/gwdiag/gwdiag/refproxy/celexpr"
)

// Tracing is config.tracing, OpenTelemetry export as the reference's
// schema defines it (RawTracing): one span tree per sampled request, sent
// to an OTLP collector (golden/trace/otlp). fields (custom span
// attributes) is accepted and ignored.
type Tracing struct {
	// OTLPEndpoint is the collector: a URL (http://host:4317) or host:port.
	OTLPEndpoint OTLPEndpoint `yaml:"otlpEndpoint" json:"otlpEndpoint,omitempty"`
	// Headers go with every export; their values are secrets.
	Headers map[string]Secret `yaml:"headers" json:"headers,omitempty"`
	// OTLPProtocol is grpc (default) or http.
	OTLPProtocol OTLPProtocol `yaml:"otlpProtocol" json:"otlpProtocol,omitempty"`
	// RandomSampling decides for a request without a trace of its own
	// (no valid traceparent): default false.
	RandomSampling *Sampling `yaml:"randomSampling" json:"randomSampling,omitempty"`
	// ClientSampling decides for a request with one: default true.
	ClientSampling *Sampling `yaml:"clientSampling" json:"clientSampling,omitempty"`
	// Path is the OTLP/HTTP path (default /v1/traces).
	Path string `yaml:"path" json:"path,omitempty"`
}

func (*Tracing) decodeField(d *decoder, key, val *yaml.Node, path string, _ []string) (bool, error) {
	if key.Value == "fields" {
		if !unset(val) {
			d.ignore(path, "refproxy's spans have the attributes of docs/otlp.md")
		}
		return true, nil
	}
	return false, nil
}

// OTLP is the export's config for golden/trace/otlp.
func (t *Tracing) OTLP() otlp.Config {
	h := make(map[string]string, len(t.Headers))
	for k, v := range t.Headers {
		h[k] = string(v)
	}
	return otlp.Config{Endpoint: string(t.OTLPEndpoint), Protocol: string(t.OTLPProtocol), Path: t.Path, Headers: h, Service: "refproxy"}
}

// OTLPEndpoint is a collector's address, checked as the exporter reads it.
type OTLPEndpoint string

func (e *OTLPEndpoint) decodeYAML(d *decoder, n *yaml.Node, path string, segs []string) error {
	var s string
	if err := d.decode(n, refValue(&s), path, segs); err != nil {
		return err
	}
	if err := (otlp.Config{Endpoint: s}).Validate(); err != nil {
		return d.fail(n, path, "%v", err)
	}
	*e = OTLPEndpoint(s)
	return nil
}

// OTLPProtocol is grpc or http.
type OTLPProtocol string

func (p *OTLPProtocol) decodeYAML(d *decoder, n *yaml.Node, path string, segs []string) error {
	var s string
	if err := d.decode(n, refValue(&s), path, segs); err != nil {
		return err
	}
	if s != otlp.GRPC && s != otlp.HTTP {
		return d.fail(n, path, "want grpc or http, got %q", s)
	}
	*p = OTLPProtocol(s)
	return nil
}

// Sampling is the schema's StringBoolFloat: true or false, a share of
// requests from 0 to 1, or a CEL expression over the request yielding one
// of them (evaluated per request; an error samples nothing).
type Sampling struct {
	// Ratio is the share sampled, when Expr is empty.
	Ratio float64
	// Expr is the expression, as written.
	Expr string
}

// MarshalJSON writes the sampling as the config did: a number, or the
// expression.
func (s Sampling) MarshalJSON() ([]byte, error) {
	if s.Expr != "" {
		return []byte(strconv.Quote(s.Expr)), nil
	}
	return strconv.AppendFloat(nil, s.Ratio, 'g', -1, 64), nil
}

func (s *Sampling) decodeYAML(d *decoder, n *yaml.Node, path string, segs []string) error {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.ScalarNode {
		return d.fail(n, path, "want true, false, a number from 0 to 1 or an expression, got %s", kindName(n))
	}
	v := strings.TrimSpace(n.Value)
	if b, err := strconv.ParseBool(v); err == nil && (n.Tag == "!!bool" || n.Tag == "!!str") {
		*s = Sampling{}
		if b {
			s.Ratio = 1
		}
		return nil
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f < 0 || f > 1 {
			return d.fail(n, path, "want a share of requests from 0 to 1, got %s", v)
		}
		*s = Sampling{Ratio: f}
		return nil
	}
	if n.Tag != "!!str" {
		return d.fail(n, path, "want true, false, a number from 0 to 1 or an expression, got %q", v)
	}
	if _, err := celexpr.CompileRequest(v, celexpr.Scalar); err != nil {
		return d.fail(n, path, "%v", err)
	}
	*s = Sampling{Expr: v}
	return nil
}
