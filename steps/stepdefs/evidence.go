package stepdefs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace/redact"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/steps/bundle"
	"github.com/gwdiag/gwdiag/steps/targets"
)

// Collect gathers the evidence of the scenario of ctx before End tears it
// down: every HTTP exchange its steps made (Config.Record), the config the
// suite wrote for the proxy, and the proxy's config dump now, at the
// failure. The proxy's output comes with End (Ending.ProxyLogs). ok is
// false when ctx holds no scenario.
func Collect(ctx context.Context) (b bundle.Bundle, ok bool) {
	s := getState(ctx)
	if s == nil {
		return b, false
	}
	defer s.addSpans(&b)
	if s.recorder != nil {
		b.Exchanges = s.recorder.Exchanges()
	}
	if s.dep == nil {
		b.Files = s.configureEvidence
		b.Meta.ConfigDumpError = "no proxy was configured"
		return b, true
	}
	if ck, ok := s.dep.(targets.ConfigKeeper); ok {
		b.Meta.ProxyConfig, b.ProxyConfig = ck.ProxyConfig()
	}
	if ek, ok := s.dep.(targets.EvidenceKeeper); ok {
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
		files, err := ek.Evidence(ectx)
		cancel()
		b.Files = files
		if err != nil {
			b.Meta.EvidenceError = s.cfg.Secrets.Scrub(err.Error())
		}
	}
	if s.dep.AdminAddr() == "" {
		b.Meta.ConfigDumpError = "the target gives no admin address here (no data plane)"
		return b, true
	}
	dump, err := s.configDumpNow(context.WithoutCancel(ctx))
	if err != nil {
		b.Meta.ConfigDumpError = s.cfg.Secrets.Scrub(err.Error())
	}
	b.ConfigDump = dump
	return b, true
}

// SpansFile is the bundle's file of the spans the scenario's OTLP
// collector received (feature otlp-export), as JSON.
const SpansFile = "otlp-spans.json"

// maxBundledSpans bounds the spans a bundle keeps.
const maxBundledSpans = 2000

// addSpans adds what the scenario's collector received, if it has one.
func (s *state) addSpans(b *bundle.Bundle) {
	if s.otlp == nil {
		return
	}
	spans := s.otlp.Spans()
	if len(spans) > maxBundledSpans {
		spans = spans[:maxBundledSpans]
	}
	out, err := json.MarshalIndent(spans, "", "  ")
	if err != nil {
		return
	}
	if b.Files == nil {
		b.Files = map[string][]byte{}
	}
	b.Files[SpansFile] = out
}

// configDumpNow asks the proxy for its config dump, bounded in time and
// size, on a client of its own: the dump is evidence, not an exchange of
// the scenario's.
func (s *state) configDumpNow(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.dep.AdminAddr()+"/config_dump", nil)
	if err != nil {
		return nil, err
	}
	c := &http.Client{Transport: suiteTransport(s.cfg.Limits.Transport())}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("config dump at the failure: %w", err)
	}
	defer resp.Body.Close()
	body, err := sse.ReadBody(resp.Body, s.cfg.Limits.BodyBytes, "config dump")
	if err != nil {
		return body, fmt.Errorf("config dump at the failure: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("config dump at the failure: status %d", resp.StatusCode)
	}
	return body, nil
}

var _ bundle.Redactor = (*Secrets)(nil)

// Header implements bundle.Redactor: a credential header's value becomes
// its marker; any other has the run's credentials scrubbed.
func (x *Secrets) Header(name, value string) string {
	if x == nil {
		return value
	}
	if x.r.Sensitive(name) {
		x.Add(value)
		return x.r.Value(name, value)
	}
	return x.Scrub(value)
}

// Text implements bundle.Redactor: the values of credential headers quoted
// in s (curl -v, YAML, JSON a line at a time) and the run's credentials.
func (x *Secrets) Text(s string) string {
	if x == nil {
		return s
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.r.Text(s, &x.s)
}

// Capture implements bundle.Redactor: a trace stream or a JSON document,
// its events redacted as gwdiag redacts a capture, then scrubbed of the
// run's credentials.
func (x *Secrets) Capture(b []byte) []byte {
	if x == nil {
		return b
	}
	var out bytes.Buffer
	if _, err := redact.NewStream(x.r).Capture(&out, bytes.NewReader(b)); err != nil {
		// Not a capture (a config dump is one JSON document): as text.
		return []byte(x.Text(string(b)))
	}
	return []byte(x.Text(out.String()))
}

// Config implements bundle.Redactor: a config dump with the credentials
// its config holds redacted (those a proxy that does not redact shows:
// redact's AppendConfig), then scrubbed of the run's credentials; what is
// not JSON, as a capture.
func (x *Secrets) Config(b []byte) []byte {
	if x == nil {
		return b
	}
	if !json.Valid(b) {
		return x.Capture(b)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	out, _ := x.r.AppendConfig(nil, b)
	out, _ = x.r.AppendScrubbedJSON(nil, out, &x.s)
	return out
}
