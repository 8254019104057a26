// Package termtext makes text safe to show on a terminal. What gwdiag
// prints quotes strings it did not write: a request's path, model and
// headers (a client's), a trace's reasons and names (a proxy's), a dump's
// names (a config's), a backend's error. A control character among them is
// an instruction to the terminal, not text: ESC starts sequences that move
// the cursor, erase lines already printed, retitle the window, make links
// or set the clipboard (OSC 52), CR returns to the start of a line to
// write over it, and a bidirectional override reorders what follows. A
// hostile client or proxy could hide a refusal from an operator, forge a
// verdict or plant a command to paste.
//
// Escape and Writer show each such character as a JSON escape of it
// (\u001b, \u009b, \u202e) instead. The escape is JSON's, so JSON output
// passes through a Writer with its meaning kept: a valid JSON text holds no
// raw C0 control, and the others can stand only in strings, where the
// escape reads as the character it replaces.
//
// What is escaped (unsafe): the C0 controls but tab and line feed, a
// carriage return not followed by a line feed, DEL, the C1 controls
// (U+0080 to U+009F, which terminals may read as ESC sequences), and the
// Unicode bidirectional controls. A byte that is not UTF-8 becomes U+FFFD,
// as JSON decoders read it. Everything else, other scripts and emoji
// included, is left as it is.
package termtext

import (
	"io"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/gwdiag/gwdiag/golden/trace/jsonscan"
)

// escapedRune reports whether the rune r, not ASCII, is escaped. The
// bidirectional controls all lie between bidiFirst and bidiLast, so most
// runes are passed without a look at the table.
func escapedRune(r rune) bool {
	return r <= 0x9f || r >= bidiFirst && r <= bidiLast && unicode.Is(unicode.Bidi_Control, r)
}

// The first and last of unicode.Bidi_Control (TestBidiRange).
const bidiFirst, bidiLast = 0x061c, 0x2069

// Escape returns s with every unsafe character escaped (the package
// comment); s itself when it has none.
func Escape(s string) string {
	i := safePrefix(s)
	if i == len(s) {
		return s
	}
	out, _ := appendEscaped(append(make([]byte, 0, len(s)+16), s[:i]...), s[i:], true)
	return string(out)
}

// safePrefix is the length of s's longest prefix that needs no escape. A
// trailing '\r' or incomplete UTF-8 sequence is not part of it: what
// follows may decide.
func safePrefix(s string) int {
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c >= 0x20 && c < 0x7f:
			i = jsonscan.Printable(s, i+1)
		case c == '\t' || c == '\n' || c == '\r' && i+1 < len(s) && s[i+1] == '\n':
			i++
		case c < utf8.RuneSelf:
			return i
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n <= 1 || escapedRune(r) {
				return i
			}
			i += n
		}
	}
	return len(s)
}

// appendEscaped appends s to dst with every unsafe character escaped and
// returns how much of s it took: all of it when final, else all but a
// trailing '\r' or incomplete UTF-8 sequence, which the next bytes decide.
func appendEscaped(dst []byte, s string, final bool) ([]byte, int) {
	for i := 0; i < len(s); {
		n := safePrefix(s[i:])
		dst = append(dst, s[i:i+n]...)
		if i += n; i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c == '\r' && i+1 == len(s) && !final {
				return dst, i
			}
			dst = appendRune(dst, rune(c))
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			if !final && !utf8.FullRuneInString(s[i:]) {
				return dst, i
			}
			dst = append(dst, "\uFFFD"...)
			i++
			continue
		}
		dst = appendRune(dst, r)
		i += n
	}
	return dst, len(s)
}

// appendRune appends r's JSON escape: \uXXXX, a surrogate pair above the
// Basic Multilingual Plane.
func appendRune(dst []byte, r rune) []byte {
	if r > 0xffff {
		hi, lo := utf16.EncodeRune(r)
		return appendRune(appendRune(dst, hi), lo)
	}
	const hex = "0123456789abcdef"
	return append(dst, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
}

// Writer writes to another writer what is written to it, every unsafe
// character escaped. A carriage return or UTF-8 sequence cut at the end
// of a Write waits for the next (or Flush), so the bytes written are the
// same however they were split. It is safe for concurrent use.
type Writer struct {
	mu   sync.Mutex
	w    io.Writer
	held []byte // a trailing '\r' or incomplete UTF-8 sequence
	buf  []byte
}

// NewWriter returns a Writer to w; w itself when it is one.
func NewWriter(w io.Writer) *Writer {
	if tw, ok := w.(*Writer); ok {
		return tw
	}
	return &Writer{w: w}
}

// Write escapes p to the underlying writer. It reports all of p written
// unless the underlying writer failed.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.held) == 0 {
		if safePrefix(view(p)) == len(p) {
			if _, err := w.w.Write(p); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	in := p
	if len(w.held) > 0 {
		in = append(w.held, p...)
	}
	out, taken := appendEscaped(w.buf[:0], view(in), false)
	w.held = append(w.held[:0:0], in[taken:]...)
	w.buf = out[:0]
	if cap(w.buf) > 64<<10 {
		w.buf = nil // a large write keeps no large buffer
	}
	if _, err := w.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what the last Write held back, escaped as the end of the
// text.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.held) == 0 {
		return nil
	}
	out, _ := appendEscaped(nil, string(w.held), true)
	w.held = nil
	_, err := w.w.Write(out)
	return err
}

// Unwrap returns the writer under w, after flushing it, when w is a
// Writer, and w otherwise: for output that escapes what it writes itself
// and writes control sequences of its own (the interactive viewer), and to
// ask whether the output is a terminal.
func Unwrap(w io.Writer) io.Writer {
	tw, ok := w.(*Writer)
	if !ok {
		return w
	}
	tw.Flush()
	return tw.w
}

// view is p as a string, without a copy: p is not changed while the
// string is in use, and the string is not kept.
func view(p []byte) string { return unsafe.String(unsafe.SliceData(p), len(p)) }
