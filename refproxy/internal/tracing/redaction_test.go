package tracing

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/redact"
	"github.com/gwdiag/gwdiag/golden/trace/watch"
)

// TestContainsAtMatchesContains: the prefilter's search, from any anchor
// of the needle, finds what bytes.Contains finds, at every offset and at
// the edges of the data.
func TestContainsAtMatchesContains(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 2026))
	const alphabet = `ab"\:k`
	word := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return b
	}
	for range 20000 {
		data, needle := word(r.IntN(40)), word(1+r.IntN(6))
		if r.IntN(3) == 0 && len(data) >= len(needle) {
			at := r.IntN(len(data) - len(needle) + 1)
			copy(data[at:], needle)
		}
		want := bytes.Contains(data, needle)
		for anchor := range needle {
			if got := containsAt(data, needle, anchor); got != want {
				t.Fatalf("containsAt(%q, %q, %d) = %v, bytes.Contains says %v", data, needle, anchor, got, want)
			}
		}
	}
}

// TestPrefilterFindsEverySecret: a frame whose strings hold a secret (a
// long one inside any string, a short one as a whole string, a key
// too), written as the tracer writes strings (escapes, HTML escapes,
// invalid UTF-8), is never passed over by the prefilter; and the
// scrubbing pass then leaves no secret in it.
func TestPrefilterFindsEverySecret(t *testing.T) {
	secrets := []string{
		"sk-0123456789", "abc", "a", `q"uo\te<d>&8`, "tab\there-long", "bad\xffutf8-long", "ünïcode-key", "\u2028sep-long",
		"dark", "0", "Bearer sk-0123456789", "x-api-key",
	}
	red := NewRedaction(redact.New(redact.Options{Key: []byte("k"), EscapeHTML: true}), false)
	for _, s := range secrets {
		for _, shape := range []string{"whole", "inside", "key"} {
			if shape == "inside" && len(s) < redact.MinSubstring {
				continue
			}
			tr := &Tracer{red: red}
			tr.AddSecret(s)
			var data []byte
			switch shape {
			case "whole":
				data = appendString([]byte(`{"a":"b","reason":`), s)
			case "inside":
				data = appendString([]byte(`{"a":"b","reason":`), "key "+s+" refused")
			case "key":
				data = appendString([]byte(`{"a":"b",`), s)
				data = append(data, `:1`...)
			}
			data = append(data, '}')
			if !tr.mayHoldSecret(data) {
				t.Errorf("secret %q (%s): the prefilter passes over %s", s, shape, data)
			}
			fs := &Frames{}
			fs.b = append(append(fs.b, "data: "...), data...)
			fs.b = append(fs.b, "\n\n"...)
			fs.end()
			tr.scrubFrame(fs, 0, false)
			out := string(fs.Frame(0))
			if strings.Contains(out, string(appendString(nil, s)[1:len(appendString(nil, s))-1])) && s != "a" && s != "0" {
				t.Errorf("secret %q (%s): left in %s", s, shape, out)
			}
			if !strings.Contains(out, `\u003credacted:`) {
				t.Errorf("secret %q (%s): no marker in %s", s, shape, out)
			}
		}
	}
	// A frame without the secret: passed over.
	tr := &Tracer{red: red}
	tr.AddSecret("sk-0123456789")
	tr.AddSecret("dark")
	if tr.mayHoldSecret([]byte(`{"a":"darker","b":"sk-012345678","c":"the dark side"}`)) {
		t.Error("the prefilter stops at a frame that holds no secret")
	}
}

// TestEveryPathScrubbed: an event built as maps that carries a request's
// headers (as a policy of another kind might) has the values of its
// credential headers redacted, with no secret registered before it; a
// secret registered (AddSecret) is scrubbed from every later event, on a
// one-shot stream, a follow stream and a trace held for an outcome
// filter alike; in clear, AddSecret registers nothing.
func TestEveryPathScrubbed(t *testing.T) {
	red := redact.New(redact.Options{Key: []byte("k"), EscapeHTML: true})
	all, err := watch.CompileOutcome(`response.code >= 0`)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		open  func(*Registry) *Watcher
		clear bool
	}{
		{"one-shot", func(r *Registry) *Watcher { return r.Watch(nil) }, false},
		{"follow", func(r *Registry) *Watcher {
			w, _ := r.Follow(FollowOptions{Max: 1, Duration: time.Minute})
			return w
		}, false},
		{"held", func(r *Registry) *Watcher {
			w, _ := r.Follow(FollowOptions{Max: 1, Duration: time.Minute, Outcome: all})
			return w
		}, false},
		{"one-shot, in clear", func(r *Registry) *Watcher { return r.Watch(nil) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reg Registry
			w := tc.open(&reg)
			defer w.Cancel()
			tr := reg.Take(func() any { return map[string]any{} })
			tr.SetRedaction(NewRedaction(red, tc.clear))
			tr.Emit(trace.SeverityInfo, trace.PolicyEvent, map[string]any{"kind": "x",
				"headers": map[string]any{"authorization": "Bearer map-built-secret-1", "accept": "*/*"}})
			tr.AddSecret("added-secret-0123")
			tr.Emit(trace.SeverityInfo, trace.PolicyEvent, map[string]any{"kind": "y", "details": "key added-secret-0123 refused"})
			tr.Emit(trace.SeverityInfo, trace.RequestFinished, map[string]any{"status": 200, "cause": map[string]any{"reason": "added-secret-0123"}})
			frames, _, final := w.Drain()
			out := string(frames) + string(final)
			if strings.Count(out, "data: ") != 3 {
				t.Fatalf("%d events, want 3:\n%s", strings.Count(out, "data: "), out)
			}
			if tc.clear {
				if !strings.Contains(out, "added-secret-0123") {
					t.Errorf("in clear, AddSecret hid its secret:\n%s", out)
				}
				return
			}
			for _, s := range []string{"map-built-secret-1", "added-secret-0123"} {
				if strings.Contains(out, s) {
					t.Errorf("the stream shows %q:\n%s", s, out)
				}
			}
			if !strings.Contains(out, `"authorization":"Bearer \u003credacted:`) || !strings.Contains(out, `"accept":"*/*"`) {
				t.Errorf("the headers of a map-built event, want authorization redacted and the rest kept:\n%s", out)
			}
		})
	}
}

// TestSensitiveMatchesRedactor: the tracer's quick test of header names
// (by length and first letter, then a comparison) says what the redact
// package's says, in any case, for the defaults, configured names (one
// not starting with a letter, one past ASCII, one of 64 bytes or more),
// common headers of the same lengths and first letters, and their
// neighbours.
func TestSensitiveMatchesRedactor(t *testing.T) {
	long := strings.Repeat("x-long-", 10)
	for _, extra := range [][]string{nil, {"X-Tenant-Token", "1x-digit", "_under"}, {"äöü-name", long}} {
		r := redact.New(redact.Options{Key: []byte("k"), Extra: extra})
		rd := NewRedaction(r, false)
		names := append([]string{"accept", "user-agent", "content-length", "Content-Type", "host", "cookies", "x-api-keys",
			"", "a", "1x-digiT", "_UNDER", "ÄÖÜ-NAME", strings.ToUpper(long), long + "y", "set-cookiE", "autHorization"}, r.Names()...)
		for _, n := range names {
			for _, k := range []string{n, strings.ToUpper(n), strings.ToLower(n)} {
				lower, got := rd.Sensitive(k)
				if want := r.Sensitive(k); got != want || got && lower != strings.ToLower(k) {
					t.Errorf("extra %v: Sensitive(%q) = %q, %v; the redactor says %v", extra, k, lower, got, want)
				}
				if got := rd.SensitiveLower(strings.ToLower(k)); got != r.Sensitive(k) {
					t.Errorf("extra %v: SensitiveLower(%q) = %v", extra, strings.ToLower(k), got)
				}
			}
		}
	}
}
