package jsonscan

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// unquoteCases are bodies with every escape, surrogate pairs whole, cut
// and lone, invalid UTF-8, and each thing encoding/json refuses; they
// seed FuzzAppendUnquoted too.
var unquoteCases = []string{
	``, `plain text`, `tab\there`, `\"\\\/\b\f\n\r\t`, `\u0041\u00e9\u20AC`,
	`\ud83d\ude00 face`, `\ud83d`, `\ud83dx`, `\ude00\ud83d`, `\ud83d\u0041`, `\ud83d\ud83d\ude00`,
	"caf\xc3\xa9", "bad \xff byte", "\xe2\x82", "\xed\xa0\x80", "<html>&amp;",
	`\u00`, `\u12g4`, `\x41`, `end\`, `a"b`, "ctl\x01", "del\x7f", `\u0000`, `\U0041`,
	`{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\"}]}`,
}

// check holds AppendUnquoted to json.Unmarshal of the quoted body: the
// same string where json.Unmarshal takes it, false where it refuses it.
func check(t *testing.T, raw string) {
	t.Helper()
	var want string
	err := json.Unmarshal([]byte(`"`+raw+`"`), &want)
	got, ok := AppendUnquoted([]byte("prefix:"), raw)
	switch {
	case err != nil && ok:
		t.Fatalf("AppendUnquoted(%q) = %q, true; json.Unmarshal refuses it: %v", raw, got, err)
	case err == nil && !ok:
		t.Fatalf("AppendUnquoted(%q) = false; json.Unmarshal gives %q", raw, want)
	case err == nil && string(got) != "prefix:"+want:
		t.Fatalf("AppendUnquoted(%q) = %q, json.Unmarshal gives %q", raw, got[len("prefix:"):], want)
	}
}

// TestAppendUnquotedMatchesEncodingJSON: the cases above, and random
// bodies made mostly of the bytes that matter.
func TestAppendUnquotedMatchesEncodingJSON(t *testing.T) {
	for _, raw := range unquoteCases {
		check(t, raw)
	}
	pieces := []string{`\`, `u`, `d83d`, `de00`, `00e9`, `"`, `n`, `/`, "\xff", "\xc3", "\xa9", "\x01", `a`, `Z`, `0`, `<`}
	r := rand.New(rand.NewPCG(13, 17))
	for range 50000 {
		var b []byte
		for range r.IntN(12) {
			b = append(b, pieces[r.IntN(len(pieces))]...)
		}
		check(t, string(b))
	}
}

// FuzzAppendUnquoted: any body, the same as json.Unmarshal.
func FuzzAppendUnquoted(f *testing.F) {
	for _, raw := range unquoteCases {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw string) { check(t, raw) })
}
