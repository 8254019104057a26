package tracing

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/jsonscan"
)

// appendEvent appends e as JSON, byte for byte what json.Marshal writes
// for it (keys of maps sorted, <, > and & escaped as \u003c..., invalid
// UTF-8 as \ufffd), without reflection for the values a trace is made
// of: maps of string to any, slices, strings, numbers, booleans and nil.
// Any other value is encoded by encoding/json itself. It reports false,
// with b unchanged, when the event cannot be encoded (a NaN, a value
// json.Marshal refuses): encoding/json then says why.
// TestAppendEventMatchesMarshal and FuzzAppendEvent prove it against
// json.Marshal.
func appendEvent(b []byte, e trace.Event) ([]byte, bool) {
	at := len(b)
	b = append(b, `{"eventStart":`...)
	if e.EventStart == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, *e.EventStart, 10)
	}
	b = append(b, `,"eventEnd":`...)
	b = strconv.AppendInt(b, e.EventEnd, 10)
	b = append(b, `,"severity":`...)
	b = appendString(b, string(e.Severity))
	ok := true
	if len(e.Scope) > 0 {
		b = append(b, `,"scope":`...)
		b = appendStrings(b, e.Scope)
	}
	b = append(b, `,"message":`...)
	if b, ok = appendMap(b, e.Message); !ok {
		return b[:at], false
	}
	if e.RequestID != "" {
		b = append(b, `,"requestId":`...)
		b = appendString(b, e.RequestID)
	}
	return append(b, '}'), true
}

// rawJSON is a value of an event already encoded, exactly as json.Marshal
// would encode what it stands for (compact, keys sorted, strings escaped
// as AppendString does): a proxy renders its largest values (request and
// response snapshots) straight to bytes rather than to maps that are
// encoded once and thrown away. AppendEvent copies it as it is;
// encoding/json, through MarshalJSON, writes the same bytes.
type rawJSON []byte

// MarshalJSON returns j itself.
func (j rawJSON) MarshalJSON() ([]byte, error) { return j, nil }

// AppendString appends s as a JSON string, as json.Marshal writes it.
func AppendString(b []byte, s string) []byte { return appendString(b, s) }

// AppendValue appends v as json.Marshal writes it, or reports false with
// b unchanged when json.Marshal refuses it.
func AppendValue(b []byte, v any) ([]byte, bool) {
	at := len(b)
	b, ok := appendValue(b, v)
	if !ok {
		return b[:at], false
	}
	return b, true
}

// appendValue appends v as json.Marshal writes it.
func appendValue(b []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), true
	case rawJSON:
		// Empty is not JSON: json.Marshal refuses it too.
		return append(b, v...), len(v) > 0
	case string:
		return appendString(b, v), true
	case bool:
		return strconv.AppendBool(b, v), true
	case int:
		return strconv.AppendInt(b, int64(v), 10), true
	case int64:
		return strconv.AppendInt(b, v, 10), true
	case int32:
		return strconv.AppendInt(b, int64(v), 10), true
	case uint64:
		return strconv.AppendUint(b, v, 10), true
	case uint32:
		return strconv.AppendUint(b, uint64(v), 10), true
	case uint:
		return strconv.AppendUint(b, uint64(v), 10), true
	case float64:
		return appendFloat(b, v, 64)
	case float32:
		return appendFloat(b, float64(v), 32)
	case map[string]any:
		return appendMap(b, v)
	case []any:
		if v == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, x := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendValue(b, x); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case []string:
		return appendStrings(b, v), true
	case map[string]string:
		if v == nil {
			return append(b, "null"...), true
		}
		var arr [smallMap]string
		keys := sortKeys(arr[:0], v)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendString(b, v[k])
		}
		return append(b, '}'), true
	}
	j, err := json.Marshal(v)
	if err != nil {
		return b, false
	}
	return append(b, j...), true
}

func appendMap(b []byte, m map[string]any) ([]byte, bool) {
	if m == nil {
		return append(b, "null"...), true
	}
	var arr [smallMap]string
	keys := sortKeys(arr[:0], m)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		var ok bool
		if b, ok = appendValue(b, m[k]); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// smallMap is the size of a map whose keys are sorted on the stack (a
// trace's maps are smaller: effectivePolicy has 17 keys).
const smallMap = 24

// sortKeys appends the keys of m to keys, in encoding/json's order.
func sortKeys[V any](keys []string, m map[string]V) []string {
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendFloat is encoding/json's float encoding (ES6 number to string).
func appendFloat(b []byte, f float64, bits int) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		// e-09 to e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

const hexDigits = "0123456789abcdef"

// appendString is encoding/json's string encoding with HTML escaping, as
// json.Marshal does it.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; ; {
		if i = jsonscan.HTMLSafe(s, i); i >= len(s) {
			break
		}
		if c := s[i]; c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
