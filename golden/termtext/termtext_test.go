package termtext

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

var escapeCases = []struct{ in, want string }{
	{"plain text, tabs\tand\nlines", "plain text, tabs\tand\nlines"},
	{"", ""},
	// ESC: erase the line, move up, OSC 52 (set the clipboard), a link.
	{"/get\x1b[2K\x1b[1A", `/get\u001b[2K\u001b[1A`},
	{"\x1b]52;c;cm0gLXJmIH4=\a", `\u001b]52;c;cm0gLXJmIH4=\u0007`},
	{"\x1b]8;;http://evil\x1b\\ok\x1b]8;;\x1b\\", `\u001b]8;;http://evil\u001b\ok\u001b]8;;\u001b\`},
	// CR returns to overwrite the line; CRLF ends it.
	{"429 refused\rPASS", `429 refused\u000dPASS`},
	{"line\r\nnext\r", "line\r\nnext\\u000d"},
	{"\r\r\n", "\\u000d\r\n"},
	{"nul\x00bs\bdel\x7f", `nul\u0000bs\u0008del\u007f`},
	// C1 CSI and OSC, as UTF-8; a lone byte that is not UTF-8.
	{"\u009b31mred", `\u009b31mred`},
	{"a\u009d0;title\u009cb", `a\u009d0;title\u009cb`},
	{"a\xffb\xc3", "a\uFFFDb\uFFFD"},
	// Bidirectional controls reorder what follows.
	{"user\u202Enimda", `user\u202enimda`},
	{"\u2066x\u2069\u200f\u061c", `\u2066x\u2069\u200f\u061c`},
	// Other scripts, emoji and non-breaking space are text.
	{"héllo ✓ 模型 مرحبا 👩‍💻\u00a0", "héllo ✓ 模型 مرحبا 👩‍💻\u00a0"},
	{"\u0080\u009f\u00a0", `\u0080\u009f` + "\u00a0"},
}

// TestBidiRange: bidiFirst and bidiLast bound unicode.Bidi_Control, so
// that escapedRune's quick test passes none of them.
func TestBidiRange(t *testing.T) {
	first, last := rune(-1), rune(-1)
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if unicode.Is(unicode.Bidi_Control, r) {
			if first < 0 {
				first = r
			}
			last = r
			if !escapedRune(r) {
				t.Errorf("%U is a bidirectional control not escaped", r)
			}
		}
	}
	if first != bidiFirst || last != bidiLast {
		t.Errorf("unicode.Bidi_Control spans %U to %U; bidiFirst and bidiLast say %U to %U", first, last, bidiFirst, bidiLast)
	}
}

func TestEscape(t *testing.T) {
	for _, c := range escapeCases {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := Escape(c.want); got != Escape(c.in) && !strings.Contains(c.in, "\r\n") {
			t.Errorf("Escape is not idempotent on %q: %q", c.in, got)
		}
	}
}

// writeSplit writes s to a Writer in pieces cut at cuts and flushes.
func writeSplit(t testing.TB, s string, cuts ...int) string {
	var b bytes.Buffer
	w := NewWriter(&b)
	prev := 0
	for _, c := range append(cuts, len(s)) {
		if c < prev || c > len(s) {
			continue
		}
		if n, err := w.Write([]byte(s[prev:c])); n != c-prev || err != nil {
			t.Fatalf("Write: %d, %v; want %d, nil", n, err, c-prev)
		}
		prev = c
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestWriterSplits: the bytes written are Escape's wherever the writes
// cut the text, a CRLF or a UTF-8 sequence included.
func TestWriterSplits(t *testing.T) {
	for _, c := range escapeCases {
		for i := 0; i <= len(c.in); i++ {
			for j := i; j <= len(c.in); j++ {
				if got := writeSplit(t, c.in, i, j); got != c.want {
					t.Fatalf("%q cut at %d and %d: got %q, want %q", c.in, i, j, got, c.want)
				}
			}
		}
	}
}

func TestWriterHoldsUntilFlush(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	w.Write([]byte("over\r"))
	if b.String() != "over" {
		t.Fatalf("a trailing CR was written before what follows it: %q", b.String())
	}
	w.Write([]byte("\n\xe6\xa8"))
	if b.String() != "over\r\n" {
		t.Fatalf("got %q, want the CRLF and the cut sequence held", b.String())
	}
	w.Write([]byte("\xa1"))
	w.Flush()
	if b.String() != "over\r\n模" {
		t.Fatalf("got %q", b.String())
	}
	w.Write([]byte("\r"))
	w.Flush()
	if b.String() != "over\r\n模\\u000d" {
		t.Fatalf("Flush wrote %q; want the held CR escaped", b.String())
	}
	if NewWriter(w) != w || Unwrap(w) != &b || Unwrap(&b) != &b {
		t.Error("NewWriter or Unwrap does not see through a Writer")
	}
}

type failing struct{}

func (failing) Write(p []byte) (int, error) { return 0, errors.New("disk full") }

func TestWriterReportsFailure(t *testing.T) {
	for _, s := range []string{"plain", "esc\x1b"} {
		if n, err := NewWriter(failing{}).Write([]byte(s)); n != 0 || err == nil {
			t.Errorf("Write(%q) to a failing writer: %d, %v; want 0 and its error", s, n, err)
		}
	}
}

// escapeRef is Escape rune by rune, as the package comment says it.
func escapeRef(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteRune(utf8.RuneError)
		case r == '\t' || r == '\n' || r == '\r' && strings.HasPrefix(s[i:], "\r\n"):
			b.WriteRune(r)
		case r < 0x20 || r >= 0x7f && r <= 0x9f || unicode.Is(unicode.Bidi_Control, r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// checkEscaped holds the properties of Escape and Writer for any input.
func checkEscaped(t *testing.T, s string, cut int) {
	out := Escape(s)
	if want := escapeRef(s); out != want {
		t.Fatalf("Escape(%q) = %q, want %q", s, out, want)
	}
	if !utf8.ValidString(out) {
		t.Fatalf("Escape(%q) = %q is not UTF-8", s, out)
	}
	for i, r := range out {
		crlf := r == '\r' && strings.HasPrefix(out[i:], "\r\n")
		if r < 0x20 && r != '\t' && r != '\n' && !crlf || r >= 0x7f && r <= 0x9f || unicode.Is(unicode.Bidi_Control, r) {
			t.Fatalf("Escape(%q) = %q keeps %U", s, out, r)
		}
	}
	if again := Escape(out); again != out {
		t.Fatalf("Escape(Escape(%q)) = %q, want %q", s, again, out)
	}
	if got := writeSplit(t, s, cut); got != out {
		t.Fatalf("%q written cut at %d: %q, want %q", s, cut, got, out)
	}
	// A JSON text keeps its meaning, but for a lone CR between tokens.
	if json.Valid([]byte(s)) && !strings.Contains(s, "\r") {
		var a, b any
		if err := json.Unmarshal([]byte(out), &b); err != nil {
			t.Fatalf("%q escaped is %q, not JSON: %v", s, out, err)
		}
		json.Unmarshal([]byte(s), &a)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%q escaped is %q: %v, want %v", s, out, b, a)
		}
	}
}

func TestJSONKeepsItsMeaning(t *testing.T) {
	for _, s := range []string{
		`{"path":"/get` + "\x1b[2K\u009b\u202e\x7f" + `","a":["` + "\xff" + `",1]}`,
		`"` + "\U000e0041\u2066" + `"`,
		"{\"k\":\r\n\"v\u200f\"}",
	} {
		checkEscaped(t, s, len(s)/2)
	}
}

func FuzzEscape(f *testing.F) {
	for _, c := range escapeCases {
		f.Add(c.in, len(c.in)/2)
	}
	f.Add(`{"reason":"`+"\x1b[1A\r\u009b"+`"}`, 12)
	f.Fuzz(func(t *testing.T, s string, cut int) {
		if cut < 0 {
			cut = -cut
		}
		checkEscaped(t, s, cut%(len(s)+1))
	})
}

func BenchmarkWriter(b *testing.B) {
	line := []byte(`{"eventStart":12,"eventEnd":40,"severity":"info","requestId":"0a1b2c","message":{"type":"routeSelection","selectedRoute":"default/route0","evaluatedRoutes":["default/route0"]}}` + "\n")
	for _, c := range []struct {
		name string
		p    []byte
	}{
		{"ascii", line},
		{"utf8", []byte(strings.Repeat("模型 ✓ ", 20) + "\n")},
		{"escaped", []byte(strings.Repeat("\x1b[2K", 10) + string(line))},
	} {
		b.Run(c.name, func(b *testing.B) {
			w := NewWriter(discard{})
			b.SetBytes(int64(len(c.p)))
			b.ReportAllocs()
			for b.Loop() {
				w.Write(c.p)
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
