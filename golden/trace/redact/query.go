package redact

import (
	"bytes"
	"net/url"
	"strings"
	"unsafe"
)

// QueryDefaults are the query parameters whose values are credentials,
// redacted wherever a string of an event or a line of text holds one in a
// URL's query ("?key=...", "&access_token=..."), unless a setting, loudly
// named, turns redaction off. Names are lower case and match in any ASCII
// case.
var QueryDefaults = []Header{
	{"key", "Google API keys in the query: Gemini's generateContent?key=..., the Maps and YouTube APIs"},
	{"api_key", "API keys in the query, as many APIs and gateways take them"},
	{"apikey", "API keys in the query (the same, another spelling)"},
	{"api-key", "API keys in the query (Azure's header name, also taken in the query)"},
	{"access_token", "OAuth 2.0 bearer tokens sent in the URI query (RFC 6750 2.3)"},
	{"id_token", "OpenID Connect ID tokens returned in a redirect's query"},
	{"refresh_token", "OAuth 2.0 refresh tokens (RFC 6749 6)"},
	{"token", "tokens in the query: WebSocket and download links, webhook callbacks"},
	{"client_secret", "OAuth 2.0 client secrets (RFC 6749 2.3.1)"},
	{"code", "OAuth 2.0 authorization codes at a login callback (an oidc policy's redirect; RFC 6749 4.1.2)"},
	{"password", "passwords in the query"},
	{"sig", "Azure shared access signatures (SAS): the signature that grants the access"},
	{"x-amz-signature", "AWS SigV4 presigned URLs: the signature that grants the access"},
	{"x-amz-security-token", "AWS presigned URLs made with temporary credentials: their session token"},
}

// SensitiveQuery reports whether the query parameter name (any ASCII
// case) is one r redacts.
func (r *Redactor) SensitiveQuery(name string) bool {
	if r == nil || len(name) > maxQueryName || r.queryLens&(1<<len(name)) == 0 {
		return false // most names, by their length
	}
	var buf [maxQueryName]byte
	for i := 0; i < len(name); i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	_, ok := r.query[string(buf[:len(name)])]
	return ok
}

// maxQueryName bounds the names of query parameters r redacts (a bit of
// Redactor.queryLens each).
const maxQueryName = 63

// eachQueryValue calls f with the start and end in s of the value of each
// query parameter r redacts: wherever s holds "?name=value" or
// "&name=value" with name (letters, digits, "-" and "_") one of r's. The
// value runs to the next "&", "#", white space, quote or angle bracket;
// an empty one, or a marker, is passed over.
func (r *Redactor) eachQueryValue(s string, f func(start, end int)) {
	for i := 0; ; {
		start, end := r.nextQueryValue(s, i)
		if start < 0 {
			return
		}
		f(start, end)
		i = end
	}
}

// nextQueryValue is the first value eachQueryValue finds in s[from:], as
// its start and end in s; -1, -1 when there is none.
func (r *Redactor) nextQueryValue(s string, from int) (start, end int) {
	if len(r.query) == 0 {
		return -1, -1
	}
	for i := from; i < len(s); {
		k := strings.IndexByte(s[i:], '=')
		if k < 0 {
			break
		}
		eq := i + k
		i = eq + 1
		j := eq
		for j > 0 && isNameByte(s[j-1]) {
			j--
		}
		if j == eq || j == 0 || s[j-1] != '?' && s[j-1] != '&' || !r.SensitiveQuery(s[j:eq]) {
			continue
		}
		end := eq + 1
		for end < len(s) && !endsQueryValue(s[end]) {
			end++
		}
		if end > eq+1 {
			return eq + 1, end
		}
	}
	return -1, -1
}

// endsQueryValue reports whether c ends a query value (or starts a
// marker, which is no value to redact again).
func endsQueryValue(c byte) bool {
	switch c {
	case '&', '#', ' ', '\t', '\r', '\n', '"', '\'', '<', '>':
		return true
	}
	return false
}

// hasQueryValue reports whether s holds a value eachQueryValue finds.
func (r *Redactor) hasQueryValue(s string) bool {
	start, _ := r.nextQueryValue(s, 0)
	return start >= 0
}

// addQuerySecrets adds to s each value of a credential query parameter in
// str, and its percent-decoded form when that differs.
func (r *Redactor) addQuerySecrets(str string, s *Secrets) {
	r.eachQueryValue(str, func(start, end int) {
		v := str[start:end]
		s.Add(v)
		if dv, err := url.QueryUnescape(v); err == nil && dv != v {
			s.Add(dv)
		}
	})
}

// redactQuery returns str with the value of each credential query
// parameter replaced by its marker, and whether any was.
func (r *Redactor) redactQuery(str string) (string, bool) {
	var b []byte
	last := 0
	r.eachQueryValue(str, func(start, end int) {
		b = append(b, str[last:start]...)
		b = r.AppendMarker(b, str[start:end])
		last = end
	})
	if b == nil {
		return str, false
	}
	return string(append(b, str[last:]...)), true
}

// mayHoldQueryValue reports whether the JSON text src may hold, in one of
// its strings, a value eachQueryValue finds: false only when no "=" of it,
// written as it is, follows a name r redacts after "?", "&" or "\u0026",
// and no "=" is escaped, nor a name or what stands before it (those are
// read in each string, decoded, by the caller). Most events of a trace,
// with a "=" or not, are passed over by it without reading their strings.
// escapes says whether src may hold an escaped "=" (appendParsed knows
// its escapes are only those of <, > and &).
func (r *Redactor) mayHoldQueryValue(src []byte, escapes bool) bool {
	if len(r.query) == 0 {
		return false
	}
	if escapes && bytes.IndexByte(src, '\\') >= 0 && (bytes.Contains(src, []byte(`\u003d`)) || bytes.Contains(src, []byte(`\u003D`))) {
		return true
	}
	for i := 0; i < len(src); {
		k := bytes.IndexByte(src[i:], '=')
		if k < 0 {
			return false
		}
		eq := i + k
		i = eq + 1
		j := eq
		for j > 0 && isNameByte(src[j-1]) {
			j--
		}
		amp := false
		if j > 0 && src[j-1] == '\\' {
			if !bytes.HasPrefix(src[j:eq], []byte("u0026")) {
				return true // an escape in the name, or before it
			}
			j, amp = j+len("u0026"), true // "\u0026name="
		}
		if j == eq || j == 0 || !amp && src[j-1] != '?' && src[j-1] != '&' {
			continue
		}
		if r.SensitiveQuery(unsafe.String(&src[j], eq-j)) {
			return true
		}
	}
	return false
}
