package jsonscan

import (
	"unicode/utf16"
	"unicode/utf8"
)

// AppendUnquoted appends the body of a JSON string (what stands between
// its quotes) to dst, decoded as encoding/json decodes it: the escapes, a
// surrogate pair as one rune, a lone surrogate and each byte of invalid
// UTF-8 as U+FFFD. It reports false, with what it appended so far, for a
// body encoding/json refuses: a control byte, an unknown escape, a \u not
// followed by four hex digits, a backslash at the end, a quote not escaped. The one decoder of
// JSON strings for the trace's reader (golden/trace, where the body was
// checked already) and redaction's look ahead (golden/trace/redact).
// TestAppendUnquotedMatchesEncodingJSON and FuzzAppendUnquoted hold it to
// json.Unmarshal.
func AppendUnquoted(dst []byte, raw string) ([]byte, bool) {
	for r := 0; r < len(raw); {
		if end := Plain(raw, r); end > r {
			dst = append(dst, raw[r:end]...)
			r = end
			continue
		}
		switch c := raw[r]; {
		case c < 0x20:
			return dst, false
		case c >= utf8.RuneSelf:
			rr, size := utf8.DecodeRuneInString(raw[r:])
			dst = utf8.AppendRune(dst, rr)
			r += size
			continue
		case c == '"':
			return dst, false // it would end the string
		}
		// a backslash
		if r++; r == len(raw) {
			return dst, false
		}
		switch c := raw[r]; c {
		case '"', '\\', '/':
			dst = append(dst, c)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			rr, ok := hex4(raw, r+1)
			if !ok {
				return dst, false
			}
			r += 5
			if utf16.IsSurrogate(rr) {
				if r+1 < len(raw) && raw[r] == '\\' && raw[r+1] == 'u' {
					if lo, ok := hex4(raw, r+2); ok {
						if dec := utf16.DecodeRune(rr, lo); dec != utf8.RuneError {
							dst = utf8.AppendRune(dst, dec)
							r += 6
							continue
						}
					}
				}
				rr = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, rr)
			continue
		default:
			return dst, false
		}
		r++
	}
	return dst, true
}

// hex4 is the value of the four hex digits of s from i; false if there
// are not four.
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
