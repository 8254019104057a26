package scrub

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/redact"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
)

// flags parses args as a command's redaction flags.
func flags(t *testing.T, args ...string) *Flags {
	t.Helper()
	var f Flags
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	f.Add(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &f
}

func TestFlags(t *testing.T) {
	const ev = `{"message":{"headers":{"authorization":"Bearer sk-secret-123","x-mine":"mine-secret","accept":"*/*"}}}`
	h, _ := trace.ParseHeader([]byte(ev))
	for _, tt := range []struct {
		name     string
		args     []string
		warn     bool
		redacted []string // values gone
		kept     []string // values left
	}{
		{"default: the default headers", nil, false, []string{"sk-secret-123"}, []string{"mine-secret"}},
		{"and one more", []string{"--redact-header", "X-Mine"}, false, []string{"sk-secret-123", "mine-secret"}, nil},
		{"off: nothing, with a warning", []string{"--redact=false"}, true, nil, []string{"sk-secret-123", "mine-secret"}},
		{"off but one: only that one", []string{"--redact=false", "--redact-header", "x-mine"}, true, []string{"mine-secret"}, []string{"sk-secret-123"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			f := flags(t, tt.args...)
			if err := f.Check(); err != nil {
				t.Fatal(err)
			}
			out, _ := f.Scrubber(&stderr).Events().Raw([]byte(ev), h)
			if got := stderr.String(); (got == warning+"\n") != tt.warn || tt.warn == false && got != "" {
				t.Errorf("stderr %q, warning wanted: %v", got, tt.warn)
			}
			for _, v := range tt.redacted {
				if strings.Contains(string(out), v) {
					t.Errorf("%s left in %s", v, out)
				}
			}
			for _, v := range tt.kept {
				if !strings.Contains(string(out), v) {
					t.Errorf("%s redacted in %s", v, out)
				}
			}
		})
	}
	if err := flags(t, "--redact-header", "x y").Check(); err == nil || !strings.Contains(err.Error(), `--redact-header "x y"`) {
		t.Errorf("a bad header name: %v", err)
	}
}

// TestKey: the fingerprints follow GWDIAG_REDACT_KEY, else differ from
// process to process.
func TestKey(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == KeyEnv {
				return v
			}
			return ""
		}
	}
	if got := string(keyFrom(env("a fixed key"))); got != "a fixed key" {
		t.Errorf("key %q, want the variable's", got)
	}
	if a, b := keyFrom(env("")), keyFrom(env("")); bytes.Equal(a, b) || len(a) != 32 {
		t.Errorf("random keys %x and %x: want 32 bytes, different", a, b)
	}
	a := redact.New(redact.Options{Key: keyFrom(env("k"))}).MarkerOf("sk-1")
	if b := redact.New(redact.Options{Key: []byte("k")}).MarkerOf("sk-1"); a != b {
		t.Errorf("markers %s and %s under one key", a, b)
	}
}

// TestRunSecrets: the injected request's credentials are scrubbed from
// every event and text, wherever they show; what holds none is left byte
// for byte.
func TestRunSecrets(t *testing.T) {
	s := newScrubber(redact.New(redact.Options{Key: []byte("k")}))
	s.AddHeader("Authorization", "Bearer sk-run-secret")
	s.AddHeader("Accept", "text/plain") // no secret
	s.AddSecret("pw-of-the-run")
	m := s.Redactor().MarkerOf
	if got, want := s.Text("curl: (22) refused sk-run-secret; pw-of-the-run; text/plain"), "curl: (22) refused "+m("sk-run-secret")+"; "+m("pw-of-the-run")+"; text/plain"; got != want {
		t.Errorf("Text\n got  %s\n want %s", got, want)
	}
	e := s.Events()
	ev := []byte(`{"requestId":"other","message":{"type":"policy","reason":"bucket sk-run-secret"}}`)
	h, _ := trace.ParseHeader(ev)
	out, changed := e.Raw(ev, h)
	if want := `{"requestId":"other","message":{"type":"policy","reason":"bucket ` + m("sk-run-secret") + `"}}`; !changed || string(out) != want {
		t.Errorf("Raw\n got  %s\n want %s", out, want)
	}
	plain := []byte(`{"message":{"type":"requestStarted"}}`)
	if out, changed := e.Raw(plain, trace.Header{}); changed || &out[0] != &plain[0] {
		t.Errorf("nothing to redact: want raw itself, got %s", out)
	}
	c := sse.Captured{Raw: bytes.Clone(ev)}
	c.Event, _ = trace.Parse(c.Raw)
	e.Captured(&c)
	if strings.Contains(string(c.Raw), "sk-run-secret") || strings.Contains(c.Event.Message["reason"].(string), "sk-run-secret") || c.Event.RequestID != "other" {
		t.Errorf("Captured: %s, %v", c.Raw, c.Event)
	}
}

// TestError: an error's message is redacted, its exit status kept.
func TestError(t *testing.T) {
	s := newScrubber(redact.New(redact.Options{}))
	s.AddSecret("pw-of-the-run")
	err := s.Error(exitcode.Usage(errors.New("curl said: > Authorization: Basic dXNlcjpwYXNz; pw-of-the-run")))
	if strings.Contains(err.Error(), "dXNlcjpwYXNz") || strings.Contains(err.Error(), "pw-of-the-run") || exitcode.Code(err) != 2 {
		t.Errorf("error %q, exit %d", err, exitcode.Code(err))
	}
	plain := errors.New("nothing")
	if s.Error(plain) != plain {
		t.Error("an error with nothing to redact: want it as it is")
	}
	var nilScrubber *Scrubber
	if nilScrubber.Error(plain) != plain || nilScrubber.Text("x") != "x" || nilScrubber.Events() != nil {
		t.Error("a nil Scrubber redacts nothing")
	}
}

// TestDocsListDefaults: docs/redaction.md lists every header and query
// parameter redacted by default with its reason, as redact.Defaults and
// QueryDefaults have them, and no other.
func TestDocsListDefaults(t *testing.T) {
	b, err := os.ReadFile("../../../docs/redaction.md")
	if err != nil {
		t.Fatal(err)
	}
	section, _, _ := strings.Cut(string(b), "## What a redacted value looks like")
	rows := 0
	for _, l := range strings.Split(section, "\n") {
		if strings.HasPrefix(l, "| `") {
			rows++
		}
	}
	all := append(slices.Clone(redact.Defaults), redact.QueryDefaults...)
	for _, f := range append(slices.Clone(redact.FieldDefaults), redact.KeyHolders...) {
		all = append(all, redact.Header{Name: f.Name, Why: f.Why})
	}
	for _, h := range all {
		if row := "| `" + h.Name + "` | " + h.Why + " |"; !strings.Contains(section, row) {
			t.Errorf("docs/redaction.md lacks the row\n%s", row)
		}
	}
	if rows != len(all) {
		t.Errorf("docs/redaction.md has %d header, query and field rows, redact.Defaults, QueryDefaults, FieldDefaults and KeyHolders %d", rows, len(all))
	}
}
