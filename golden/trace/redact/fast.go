package redact

import (
	"bytes"
	"slices"
	"strings"
	"unsafe"

	"github.com/gwdiag/gwdiag/golden/trace/jsonscan"
)

// names is what a Stream's fast path knows of its Redactor's names, to
// pass over a string that cannot be one with a few comparisons: their
// lengths, first and last bytes (both cases). Sensitive folds a name
// with strings.ToLower, which folds two runes into ASCII: the Kelvin sign
// (3 bytes, to "k") and the dotted capital I (2 bytes, to "i"); the
// filters hold for a string without them, and one with them (rare) is
// looked up whatever its length, up to three times the longest name.
type names struct {
	none     bool // no names: no header is redacted
	min, max int
	lens     [65]bool
	first    [256]bool
	last     [256]bool
	// off: a name is not ASCII, or longer than lens knows: the fast
	// path is not taken.
	off bool
}

func namesOf(r *Redactor) *names {
	n := &names{none: len(r.names) == 0, min: -1}
	for k := range r.names {
		if k == "" || len(k) >= len(n.lens) {
			n.off = true
			continue
		}
		for i := 0; i < len(k); i++ {
			n.off = n.off || k[i] >= 0x80
		}
		if n.min < 0 || len(k) < n.min {
			n.min = len(k)
		}
		n.max = max(n.max, len(k))
		n.lens[len(k)] = true
		f, l := k[0], k[len(k)-1] // lower case, as every name
		n.first[f], n.first[upper(f)] = true, true
		n.last[l], n.last[upper(l)] = true, true
	}
	return n
}

func upper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}

// mayRedact reports whether AppendEvent could change src, or learn a
// credential from it, with the secrets s (nil: none). It says false only
// when no string of src, key or value, is the name of a header r redacts
// followed by a value (so no member of a "headers" object is one), and
// none holds a secret of s. The strings are found as walk finds them (a
// quote, then up to the next quote not escaped), so whatever walk makes
// of src, the strings it reads are among them, and decoded as it decodes
// them (as encoding/json does); what encoding/json refuses (a control
// byte, an unknown escape), of which walk keeps the raw bytes, says true.
// A name followed by ":null," or ":null}" (the effectivePolicy's
// "authorization":null) gives walk no value for it. A string holding a
// credential query parameter (redactQuery's) says true too. A secret long
// enough to be scrubbed inside a string is looked for in the whole of src,
// a shorter one among the strings. It allocates nothing once buf has grown
// (a string with escapes is decoded into it): most events of a stream
// have no credential header and hold no secret of their request, and
// an event without a "headers" object is passed over without reading its
// strings. TestMayRedact and FuzzMayRedact hold it to AppendEvent.
func (n *names) mayRedact(r *Redactor, src []byte, s *Secrets, buf *[]byte) bool {
	if n.off {
		return true
	}
	var secrets, short []string // short: only a whole string is replaced
	if s != nil {
		secrets, short = s.vals, s.vals
		for i, v := range s.vals {
			if len(v) >= MinSubstring {
				short = s.vals[:i]
				break
			}
		}
		for _, v := range secrets[len(short):] {
			if bytes.Contains(src, []byte(v)) {
				return true
			}
		}
	}
	// A credential query parameter: looked for in each string, decoded,
	// when src may hold one.
	// A credential of the route's policies (a proxy that does not redact
	// its config): looked for by reading the effectivePolicy's strings.
	if r.mayHoldPolicies(src, nil) && r.hasConfigCredential(src, false) {
		return true
	}
	query := r.mayHoldQueryValue(src, true)
	if len(secrets) == 0 && (n.none || noHeaders(src)) && !query {
		return false // nothing to look for
	}
	folds := bytes.IndexByte(src, 0xE2) >= 0 || bytes.IndexByte(src, 0xC4) >= 0
	// qp and bp are the next quote and backslash at or after j
	// (len(src): none), kept from string to string: each byte of src is
	// looked at once by IndexByte.
	qp, bp := -1, -1
	next := func(c byte, from int) int {
		if k := bytes.IndexByte(src[from:], c); k >= 0 {
			return from + k
		}
		return len(src)
	}
	for j := 0; j < len(src); {
		if qp < j {
			qp = next('"', j)
		}
		if qp == len(src) {
			return false
		}
		start := qp + 1
		// walk's rule: a backslash takes the byte after it; the first
		// quote not taken ends the string.
		end, escaped, cut := start, false, false
		for {
			if qp < end {
				qp = next('"', end)
			}
			if bp < end {
				bp = next('\\', end)
			}
			if bp < qp {
				escaped, end = true, bp+2
				if end >= len(src) {
					end, cut = len(src), true
					break
				}
				continue
			}
			end, cut = qp, qp == len(src)
			break
		}
		j = end + 1
		str := src[start:end]
		if escaped {
			var ok bool
			if *buf, ok = jsonscan.AppendUnquoted((*buf)[:0], unsafe.String(unsafe.SliceData(str), len(str))); !ok || cut {
				// walk keeps such a string raw, or drops its last byte
				return true
			}
			str = *buf
			for _, v := range secrets[len(short):] {
				if bytes.Contains(str, []byte(v)) {
					return true
				}
			}
		}
		if n.may(str, folds) && r.sensitiveRaw(str) && !nullAfter(src, end) {
			return true
		}
		if query && len(str) > 0 && r.hasQueryValue(unsafe.String(unsafe.SliceData(str), len(str))) {
			return true
		}
		for _, v := range short {
			if len(v) == len(str) && string(str) == v {
				return true
			}
		}
	}
	return false
}

// noHeaders reports whether walk can find no "headers" object in src:
// no string of it is "headers" (written as it is, or with \u escapes:
// the other escapes make no letter). Most events of a trace (all but the
// snapshots) are passed over by this one search.
func noHeaders(src []byte) bool {
	return !bytes.Contains(src, []byte("headers")) && !bytes.Contains(src, []byte(`\u`))
}

// may reports whether str may be a name: see names.
func (n *names) may(str []byte, folds bool) bool {
	l := len(str)
	switch {
	case n.none || l < n.min:
		return false
	case folds:
		return l <= 3*n.max
	default:
		return l <= n.max && n.lens[l] && n.first[str[0]] && n.last[str[l-1]]
	}
}

// nullAfter reports whether the string closed at src[end] is followed by
// a null that ends its member: ":null," or ":null}".
func nullAfter(src []byte, end int) bool {
	rest := src[min(end+1, len(src)):]
	return bytes.HasPrefix(rest, []byte(":null,")) || bytes.HasPrefix(rest, []byte(":null}"))
}

// sensitiveRaw is Sensitive on a name's bytes, allocating only for a
// string that is not ASCII.
func (r *Redactor) sensitiveRaw(b []byte) bool {
	var buf [64]byte
	if len(b) > len(buf) {
		return r.Sensitive(string(b))
	}
	for i, c := range b {
		switch {
		case c >= 0x80:
			return r.Sensitive(string(b))
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	_, ok := r.names[string(buf[:len(b)])]
	return ok
}

// maxClean bounds the objects appendParsed remembers.
const maxClean = 4 << 10

// seen are the objects appendParsed found with nothing to redact, the
// last of each kind: a proxy repeats them, byte for byte, in the events
// of a request (its headers in every snapshot) and from request to
// request (an effectivePolicy with no policy), and one comparison then
// passes them over.
type seen struct {
	headers  []byte // a "headers" object
	policies []byte // an effectivePolicy object whose members are null
}

// span is a string of an event that a redaction may change: its content
// is src[start:end] (between its quotes); name is the header it is a
// value of, when that header is redacted.
type span struct {
	start, end int
	name       string
}

// appendParsed is AppendEvent for src valid JSON without a backslash but
// json.Marshal's escapes of <, > and &, in which every quote opens or
// closes a string and a string is its bytes (those escapes decoded):
// the strings it may change are found by searching src rather than by
// reading each (the "headers" objects by their key, the secrets by their
// bytes), then those are redacted as AppendEvent redacts them. seen
// holds the last headers object found with no member to redact (the
// snapshots of a request most often repeat it, byte for byte) and the
// last effectivePolicy of null members, each then passed over by one
// comparison; mark makes markers. Without whole,
// nothing is appended to dst when nothing changes. ok is false when src
// has another escape, or a secret with <, > or & and escapes: the caller
// redacts it with AppendEvent.
// TestAppendParsed and FuzzAppendParsed hold it to AppendEvent.
func (n *names) appendParsed(r *Redactor, dst, src []byte, s *Secrets, spans *[]span, seen *seen, mark func(string) string, whole bool) (out []byte, changed, ok bool) {
	if n.off {
		return dst, false, false
	}
	// The only escapes taken: json.Marshal's of <, > and & (refproxy
	// writes its markers so, \u003credacted:...\u003e). They leave every
	// quote a string's start or end.
	escapes := false
	for i := 0; ; i += len(`\u003c`) {
		k := bytes.IndexByte(src[i:], '\\')
		if k < 0 {
			break
		}
		if i += k; !htmlEscape(src[i:]) {
			return dst, false, false
		}
		escapes = true
	}
	if r.mayHoldQueryValue(src, false) {
		return dst, false, false // a credential query parameter: AppendEvent's
	}
	if r.mayHoldPolicies(src, &seen.policies) && r.hasConfigCredential(src, false) {
		return dst, false, false // a credential of the route's policies: AppendEvent's
	}
	sp := (*spans)[:0]
	defer func() { *spans = sp[:0] }()
	// The headers objects' members whose names r redacts: their values
	// are redacted whole, and their credentials kept for the rest.
	if !n.none {
		quotes, counted := 0, 0
		for off := 1; off < len(src); {
			// headers" first: a quote starts the search too often.
			i := bytes.Index(src[off:], []byte(`headers"`))
			if i < 0 {
				break
			}
			p := off + i - 1
			off = p + len(`"headers"`)
			if src[p] != '"' {
				continue
			}
			quotes += bytes.Count(src[counted:p], []byte{'"'})
			counted = p
			if quotes%2 != 0 {
				continue // inside a string
			}
			j := skipWS(src, off)
			if j >= len(src) || src[j] != ':' {
				continue // a value, not a key
			}
			if j = skipWS(src, j+1); j >= len(src) || src[j] != '{' {
				continue
			}
			if len(seen.headers) > 0 && bytes.HasPrefix(src[j:], seen.headers) {
				continue // the object of the last snapshot, read already
			}
			before := len(sp)
			var end int
			var good bool
			if sp, end, good = n.headerMembers(r, src, j, sp); !good {
				return dst, false, false // not JSON after all
			}
			if len(sp) == before && end-j <= maxClean {
				seen.headers = append(seen.headers[:0], src[j:end]...)
			}
		}
		for _, t := range sp {
			Credentials(t.name, htmlText(src[t.start:t.end]), s.Add)
		}
	}
	if escapes && s != nil {
		for _, v := range s.vals {
			if strings.ContainsAny(v, "<>&") {
				return dst, false, false // a string may hold it escaped
			}
		}
	}
	// The strings holding a secret (with the credentials just kept).
	if s != nil {
		var good bool
		if sp, good = secretSpans(src, s, sp); !good {
			return dst, false, false // not JSON after all
		}
	}
	if len(sp) == 0 {
		if !whole {
			return dst, false, true
		}
		return append(dst, src...), false, true
	}
	slices.SortFunc(sp, func(a, b span) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return strings.Compare(b.name, a.name) // a header's first
	})
	at, last := len(dst), 0
	for i, t := range sp {
		if i > 0 && t.start == sp[i-1].start {
			continue
		}
		v := htmlText(src[t.start:t.end])
		var o string
		if t.name != "" {
			o = scrubWith(valueWith(t.name, v, mark), s, mark) // as walk's
		} else {
			o = scrubWith(v, s, mark)
		}
		if o == v {
			continue
		}
		dst = append(dst, src[last:t.start-1]...)
		dst = appendQuoted(dst, o, r.escapeHTML)
		last, changed = t.end+1, true
	}
	if !changed {
		if !whole {
			return dst[:at], false, true
		}
		return append(dst[:at], src...), false, true
	}
	return append(dst, src[last:]...), true, true
}

// secretSpans appends to sp the strings of src that hold a secret of s; a
// string left open is no JSON (false).
func secretSpans(src []byte, s *Secrets, sp []span) ([]span, bool) {
	for _, v := range s.vals {
		if strings.ContainsFunc(v, func(c rune) bool { return c == '"' || c == '\\' || c < 0x20 }) {
			continue // no string of src holds one: it would be escaped
		}
		if len(v) < MinSubstring {
			// v" first: a quote starts the search too often.
			q := []byte(v + `"`)
			for off := 1; off < len(src); {
				i := bytes.Index(src[off:], q)
				if i < 0 {
					break
				}
				p := off + i - 1
				off = p + 2
				if src[p] == '"' && bytes.Count(src[:p], []byte{'"'})%2 == 0 {
					sp = append(sp, span{start: p + 1, end: p + 1 + len(v)})
				}
			}
			continue
		}
		for off := 0; ; {
			i := bytes.Index(src[off:], []byte(v))
			if i < 0 {
				break
			}
			p := off + i
			off = p + len(v)
			if bytes.Count(src[:p], []byte{'"'})%2 == 1 {
				start := bytes.LastIndexByte(src[:p], '"') + 1
				e := bytes.IndexByte(src[p+len(v):], '"')
				if e < 0 {
					return sp, false
				}
				end := p + len(v) + e
				sp = append(sp, span{start: start, end: end})
				off = end + 1
			}
		}
	}
	return sp, true
}

// headerMembers adds to sp the values of the members of the object at
// src[at] ('{', a "headers" object) whose names r redacts: a string, or
// each string of an array; a nested object or array holds none (walk
// reads its strings as no header's). end is the index after the object;
// good is false for what is not JSON.
func (n *names) headerMembers(r *Redactor, src []byte, at int, sp []span) ([]span, int, bool) {
	i := skipWS(src, at+1)
	if i < len(src) && src[i] == '}' {
		return sp, i + 1, true
	}
	for i < len(src) {
		if src[i] != '"' {
			return sp, 0, false
		}
		ke := bytes.IndexByte(src[i+1:], '"')
		if ke < 0 {
			return sp, 0, false
		}
		key := src[i+1 : i+1+ke]
		i = skipWS(src, i+2+ke)
		if i >= len(src) || src[i] != ':' {
			return sp, 0, false
		}
		if i = skipWS(src, i+1); i >= len(src) {
			return sp, 0, false
		}
		if bytes.IndexByte(key, '\\') >= 0 {
			key = []byte(htmlText(key))
		}
		name := ""
		if n.may(key, hasHigh(key)) && r.sensitiveRaw(key) {
			name = string(key)
		}
		switch src[i] {
		case '"':
			var ok bool
			if sp, i, ok = stringSpan(src, i, name, sp); !ok {
				return sp, 0, false
			}
		case '[':
			for i = skipWS(src, i+1); i < len(src) && src[i] != ']'; {
				if src[i] == '"' {
					var ok bool
					if sp, i, ok = stringSpan(src, i, name, sp); !ok {
						return sp, 0, false
					}
				} else if e := skipValue(src, i); e <= i {
					return sp, 0, false
				} else {
					i = e
				}
				if i = skipWS(src, i); i < len(src) && src[i] == ',' {
					i = skipWS(src, i+1)
				}
			}
			i++
		default:
			e := skipValue(src, i)
			if e <= i {
				return sp, 0, false
			}
			i = e
		}
		if i = skipWS(src, i); i >= len(src) {
			return sp, 0, false
		}
		switch src[i] {
		case '}':
			return sp, i + 1, true
		case ',':
			i = skipWS(src, i+1)
		default:
			return sp, 0, false
		}
	}
	return sp, 0, false
}

// skipValue returns the index after the JSON value at src[i] (a string
// without escapes, an object or array, or a scalar), or -1.
func skipValue(src []byte, i int) int {
	depth := 0
	for i < len(src) {
		switch c := src[i]; c {
		case '"':
			e := bytes.IndexByte(src[i+1:], '"')
			if e < 0 {
				return -1
			}
			i += e + 2
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // a scalar's end
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	if depth == 0 {
		return i
	}
	return -1
}

// htmlEscape reports whether b starts with one of json.Marshal's escapes
// of <, > and &.
func htmlEscape(b []byte) bool {
	return len(b) >= 6 && b[1] == 'u' && b[2] == '0' && b[3] == '0' &&
		(b[4] == '3' && (b[5] == 'c' || b[5] == 'e') || b[4] == '2' && b[5] == '6')
}

// htmlText is the text of a string's content b whose only escapes are
// htmlEscape's.
func htmlText(b []byte) string {
	i := bytes.IndexByte(b, '\\')
	if i < 0 {
		return string(b)
	}
	out := make([]byte, 0, len(b))
	for ; i >= 0; i = bytes.IndexByte(b, '\\') {
		out = append(out, b[:i]...)
		switch b[i+5] {
		case 'c':
			out = append(out, '<')
		case 'e':
			out = append(out, '>')
		default:
			out = append(out, '&')
		}
		b = b[i+6:]
	}
	return string(append(out, b...))
}

// hasHigh reports whether b has a byte past ASCII.
func hasHigh(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return true
		}
	}
	return false
}

// skipWS returns the index of the first byte at or after i that is not
// stringSpan passes over the string whose opening quote is src[i], to
// its next quote, adding what is between to sp as a value of name where
// name is set. False: no quote closes it.
func stringSpan(src []byte, i int, name string, sp []span) ([]span, int, bool) {
	e := bytes.IndexByte(src[i+1:], '"')
	if e < 0 {
		return sp, i, false
	}
	if name != "" {
		sp = append(sp, span{start: i + 1, end: i + 1 + e, name: name})
	}
	return sp, i + e + 2, true
}

// JSON whitespace.
func skipWS(src []byte, i int) int {
	for i < len(src) && (src[i] == ' ' || src[i] == '\t' || src[i] == '\n' || src[i] == '\r') {
		i++
	}
	return i
}

// valueWith is Redactor.Value with the markers of mark.
func valueWith(name, value string, mark func(string) string) string {
	return string(appendValue(nil, name, value, func(b []byte, s string) []byte { return append(b, mark(s)...) }))
}

// scrubWith is Redactor.Scrub with the markers of mark.
func scrubWith(str string, s *Secrets, mark func(string) string) string {
	if s == nil || len(s.vals) == 0 || str == "" || IsMarker(str) {
		return str
	}
	for _, v := range s.vals {
		if len(v) < MinSubstring {
			if str == v {
				return mark(v)
			}
			continue
		}
		if len(v) <= len(str) && strings.Contains(str, v) {
			str = strings.ReplaceAll(str, v, mark(v))
		}
	}
	return str
}

// markers remembers the markers of the secrets it made them of: a
// credential shows in each of its request's snapshots, and most often in
// many requests. At most maxMarkers; then it starts again.
type markers struct {
	r *Redactor
	m map[string]string
}

const maxMarkers = 1024

func (c *markers) of(secret string) string {
	if m, ok := c.m[secret]; ok {
		return m
	}
	if c.m == nil || len(c.m) >= maxMarkers {
		c.m = make(map[string]string)
	}
	m := c.r.MarkerOf(secret)
	c.m[secret] = m
	return m
}
