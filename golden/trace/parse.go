package trace

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gwdiag/gwdiag/golden/trace/jsonscan"
)

// A follow reader decodes every event of a proxy under load, so Parse has
// a fast path: a decoder for the shape events have on the wire that builds
// the same Event encoding/json builds (Message's values as encoding/json
// makes them for an `any`: map[string]any, []any, string, float64, bool,
// nil). Whatever it does not handle exactly the way encoding/json does, it
// leaves to encoding/json: invalid JSON (the error is encoding/json's), a
// field given twice, a field name in another case or with escapes or
// non-ASCII bytes (encoding/json matches names ignoring case), a value of
// the wrong type, an integer field that is not a JSON integer in range, a
// number out of float64's range, nesting deeper than maxFastDepth. Strings
// without escapes are cut from one copy of the input; a string with escapes
// or invalid UTF-8 is decoded as encoding/json decodes it (unquote).
// TestParseFastPath, TestParseRandom and FuzzParse hold the two to the same
// result.

// maxFastDepth is the nesting the fast path takes; deeper input goes to
// encoding/json, which has its own bound.
const maxFastDepth = 200

// parseFast decodes s, reporting false when encoding/json must decide.
func parseFast(s string) (Event, bool) {
	d := decoder{s: s}
	var e Event
	d.ws()
	if !d.byte('{') {
		return e, false
	}
	var seen [6]bool
	d.ws()
	if d.byte('}') {
		return e, d.end()
	}
	for {
		d.ws()
		key, ok := d.plainKey()
		if !ok || !d.colon() {
			return e, false
		}
		field := fieldIndex(key)
		if field >= 0 {
			if seen[field] {
				return e, false
			}
			seen[field] = true
		}
		// A null leaves the field at its zero value, as encoding/json
		// does (each field is seen once). On a false return e is dropped.
		ok = true
		switch {
		case field >= 0 && d.null():
		case field == 0: // eventStart
			var n int64
			n, ok = d.int64()
			e.EventStart = &n
		case field == 1: // eventEnd
			e.EventEnd, ok = d.int64()
		case field == 2: // severity
			var v string
			v, ok = d.str()
			e.Severity = Severity(v)
		case field == 3: // scope
			e.Scope, ok = d.strings()
		case field == 4: // message
			if ok = d.peek() == '{'; ok {
				e.Message, ok = d.object(1)
			}
		case field == 5: // requestId
			e.RequestID, ok = d.str()
		case field == -2:
			ok = false
		default:
			ok = d.skip(1)
		}
		if !ok {
			return e, false
		}
		if more, ok := d.next('}'); !more {
			return e, ok && d.end()
		}
	}
}

// fieldNames are Event's JSON names, by fieldIndex.
var fieldNames = [...]string{"eventStart", "eventEnd", "severity", "scope", "message", "requestId"}

// fieldIndex is key's field, -1 for a key encoding/json ignores, and -2
// for one it would match to a field ignoring case (the fast path leaves
// that to it).
func fieldIndex(key string) int {
	for i, n := range fieldNames {
		if key == n {
			return i
		}
	}
	for _, n := range fieldNames {
		if strings.EqualFold(key, n) {
			return -2
		}
	}
	return -1
}

type decoder struct {
	s string
	i int
	// spaced: ws skipped whitespace (outside strings, where only ws does).
	spaced bool
	// memo, when set, is the reader whose last request state the header
	// scan may pass over (HeaderReader).
	memo *HeaderReader
}

func (d *decoder) ws() {
	// Compact JSON has none: one comparison, inlined where it is called.
	if d.i < len(d.s) && d.s[d.i] > ' ' {
		return
	}
	d.skipWS()
}

func (d *decoder) skipWS() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
			d.spaced = true
		default:
			return
		}
	}
}

func (d *decoder) peek() byte {
	if d.i < len(d.s) {
		return d.s[d.i]
	}
	return 0
}

func (d *decoder) byte(c byte) bool {
	if d.i < len(d.s) && d.s[d.i] == c {
		d.i++
		return true
	}
	return false
}

// colon reads the ':' after an object's name, and the whitespace around it.
func (d *decoder) colon() bool {
	d.ws()
	if !d.byte(':') {
		return false
	}
	d.ws()
	return true
}

// next reads what follows an element of an array or object: a ',' (more:
// another element follows) or the closing byte (ok), after whitespace.
func (d *decoder) next(closing byte) (more, ok bool) {
	d.ws()
	if d.byte(',') {
		return true, true
	}
	return false, d.byte(closing)
}

// end reports whether only whitespace is left.
func (d *decoder) end() bool {
	d.ws()
	return d.i == len(d.s)
}

func (d *decoder) literal(lit string) bool {
	if strings.HasPrefix(d.s[d.i:], lit) {
		d.i += len(lit)
		return true
	}
	return false
}

func (d *decoder) null() bool { return d.literal("null") }

// token scans a JSON string at d.i (its quotes included), reporting
// whether it holds an escape or a byte past ASCII.
func (d *decoder) token() (tok string, plain, ok bool) {
	if !d.byte('"') {
		return "", false, false
	}
	start, plain := d.i-1, true
	for d.i < len(d.s) {
		// Most of a string is bytes that stand for themselves: passed in a
		// run, eight at a time while no byte of the eight needs a look.
		d.i = jsonscan.Plain(d.s, d.i)
		if d.i >= len(d.s) {
			break
		}
		c := d.s[d.i]
		switch {
		case c == '"':
			d.i++
			return d.s[start:d.i], plain, true
		case c < 0x20:
			return "", false, false
		case c == '\\':
			plain = false
			d.i++
			if d.i >= len(d.s) {
				return "", false, false
			}
			switch d.s[d.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i++
			case 'u':
				if d.i+5 > len(d.s) {
					return "", false, false
				}
				if !isHex4(d.s[d.i+1 : d.i+5]) {
					return "", false, false
				}
				d.i += 5
			default:
				return "", false, false
			}
		case c >= utf8.RuneSelf:
			plain = false
			d.i++
		default:
			d.i++
		}
	}
	return "", false, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// str decodes a JSON string: cut from the input when it is plain (or
// valid UTF-8 without escapes), else decoded by encoding/json.
func (d *decoder) str() (string, bool) {
	tok, plain, ok := d.token()
	if !ok {
		return "", false
	}
	body := tok[1 : len(tok)-1]
	if plain || strings.IndexByte(body, '\\') < 0 && utf8.ValidString(body) {
		return body, true
	}
	return unquote(body), true
}

// unquote decodes the body of a JSON string token() has checked, as
// encoding/json does (jsonscan.AppendUnquoted).
func unquote(s string) string {
	b, _ := jsonscan.AppendUnquoted(make([]byte, 0, len(s)), s)
	return string(b)
}

func isHex4(s string) bool {
	return isHex(s[0]) && isHex(s[1]) && isHex(s[2]) && isHex(s[3])
}

// plainKey reads a top-level field name, which the fast path takes only
// without escapes and in ASCII: encoding/json matches names ignoring case,
// Unicode's folds included.
func (d *decoder) plainKey() (string, bool) {
	tok, plain, ok := d.token()
	if !ok || !plain {
		return "", false
	}
	return tok[1 : len(tok)-1], true
}

// number scans a JSON number.
func (d *decoder) number() (string, bool) {
	start := d.i
	d.byte('-')
	switch {
	case d.byte('0'):
	case d.i < len(d.s) && '1' <= d.s[d.i] && d.s[d.i] <= '9':
		d.digits()
	default:
		return "", false
	}
	if d.byte('.') {
		if d.digits() == 0 {
			return "", false
		}
	}
	if d.byte('e') || d.byte('E') {
		if !d.byte('+') {
			d.byte('-')
		}
		if d.digits() == 0 {
			return "", false
		}
	}
	return d.s[start:d.i], true
}

func (d *decoder) digits() int {
	start := d.i
	for d.i < len(d.s) && '0' <= d.s[d.i] && d.s[d.i] <= '9' {
		d.i++
	}
	return d.i - start
}

// int64 reads a number into an int64 field: encoding/json takes only an
// integer literal in range.
func (d *decoder) int64() (int64, bool) {
	lit, ok := d.number()
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(lit, 10, 64)
	return n, err == nil
}

// strings reads an array of strings (a null element goes to encoding/json).
func (d *decoder) strings() ([]string, bool) {
	if !d.byte('[') {
		return nil, false
	}
	out := []string{}
	d.ws()
	if d.byte(']') {
		return out, true
	}
	for {
		d.ws()
		v, ok := d.str()
		if !ok {
			return nil, false
		}
		out = append(out, v)
		if more, ok := d.next(']'); !more {
			return out, ok
		}
	}
}

// value decodes any JSON value as encoding/json does into an any.
func (d *decoder) value(depth int) (any, bool) {
	if depth > maxFastDepth {
		return nil, false
	}
	switch c := d.peek(); {
	case c == '{':
		return d.object(depth)
	case c == '[':
		d.i++
		out := []any{}
		d.ws()
		if d.byte(']') {
			return out, true
		}
		for {
			d.ws()
			v, ok := d.value(depth + 1)
			if !ok {
				return nil, false
			}
			out = append(out, v)
			if more, ok := d.next(']'); !more {
				return out, ok
			}
		}
	case c == '"':
		return d.str()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.null()
	default:
		lit, ok := d.number()
		if !ok {
			return nil, false
		}
		f, err := strconv.ParseFloat(lit, 64)
		return f, err == nil
	}
}

// object decodes a JSON object into a map; a name given twice keeps its
// last value, as encoding/json does.
func (d *decoder) object(depth int) (map[string]any, bool) {
	if depth > maxFastDepth || !d.byte('{') {
		return nil, false
	}
	m := map[string]any{}
	d.ws()
	if d.byte('}') {
		return m, true
	}
	for {
		d.ws()
		k, ok := d.str()
		if !ok || !d.colon() {
			return nil, false
		}
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		m[k] = v
		if more, ok := d.next('}'); !more {
			return m, ok
		}
	}
}

// skip validates and passes over a value whose field encoding/json ignores.
func (d *decoder) skip(depth int) bool {
	_, ok := d.value(depth)
	return ok
}
