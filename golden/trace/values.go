package trace

import "encoding/json"

// The fields of an event are what a JSON decoder gives (objects as
// map[string]any, numbers as float64 or json.Number) or, in a proxy's own
// events before they are written, Go values. These read one loosely: the
// zero value where the field is absent or of another type.

// Object returns v as a JSON object, or nil.
func Object(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// String returns v as a string, or "".
func String(v any) string {
	s, _ := v.(string)
	return s
}

// Int returns a JSON number (float64 from encoding/json, json.Number,
// or an integer of a proxy's own events) as an int, or 0.
func Int(v any) int {
	switch n := v.(type) {
	case float64:
		return int(n)
	case int:
		return n
	case int64:
		return int(n)
	case uint64:
		return int(n)
	case uint32:
		return int(n)
	case json.Number:
		i, _ := n.Int64()
		return int(i)
	}
	return 0
}
