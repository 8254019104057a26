// Package jsonscan finds, eight bytes at a time, where a run of bytes that
// a JSON string holds as they are ends, and decodes a JSON string's body
// as encoding/json does: the one string scanner and decoder of the trace's
// reader (golden/trace), the proxy's writer (refproxy/internal/tracing) and
// redaction's look ahead (golden/trace/redact). Printable is the same scan
// for the text a terminal is shown (golden/termtext).
package jsonscan

import (
	"encoding/binary"
	"unicode/utf8"
	"unsafe"
)

// plain tells the bytes a JSON string holds as they are, all ASCII: not a
// quote, a backslash or a control byte. htmlSafe is plain without <, >
// and &, which json.Marshal escapes as \u003c, \u003e and \u0026.
// printable is ASCII but the controls and DEL.
var plain, htmlSafe, printable = func() (p, h, t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		p[c] = c != '"' && c != '\\'
		h[c] = p[c] && c != '<' && c != '>' && c != '&'
		t[c] = c != 0x7f
	}
	return p, h, t
}()

// Plain is the index of the first byte of s from i on that is a quote, a
// backslash, a control byte or past ASCII, or len(s): where a reader of a
// JSON string must look closer.
func Plain(s string, i int) int {
	for i+8 <= len(s) && plainWord(word(s, i))&highs == 0 {
		i += 8
	}
	for i < len(s) && plain[s[i]] {
		i++
	}
	return i
}

// HTMLSafe is the index of the first byte of s from i on that Plain stops
// at or that is <, > or &, or len(s): where json.Marshal's string encoding
// (HTML escaping on) must look closer.
func HTMLSafe(s string, i int) int {
	for i+8 <= len(s) {
		w := word(s, i)
		if (plainWord(w)|has(w, '<')|has(w, '>')|has(w, '&'))&highs != 0 {
			break
		}
		i += 8
	}
	for i < len(s) && htmlSafe[s[i]] {
		i++
	}
	return i
}

// Printable is the index of the first byte of s from i on that is a
// control byte, DEL or past ASCII, or len(s): where a terminal's text must
// be looked at closer.
func Printable(s string, i int) int {
	for i+8 <= len(s) && printableWord(word(s, i))&highs == 0 {
		i += 8
	}
	for i < len(s) && printable[s[i]] {
		i++
	}
	return i
}

// The three scan eight bytes at once (SWAR) while no byte of the eight needs a
// look, then byte by byte up to the one that does: the word tests only
// narrow the search (they may flag a word whose bytes all pass, never
// pass one that holds a byte to stop at); the tables decide.
const ones, highs = 0x0101010101010101, 0x8080808080808080

// word is the eight bytes of s from i, the first the lowest.
func word(s string, i int) uint64 {
	return binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s[i:]), 8))
}

// has sets the high bit of a byte of w that is c (and may set it of the
// byte after one that is).
func has(w uint64, c byte) uint64 {
	x := w ^ (ones * uint64(c))
	return (x - ones) &^ x
}

// plainWord sets the high bit of a byte of w that Plain stops at: below
// 0x20, past ASCII (its own high bit), a quote or a backslash. HTMLSafe
// adds <, > and &.
func plainWord(w uint64) uint64 {
	return (w-ones*0x20)&^w | w | has(w, '"') | has(w, '\\')
}

// printableWord sets the high bit of a byte of w that Printable stops at:
// below 0x20, DEL or past ASCII.
func printableWord(w uint64) uint64 {
	return (w-ones*0x20)&^w | w | has(w, 0x7f)
}
