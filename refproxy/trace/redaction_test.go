package trace

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/golden/trace/redact"
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
