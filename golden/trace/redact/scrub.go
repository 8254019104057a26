package redact

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// MinSubstring is the length from which a secret is scrubbed wherever it
// occurs inside a string; a shorter one only where a whole string is the
// secret (a 3-byte key found inside every path would destroy a trace).
// The headers that carry a credential are redacted whatever its length.
const MinSubstring = 8

// Secrets are the credentials of one request (or of one run: the suite
// keeps every credential it plants), to scrub wherever they turn up. The
// zero value is empty and ready; it is not safe for concurrent use.
type Secrets struct {
	vals []string // sorted by length, then bytes
}

// Add keeps v (not empty, not a marker).
func (s *Secrets) Add(v string) {
	if v == "" || IsMarker(v) {
		return
	}
	i, found := slices.BinarySearchFunc(s.vals, v, cmpSecret)
	if !found {
		s.vals = slices.Insert(s.vals, i, v)
	}
}

// cmpSecret orders secrets shortest first: the credential inside a value
// ("sk-1" in "Bearer sk-1") is replaced before the whole value, so that
// the scheme stays readable wherever the value turns up.
func cmpSecret(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// AddHeader keeps the credentials of a value of the sensitive header name
// (Credentials).
func (s *Secrets) AddHeader(name, value string) { Credentials(name, value, s.Add) }

// Len is how many secrets s holds.
func (s *Secrets) Len() int { return len(s.vals) }

// Values are the secrets s holds, shortest first.
func (s *Secrets) Values() []string { return slices.Clone(s.vals) }

// Reset forgets every secret, keeping the memory.
func (s *Secrets) Reset() { clear(s.vals); s.vals = s.vals[:0] }

// Scrub returns str with each secret of s replaced by its marker, and
// whether anything was.
func (r *Redactor) Scrub(str string, s *Secrets) (string, bool) {
	if s == nil || len(s.vals) == 0 || str == "" {
		return str, false
	}
	if IsMarker(str) {
		return str, false
	}
	changed := false
	for _, v := range s.vals {
		if len(v) < MinSubstring {
			if str == v {
				return r.MarkerOf(v), true
			}
			continue
		}
		if len(v) > len(str) || !strings.Contains(str, v) {
			continue
		}
		var b strings.Builder
		m := r.MarkerOf(v)
		for {
			i := strings.Index(str, v)
			if i < 0 {
				b.WriteString(str)
				break
			}
			b.WriteString(str[:i])
			b.WriteString(m)
			str = str[i+len(v):]
		}
		str, changed = b.String(), true
	}
	return str, changed
}

// AppendScrubbedJSON appends the JSON text src to dst with each secret of
// s that a string of it holds (key or value) replaced by its marker, and
// reports whether anything was. Everything else is copied byte for byte;
// a string that changes is written again as encoding/json writes it.
func (r *Redactor) AppendScrubbedJSON(dst, src []byte, s *Secrets) ([]byte, bool) {
	return r.appendJSON(dst, src, s, false, false)
}

// AppendEvent appends the trace event src (JSON) to dst redacted: the
// value of every sensitive header in any "headers" object of it (a
// snapshot's request and response headers, and wherever a newer proxy
// puts headers), and of every credential query parameter in a URL a
// string of it holds (a snapshot's uri and pathAndQuery), then every
// secret of s, and of those, wherever else a string of the event holds it.
// Those credentials are added to s, so that the events of the same
// request after this one are scrubbed of them too. Nothing changed: dst
// gets src byte for byte, and false. src need not be valid JSON: what is
// not a string is copied.
func (r *Redactor) AppendEvent(dst, src []byte, s *Secrets) ([]byte, bool) {
	return r.appendJSON(dst, src, s, true, false)
}

// CollectEvent adds to s the credentials the sensitive headers of the
// event src show, the credential query parameters its strings hold, and
// the credentials its effectivePolicy holds (what AppendEvent would
// redact), changing nothing.
func (r *Redactor) CollectEvent(src []byte, s *Secrets) {
	r.collect(src, s, false)
}

// collect is CollectEvent; with config, src is a config dump, every
// string of it read as a config's.
func (r *Redactor) collect(src []byte, s *Secrets, config bool) {
	query := r.mayHoldQueryValue(src, true)
	walk(src, config, func(t token) {
		switch {
		case t.config:
			r.collectConfig(t, t.text(src), s)
			if query {
				r.addQuerySecrets(t.text(src), s)
			}
		case t.header != "" && r.Sensitive(t.header):
			Credentials(t.header, t.text(src), s.Add)
		case query:
			r.addQuerySecrets(t.text(src), s)
		}
	})
}

// appendJSON is AppendScrubbedJSON, and with headers, AppendEvent; with
// config too, AppendConfig.
func (r *Redactor) appendJSON(dst, src []byte, s *Secrets, headers, config bool) ([]byte, bool) {
	if headers {
		r.collect(src, s, config)
	}
	if (s == nil || len(s.vals) == 0) && !headers {
		return append(dst, src...), false
	}
	at, changed := len(dst), false
	last := 0
	query := headers && r.mayHoldQueryValue(src, true)
	walk(src, headers && config, func(t token) {
		v := t.text(src)
		var out string
		var ok bool
		if headers && t.config {
			if out, ok = r.configValue(t, v); ok {
				v = out
			}
		}
		if headers && !t.config && t.header != "" && r.Sensitive(t.header) {
			// What the value keeps (a cookie's name, a scheme) is
			// scrubbed of secrets too.
			var scrubbed bool
			out, scrubbed = r.Scrub(r.Value(t.header, v), s)
			ok = scrubbed || out != v
		} else {
			if query {
				// a credential query parameter, whatever its length
				var q bool
				v, q = r.redactQuery(v)
				ok = ok || q
			}
			var scrubbed bool
			out, scrubbed = r.Scrub(v, s)
			ok = ok || scrubbed
		}
		if !ok {
			return
		}
		dst = append(dst, src[last:t.start]...)
		dst = appendQuoted(dst, out, r.escapeHTML)
		last = t.end
		changed = true
	})
	if !changed {
		return append(dst[:at], src...), false
	}
	return append(dst, src[last:]...), true
}

// token is one JSON string of a text: src[start:end] with its quotes;
// header is the name of the header it is a value of, when it is one (a
// string, or a string of an array, that is the value of a member of an
// object that is the value of a member "headers"). config says the string
// stands in a config (a config dump, or an event's effectivePolicy):
// header is then also the name of the member it is the value of, or the
// name of the [name, value] pair it ends; field says it is a credential
// whole (FieldDefaults, KeyHolders).
type token struct {
	start, end int
	escaped    bool
	header     string
	config     bool
	field      bool
	// query: header names a query parameter (a route's query match).
	query bool
}

// text is the string t stands for (its raw bytes when it cannot be
// decoded: a cut or invalid string).
func (t token) text(src []byte) string {
	raw := src[t.start+1 : t.end]
	if t.end-t.start >= 2 && src[t.end-1] == '"' {
		raw = src[t.start+1 : t.end-1]
	}
	if !t.escaped {
		return string(raw)
	}
	var s string
	if err := json.Unmarshal(src[t.start:t.end], &s); err != nil {
		return string(raw)
	}
	return s
}

// frame is one open object or array of walk.
type frame struct {
	object    bool
	expectKey bool
	key       string // the current member's key (objects)
	headers   bool   // an object that is the value of a member "headers"
	header    string // an array that is a header's value: its name
	// policies: the current member is effectivePolicy, as written.
	policies bool
	// config: the object or array stands in a config; cred: within a
	// KeyHolder; field: an array whose strings are credentials.
	config, cred, field bool
	// pair: an array within an array, which may be a [name, value]
	// pair (a list of them: a header modifier's, as the reference
	// writes it); strings counts its strings, up to 2, first is the
	// first of them.
	pair    bool
	strings int
	first   string
	// nameOf: an object of a config with a member "name" (a string),
	// found ahead: {name, value} says a header's value, as a route's
	// header match and a modifier may write it. as: an object or array of
	// a config that is such a value, or within one: the header's name.
	nameOf, as string
	// query: an array of a config that is the value of a member "query"
	// (a route's query matches), or an object of one; asQuery: as names
	// a query parameter.
	query, asQuery bool
}

// valueOf is the name of the header (or, with query, the query
// parameter) the current member's value is a value of, if any: the
// frame's own (as), or, for the member "value" of a {name, value}
// object, its name.
func (fr *frame) valueOf() (name string, query bool) {
	if fr.as != "" {
		return fr.as, fr.asQuery
	}
	if fr.nameOf != "" && fr.key == "value" {
		return fr.nameOf, fr.query
	}
	return "", false
}

// maxLook bounds how far walk looks ahead in an object of a config for
// its member "name": written first, or among the first, where a name is
// written at all. A bound keeps nested objects from each reading all
// that follows them.
const maxLook = 4 << 10

// memberName is the string value of the member "name" of the object that
// opens at src[i], when its first maxLook bytes hold one; else "".
func memberName(src []byte, i int) string {
	end := min(len(src), i+maxLook)
	depth, expectKey, isName := 0, true, false
	for j := i; j < end; j++ {
		switch src[j] {
		case '"':
			t := token{start: j}
			k := j + 1
			for k < end && src[k] != '"' {
				if src[k] == '\\' {
					t.escaped = true
					k++
				}
				k++
			}
			if k >= end {
				return ""
			}
			t.end = k + 1
			if depth == 1 {
				if expectKey {
					isName, expectKey = !t.escaped && string(src[j+1:k]) == "name", false
				} else if isName {
					return t.text(src)
				}
			}
			j = k
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return ""
			}
		case ',':
			if depth == 1 {
				expectKey, isName = true, false
			}
		}
	}
	return ""
}

// maxWalkDepth bounds the nesting walk follows: a trace event nests a
// handful deep, and a hostile one a million deep must cost no memory (a
// frame per level was 48 MB a walk). Deeper, strings are still read and
// scrubbed of secrets; only a headers object that deep goes unrecognised.
const maxWalkDepth = 64

// walk calls f with each string of the JSON text src, in order, telling
// header values apart (token.header), and the strings of a config (all of
// src with config; else those of an effectivePolicy member's value) with
// their credentials (token.config, token.field). It is a tolerant lexer:
// what is not JSON is skipped, and nesting is followed by brackets alone.
func walk(src []byte, config bool, f func(token)) {
	var stackArr [16]frame
	stack := stackArr[:0]
	over := 0 // levels past maxWalkDepth, not kept
	top := func() *frame {
		if len(stack) == 0 || over > 0 {
			return nil
		}
		return &stack[len(stack)-1]
	}
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case '"':
			t := token{start: i}
			j := i + 1
			for j < len(src) && src[j] != '"' {
				if src[j] == '\\' {
					t.escaped = true
					j++
				}
				j++
			}
			t.end = min(j+1, len(src))
			fr := top()
			switch {
			case fr != nil && fr.object && fr.expectKey:
				fr.key = t.text(src)
				fr.expectKey = false
				fr.policies = !t.escaped && t.end-t.start == len(policyMember)+2 && src[t.end-1] == '"' && string(src[t.start+1:t.end-1]) == policyMember
			case fr != nil && fr.object && fr.headers:
				t.header = fr.key
			case fr != nil && fr.object && fr.config:
				t.config, t.header = true, fr.key
				if name, query := fr.valueOf(); name != "" {
					t.header, t.query = name, query
				}
				t.field = credentialMember(fr.key, fr.cred)
			case fr != nil && !fr.object:
				t.header = fr.header
				if fr.config {
					t.query = fr.asQuery
					t.config, t.field = true, fr.field
					if fr.pair && fr.strings == 1 && t.header == "" && closes(src, t.end) {
						t.header = fr.first // a [name, value] pair
					}
					if fr.strings == 0 {
						fr.first = t.text(src)
					}
					fr.strings = min(fr.strings+1, 2)
				}
			case fr == nil && config && len(stack) == 0 && over == 0:
				t.config = true
			}
			f(t)
			i = t.end - 1
		case '{', '[':
			n := frame{object: c == '{', expectKey: c == '{', config: config && len(stack) == 0}
			if fr := top(); fr != nil {
				n.config, n.cred = fr.config, fr.cred
				if fr.object && !fr.expectKey {
					n.headers = c == '{' && fr.key == "headers"
					if c == '[' && fr.headers {
						n.header = fr.key
					}
					n.config = n.config || fr.policies
					if fr.config {
						n.cred = n.cred || inSet(holderNames, fr.key)
						n.field = c == '[' && credentialMember(fr.key, fr.cred)
						n.as, n.asQuery = fr.valueOf()
						n.query = c == '[' && fr.key == "query"
					}
				} else if !fr.object {
					n.field = c == '[' && fr.field
					n.pair = c == '[' // of a list of pairs
					fr.strings = 2    // no pair
					n.as, n.asQuery = fr.as, fr.asQuery
					n.query = c == '{' && fr.query && fr.config
				}
				if c == '[' && n.as != "" {
					n.header = n.as
				}
			}
			if n.object && n.config && len(stack) < maxWalkDepth {
				n.nameOf = memberName(src, i)
			}
			if len(stack) < maxWalkDepth {
				stack = append(stack, n)
			} else {
				over++
			}
		case '}', ']':
			switch {
			case over > 0:
				over--
			case len(stack) > 0:
				stack = stack[:len(stack)-1]
			}
		case ',':
			if fr := top(); fr != nil && fr.object {
				fr.expectKey = true
			}
		}
	}
}

// closes reports whether the array a string ended before src[i] ends
// after it.
func closes(src []byte, i int) bool {
	i = skipWS(src, i)
	return i < len(src) && src[i] == ']'
}

// appendQuoted appends s as a JSON string, escaped as encoding/json
// escapes it with SetEscapeHTML(false) (invalid UTF-8 as \ufffd), so that
// a marker reads "<redacted:...>" in the raw text, as the reference's
// serializer writes its own; with html, as json.Marshal escapes it (<, >
// and & too).
func appendQuoted(b []byte, s string, html bool) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\b':
				b = append(b, '\\', 'b')
			case c == '\f':
				b = append(b, '\\', 'f')
			case c < 0x20, html && (c == '<' || c == '>' || c == '&'):
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
