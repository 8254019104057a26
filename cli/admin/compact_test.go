package admin

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// sameCompact checks that compactJSON gives what json.Compact gives for
// b, its error included (an input it passes unchecked is one json.Compact
// leaves as it is, or refuses).
func sameCompact(t *testing.T, b []byte) {
	t.Helper()
	var want bytes.Buffer
	werr := json.Compact(&want, b)
	got, gerr := compactJSON(b, false)
	if borrowed, berr := compactJSON(b, true); !bytes.Equal(borrowed, got) || (berr == nil) != (gerr == nil) {
		t.Fatalf("compactJSON(%q) borrowed = %q, %v; copied %q, %v", b, borrowed, berr, got, gerr)
	}
	switch {
	case werr == nil && gerr != nil:
		t.Fatalf("compactJSON(%q): %v; json.Compact accepts it", b, gerr)
	case werr == nil && !bytes.Equal(got, want.Bytes()):
		t.Fatalf("compactJSON(%q) = %q; json.Compact makes %q", b, got, want.Bytes())
	case werr != nil && gerr != nil && gerr.Error() != werr.Error():
		t.Fatalf("compactJSON(%q): %v; json.Compact: %v", b, gerr, werr)
	case werr != nil && gerr == nil && !bytes.Equal(got, b):
		t.Fatalf("compactJSON(%q) = %q, changed JSON json.Compact refuses (%v)", b, got, werr)
	}
}

// TestCompactJSON: compactJSON is json.Compact on the saved traces of the
// repository, as they are and re-indented, and on edge cases.
func TestCompactJSON(t *testing.T) {
	files, _ := filepath.Glob("../../golden/trace/sse/testdata/*/*.*")
	if len(files) < 10 {
		t.Fatalf("found %d saved traces", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range bytes.Split(b, []byte("\n")) {
			l = bytes.TrimPrefix(l, []byte("data: "))
			sameCompact(t, l)
			var ind bytes.Buffer
			if json.Indent(&ind, l, " ", "\t") == nil {
				sameCompact(t, ind.Bytes())
			}
		}
	}
	for _, in := range []string{
		``, ` `, `{}`, ` {}`, `{} `, `{"a b":"c d"}`, `{"a":"\" b"}`, `{"a":"\\"}`, `{"a":"\\" , "b":1}`,
		`{"a":"x\ty"}`, "{\"a\":\r\n1}", `{"a":"unterminated}`, `{"a":1,}`, `{"a"  :  "\\\" "}`, `"x"`, `[1, 2]`,
	} {
		sameCompact(t, []byte(in))
	}
}

func FuzzCompactJSON(f *testing.F) {
	f.Add([]byte(`{"a":"\" b", "c": [1, 2]}`))
	f.Fuzz(func(t *testing.T, b []byte) { sameCompact(t, b) })
}

// isCompactByByte is isCompact as a byte-by-byte scan: the reference.
func isCompactByByte(data []byte) bool {
	in := false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}

// FuzzIsCompact: isCompact, which skips strings with bytes.IndexByte,
// answers as a byte-by-byte scan does (escaped quotes, runs of
// backslashes, unterminated strings).
func FuzzIsCompact(f *testing.F) {
	for _, s := range []string{``, `"`, `""`, `"\"" `, `"\\" `, `"\\\" "`, `"a\`, `{"a b":"c d"} `, `\" "`, `"\\\\"x y`, `{"k":"v\"w x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := isCompact(b), isCompactByByte(b); got != want {
			t.Fatalf("isCompact(%q) = %v, want %v", b, got, want)
		}
	})
}
