package llm

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
)

// parseUsage reads an OpenAI usage object (prompt_tokens, completion_tokens;
// input_tokens, output_tokens as the Responses API names them). ok is false
// for null.
//
// One pass over raw both checks that it is valid JSON (as json.Valid would)
// and picks out the four counts at its top level (the last occurrence of
// each, keys compared as topValue compares them).
func parseUsage(raw []byte) (u Usage, ok bool, err error) {
	if string(raw) == "null" {
		return Usage{}, false, nil
	}
	var v usageValues
	if len(raw) == 0 || raw[0] != '{' || !v.scan(raw) {
		return Usage{}, true, fmt.Errorf("%w: usage %.64q is not an object", errMalformedUsage, raw)
	}
	pk, ck := "prompt_tokens", "completion_tokens"
	pi, ci := usagePrompt, usageCompletion
	if !v.has[pi] && !v.has[ci] {
		pk, ck = "input_tokens", "output_tokens"
		pi, ci = usageInput, usageOutput
	}
	if !v.has[pi] && !v.has[ci] {
		return Usage{}, true, fmt.Errorf("%w: usage has neither prompt_tokens nor completion_tokens", errMalformedUsage)
	}
	count := func(name string, i int) (uint64, error) {
		if !v.has[i] {
			return 0, nil
		}
		n, err := parseCount(v.val[i])
		if err != nil {
			return 0, fmt.Errorf("%w: %s is %.32q, want an integer >= 0", errMalformedUsage, name, string(v.val[i]))
		}
		return n, nil
	}
	if u.PromptTokens, err = count(pk, pi); err != nil {
		return Usage{}, true, err
	}
	if u.CompletionTokens, err = count(ck, ci); err != nil {
		return Usage{}, true, err
	}
	if u.PromptTokens > math.MaxUint64-u.CompletionTokens {
		return Usage{}, true, fmt.Errorf("%w: token counts overflow", errMalformedUsage)
	}
	return u, true, nil
}

// The counts usageValues looks for, and their keys.
const (
	usagePrompt = iota
	usageCompletion
	usageInput
	usageOutput
	usageKeys
)

var usageKeyNames = [usageKeys]string{"prompt_tokens", "completion_tokens", "input_tokens", "output_tokens"}

// maxNesting is encoding/json's limit on nesting, which json.Valid enforces.
const maxNesting = 10000

// usageValues validates a JSON document and keeps the raw values of the
// usage counts at the top level of its object.
type usageValues struct {
	b     []byte
	i     int
	depth int
	has   [usageKeys]bool
	val   [usageKeys][]byte
}

// scan reports whether raw, which starts with '{', is valid JSON, and
// records the counts found at its top level.
func (v *usageValues) scan(raw []byte) bool {
	v.b, v.i, v.depth = raw, 1, 1
	v.space()
	if v.i < len(v.b) && v.b[v.i] == '}' {
		v.i++
	} else {
		for {
			k0 := v.i
			if !v.str() {
				return false
			}
			key := v.b[k0+1 : v.i-1]
			v.space()
			if v.i >= len(v.b) || v.b[v.i] != ':' {
				return false
			}
			v.i++
			v.space()
			v0 := v.i
			if !v.value() {
				return false
			}
			if k := usageKey(key); k >= 0 {
				v.has[k], v.val[k] = true, v.b[v0:v.i]
			}
			v.space()
			if v.i >= len(v.b) {
				return false
			}
			c := v.b[v.i]
			v.i++
			if c == '}' {
				break
			}
			if c != ',' {
				return false
			}
			v.space()
		}
	}
	v.space()
	return v.i == len(v.b)
}

// usageKey is the index in usageKeyNames of the raw key (between quotes),
// or -1, compared as topValue compares keys.
func usageKey(key []byte) int {
	if bytes.IndexByte(key, '\\') < 0 {
		switch string(key) {
		case "prompt_tokens":
			return usagePrompt
		case "completion_tokens":
			return usageCompletion
		case "input_tokens":
			return usageInput
		case "output_tokens":
			return usageOutput
		}
		return -1
	}
	if len(key) > maxKey { // topValue keeps no longer key
		return -1
	}
	for k, name := range usageKeyNames {
		if keyIs(key, name) {
			return k
		}
	}
	return -1
}

func (v *usageValues) space() {
	for v.i < len(v.b) && isSpace(v.b[v.i]) {
		v.i++
	}
}

// value reads one value at v.i (no blanks before it).
func (v *usageValues) value() bool {
	if v.i >= len(v.b) {
		return false
	}
	switch c := v.b[v.i]; c {
	case '"':
		return v.str()
	case '{', '[':
		return v.composite(c)
	case 't':
		return v.literal("true")
	case 'f':
		return v.literal("false")
	case 'n':
		return v.literal("null")
	default:
		return v.number()
	}
}

// composite reads an object or array nested in the top-level object.
func (v *usageValues) composite(open byte) bool {
	v.depth++
	if v.depth > maxNesting {
		return false
	}
	v.i++
	v.space()
	closer := byte(']')
	if open == '{' {
		closer = '}'
	}
	if v.i < len(v.b) && v.b[v.i] == closer {
		v.i++
		v.depth--
		return true
	}
	for {
		if open == '{' {
			if !v.str() {
				return false
			}
			v.space()
			if v.i >= len(v.b) || v.b[v.i] != ':' {
				return false
			}
			v.i++
			v.space()
		}
		if !v.value() {
			return false
		}
		v.space()
		if v.i >= len(v.b) {
			return false
		}
		c := v.b[v.i]
		v.i++
		if c == closer {
			v.depth--
			return true
		}
		if c != ',' {
			return false
		}
		v.space()
	}
}

func (v *usageValues) literal(lit string) bool {
	if !bytes.HasPrefix(v.b[v.i:], []byte(lit)) {
		return false
	}
	v.i += len(lit)
	return true
}

// str reads a string at v.i, which must start it.
func (v *usageValues) str() bool {
	if v.i >= len(v.b) || v.b[v.i] != '"' {
		return false
	}
	for v.i++; v.i < len(v.b); v.i++ {
		switch c := v.b[v.i]; {
		case c == '"':
			v.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			v.i++
			if v.i >= len(v.b) {
				return false
			}
			switch v.b[v.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(v.b)-v.i <= 4 {
					return false
				}
				for _, h := range v.b[v.i+1 : v.i+5] {
					if !isHex(h) {
						return false
					}
				}
				v.i += 4
			default:
				return false
			}
		}
	}
	return false
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// number reads a JSON number at v.i.
func (v *usageValues) number() bool {
	b, i := v.b, v.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	v.i = i
	return true
}

// parseCount reads a JSON integer >= 0 without allocating.
func parseCount(v []byte) (uint64, error) {
	if len(v) == 0 || len(v) > 20 {
		return 0, strconv.ErrSyntax
	}
	var n uint64
	for i, c := range v {
		if c < '0' || c > '9' || (i == 1 && v[0] == '0') {
			return 0, strconv.ErrSyntax
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, strconv.ErrRange
		}
		n = n*10 + d
	}
	return n, nil
}
