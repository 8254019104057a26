package bundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// File names in a bundle.
const (
	MetaFile       = "scenario.yaml"
	ExchangesFile  = "exchanges.har"
	ConfigDumpFile = "config_dump.json"
	ProxyLogFile   = "proxy.log"
	TracesDir      = "traces"
)

// Meta says what the scenario was, how it failed and in what run.
type Meta struct {
	Scenario string `yaml:"scenario"`
	Feature  string `yaml:"feature"`
	// FeatureFile is the scenario's feature file, copied into the bundle
	// under its base name: replay runs it from there.
	FeatureFile string `yaml:"featureFile"`
	Result      string `yaml:"result"`
	// Example is the line of the Examples row a Scenario Outline's
	// scenario was made from (0 for a plain scenario): the examples of
	// one outline share its name.
	Example int `yaml:"example,omitempty"`
	// Attempt is the attempt of a --repeat run (0 without it).
	Attempt    int    `yaml:"attempt,omitempty"`
	FailedStep string `yaml:"failedStep,omitempty"`
	Message    string `yaml:"message"`
	Steps      []Step `yaml:"steps"`

	Target         string `yaml:"target"`
	Implementation string `yaml:"implementation,omitempty"`
	Gwdiag         string `yaml:"gwdiag,omitempty"`
	FeatureSet     string `yaml:"featureSet,omitempty"`
	CommandLine    string `yaml:"commandLine,omitempty"`
	// Options are the run's options as the report writes them.
	Options  any       `yaml:"options,omitempty"`
	Started  time.Time `yaml:"started"`
	Duration string    `yaml:"duration"`
	// ProxyConfig names the config file the suite wrote for the proxy
	// ("" when the target keeps none).
	ProxyConfig string `yaml:"proxyConfig,omitempty"`
	// ConfigDumpError is why no config dump was taken at the failure.
	ConfigDumpError string `yaml:"configDumpError,omitempty"`
	// Traces lists the trace streams' files, in the order opened.
	Traces []string `yaml:"traces,omitempty"`
	// Evidence lists the target's own evidence files (a cluster's
	// resources with their status, its pods' logs), and EvidenceError why
	// some could not be taken.
	Evidence      []string `yaml:"evidence,omitempty"`
	EvidenceError string   `yaml:"evidenceError,omitempty"`
}

// Step is one step of the scenario and how it ended: passed, failed,
// skipped (after the failure) or undefined.
type Step struct {
	Text   string `yaml:"text"`
	Status string `yaml:"status"`
}

// Bundle is the evidence of one failed scenario.
type Bundle struct {
	Meta Meta
	// Feature is the feature file's text.
	Feature []byte
	// ProxyConfig is the config the suite wrote for the proxy.
	ProxyConfig []byte
	// ConfigDump is the admin server's /config_dump at the failure.
	ConfigDump []byte
	ProxyLog   string
	Exchanges  []Exchange
	// Files are more evidence the target keeps (a cluster's resources and
	// pod logs), by relative name; written as text, redacted.
	Files map[string][]byte
}

// Redactor scrubs what a bundle writes of credentials: a header's value,
// free text, a trace stream (SSE or JSON Lines) as it came, and a config
// dump (the credentials its config holds).
type Redactor interface {
	Header(name, value string) string
	Text(s string) string
	Capture(b []byte) []byte
	Config(b []byte) []byte
}

// Dir is the folder of a scenario's bundle under root: the feature, then
// the scenario's name made a file name (and the attempt of a repeated
// run), so that a person finds it from the report.
func Dir(root, feature, scenario string, example, attempt int) string {
	name := fileSafe(scenario)
	if example > 0 {
		name += fmt.Sprintf("-line-%d", example)
	}
	if attempt > 0 {
		name += fmt.Sprintf("-attempt-%d", attempt)
	}
	return filepath.Join(root, fileSafe(feature), name)
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._+-]+`)

func fileSafe(s string) string {
	s = strings.Trim(unsafeChars.ReplaceAllString(strings.ToLower(s), "-"), "-.")
	if len(s) > 80 {
		s = strings.TrimRight(s[:80], "-.")
	}
	return s
}

// Write writes b into dir (made, and emptied of an earlier bundle's
// files), every byte through r.
func Write(dir string, b *Bundle, r Redactor) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, TracesDir), 0o755); err != nil {
		return err
	}
	m := b.Meta
	m.Message, m.FailedStep = r.Text(m.Message), r.Text(m.FailedStep)
	m.CommandLine = r.Text(m.CommandLine)
	for i := range m.Steps {
		m.Steps[i].Text = r.Text(m.Steps[i].Text)
	}
	files := map[string][]byte{}
	if len(b.Feature) > 0 {
		m.FeatureFile = filepath.Base(m.FeatureFile)
		files[m.FeatureFile] = b.Feature
	}
	if len(b.ProxyConfig) > 0 {
		if m.ProxyConfig == "" {
			m.ProxyConfig = "config.yaml"
		}
		files["proxy-"+m.ProxyConfig] = []byte(r.Text(string(b.ProxyConfig)))
		m.ProxyConfig = "proxy-" + m.ProxyConfig
	}
	if len(b.ConfigDump) > 0 {
		files[ConfigDumpFile] = r.Config(b.ConfigDump)
	}
	if b.ProxyLog != "" {
		files[ProxyLogFile] = []byte(r.Text(b.ProxyLog))
	}
	for name, body := range b.Files {
		if !filepath.IsLocal(name) || files[name] != nil {
			return fmt.Errorf("bundle: the target's evidence file %q is not a new name inside the bundle", name)
		}
		files[name] = []byte(r.Text(string(body)))
		m.Evidence = append(m.Evidence, name)
	}
	sort.Strings(m.Evidence)
	for i, e := range b.Exchanges {
		if !isTrace(e.URL) {
			continue
		}
		name := filepath.Join(TracesDir, fmt.Sprintf("%02d-%s.sse", i+1, traceName(e.URL)))
		m.Traces = append(m.Traces, name)
		files[name] = r.Capture(e.ResponseBody)
	}
	har, err := harOf(b.Exchanges, r, m.Gwdiag)
	if err != nil {
		return err
	}
	files[ExchangesFile] = har
	var meta bytes.Buffer
	enc := yaml.NewEncoder(&meta)
	enc.SetIndent(2)
	if err := enc.Encode(m); err != nil {
		return err
	}
	files[MetaFile] = meta.Bytes()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, n)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, n), files[n], 0o644); err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
	}
	return nil
}

// isTrace: the exchange opened a /debug/trace stream.
func isTrace(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && strings.HasSuffix(u.Path, "/debug/trace")
}

// traceName: "trace", or "follow" for a follow stream.
func traceName(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil && u.Query().Has("follow") {
		return "follow"
	}
	return "trace"
}

// Read reads the bundle in dir (what replay needs: the meta, the feature
// file, the proxy config and the traces; not the exchanges).
func Read(dir string) (*Bundle, []TraceFile, error) {
	raw, err := os.ReadFile(filepath.Join(dir, MetaFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("%s is not a gwdiag failure bundle: no %s in it", dir, MetaFile)
		}
		return nil, nil, err
	}
	b := &Bundle{}
	if err := yaml.Unmarshal(raw, &b.Meta); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", filepath.Join(dir, MetaFile), err)
	}
	if b.Meta.Scenario == "" || b.Meta.FeatureFile == "" {
		return nil, nil, fmt.Errorf("%s: no scenario or feature file named", filepath.Join(dir, MetaFile))
	}
	if b.Feature, err = os.ReadFile(filepath.Join(dir, filepath.Base(b.Meta.FeatureFile))); err != nil {
		return nil, nil, fmt.Errorf("bundle %s: %w", dir, err)
	}
	if b.Meta.ProxyConfig != "" {
		b.ProxyConfig, _ = os.ReadFile(filepath.Join(dir, filepath.Base(b.Meta.ProxyConfig)))
	}
	var traces []TraceFile
	for _, t := range b.Meta.Traces {
		if !filepath.IsLocal(t) {
			return nil, nil, fmt.Errorf("%s: trace file %q is outside the bundle", filepath.Join(dir, MetaFile), t)
		}
		data, err := os.ReadFile(filepath.Join(dir, t))
		if err != nil {
			return nil, nil, fmt.Errorf("bundle %s: %w", dir, err)
		}
		traces = append(traces, TraceFile{Name: t, Data: data})
	}
	return b, traces, nil
}

// TraceFile is one trace stream of a bundle, as written.
type TraceFile struct {
	Name string
	Data []byte
}

// harOf renders the exchanges as a HAR 1.2 log (http://www.softwareishard.com/blog/har-12-spec/).
func harOf(ex []Exchange, r Redactor, version string) ([]byte, error) {
	type nv struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	headers := func(h map[string][]string) []nv {
		out := []nv{}
		keys := make([]string, 0, len(h))
		for k := range h {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			for _, v := range h[k] {
				out = append(out, nv{k, r.Header(k, v)})
			}
		}
		return out
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	entries := []map[string]any{}
	for _, e := range ex {
		query := []nv{}
		if u, err := url.Parse(e.URL); err == nil {
			for k, vs := range u.Query() {
				for _, v := range vs {
					query = append(query, nv{k, r.Text(v)})
				}
			}
			slices.SortFunc(query, func(a, b nv) int { return strings.Compare(a.Name+a.Value, b.Name+b.Value) })
		}
		req := map[string]any{"method": e.Method, "url": r.Text(e.URL), "httpVersion": "HTTP/1.1",
			"headers": headers(e.RequestHeader), "queryString": query, "cookies": []any{}, "headersSize": -1, "bodySize": len(e.RequestBody)}
		if len(e.RequestBody) > 0 {
			req["postData"] = map[string]any{"mimeType": e.RequestHeader.Get("Content-Type"), "text": r.Text(string(e.RequestBody))}
		}
		body := string(e.ResponseBody)
		if isTrace(e.URL) {
			body = string(r.Capture(e.ResponseBody))
		} else {
			body = r.Text(body)
		}
		content := map[string]any{"size": len(e.ResponseBody), "mimeType": e.ResponseHeader.Get("Content-Type"), "text": body}
		if e.Cut {
			content["comment"] = fmt.Sprintf("cut at gwdiag's bound (%d bytes a body, %d a bundle)", maxBody, maxTotal)
		}
		proto := e.Proto
		if proto == "" {
			proto = "HTTP/1.1"
		}
		resp := map[string]any{"status": e.Status, "statusText": http.StatusText(e.Status), "httpVersion": proto,
			"headers": headers(e.ResponseHeader), "cookies": []any{}, "content": content, "redirectURL": "",
			"headersSize": -1, "bodySize": len(e.ResponseBody)}
		receive := time.Duration(0)
		if !e.Ended.IsZero() {
			receive = e.Ended.Sub(e.Started) - e.Wait
		}
		entry := map[string]any{"startedDateTime": e.Started.UTC().Format(time.RFC3339Nano), "time": ms(e.Wait + receive),
			"request": req, "response": resp, "cache": map[string]any{},
			"timings": map[string]any{"send": 0, "wait": ms(e.Wait), "receive": ms(receive)}}
		if e.Err != "" {
			entry["comment"] = r.Text(e.Err)
		}
		entries = append(entries, entry)
	}
	doc := map[string]any{"log": map[string]any{"version": "1.2",
		"creator": map[string]any{"name": "gwdiag", "version": version}, "entries": entries}}
	out, err := json.MarshalIndent(doc, "", "  ")
	return append(out, '\n'), err
}
