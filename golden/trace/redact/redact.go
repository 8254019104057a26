// Package redact keeps credentials out of what a trace carries. It holds
// the one list of headers whose values are credentials (Defaults), how a
// redacted value looks (the header kept, its secret replaced by a keyed
// fingerprint: Redactor.AppendValue), and the scrubbing of a trace event:
// the values of those headers in every headers object of the event, and
// every other place a credential of the same request turns up (a route's
// reason, a rate-limit key, an error: Secrets, Redactor.AppendEvent).
//
// refproxy redacts what it sends; gwdiag redacts what a proxy that does
// not (the reference implementation today) sent, before it prints or
// saves it; the suite redacts everything it writes. All three use this
// package, so a value redacted by one is recognised by the others and left
// as it is (IsMarker).
//
// A fingerprint is HMAC-SHA256 of the secret under a key of the Redactor,
// cut to 12 hex digits: two requests with the same credential show the same
// fingerprint, two with different ones different fingerprints, and without
// the key (random per process unless given) nobody can test a guess.
package redact

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Header is a header whose value is a credential, and why it is one.
type Header struct {
	Name string
	Why  string
}

// Defaults are the headers redacted unless a setting, loudly named, turns
// them off. Names are lower case.
var Defaults = []Header{
	{"authorization", "HTTP authentication (RFC 9110 11.6.2): Bearer tokens and provider API keys (OpenAI, ...), Basic user:password, AWS SigV4 signatures"},
	{"proxy-authorization", "credentials for a proxy (RFC 9110 11.7.2); the reference marks it sensitive on every request with authorization"},
	{"cookie", "session cookies a browser sends (RFC 6265): whoever holds one is logged in"},
	{"set-cookie", "session cookies a backend gives the client (RFC 6265), in response snapshots"},
	{"x-api-key", "API keys: Anthropic's, AWS API Gateway's, and most gateways' own"},
	{"api-key", "Azure OpenAI's API key"},
	{"x-goog-api-key", "Google's API key (Gemini, Vertex express mode)"},
	{"x-amz-security-token", "AWS temporary credentials' session token (Bedrock and SigV4 signed calls)"},
}

// Marker is the reference implementation's redacted value: what it shows
// for a sensitive header, without a fingerprint.
const Marker = "<redacted>"

// markerPrefix starts every marker; a fingerprinted one is
// "<redacted:" + FingerprintDigits hex digits + ">".
const markerPrefix = "<redacted"

// FingerprintDigits is the length of a fingerprint in hex digits (48 bits:
// no two of the credentials one trace or capture holds share one).
const FingerprintDigits = 12

// markerLen is the length of a fingerprinted marker.
const markerLen = len(markerPrefix) + 1 + FingerprintDigits + 1

// IsMarker reports whether s is a redacted value: the reference's Marker,
// or a fingerprint this package made.
func IsMarker(s string) bool {
	if s == Marker {
		return true
	}
	if len(s) != markerLen || !strings.HasPrefix(s, markerPrefix+":") || s[len(s)-1] != '>' {
		return false
	}
	for i := len(markerPrefix) + 1; i < len(s)-1; i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// HasMarker reports whether s holds a redacted value anywhere.
func HasMarker(s string) bool { return strings.Contains(s, markerPrefix) }

// Unfingerprint returns b with every fingerprinted marker replaced by the
// bare Marker: two runs mark one credential with different fingerprints
// (each its own key), so text compared across runs drops them. b itself is
// returned when it holds none.
func Unfingerprint(b []byte) []byte {
	var out []byte
	rest := b
	for {
		i := bytes.Index(rest, []byte(markerPrefix+":"))
		if i < 0 {
			break
		}
		if i+markerLen > len(rest) || !IsMarker(string(rest[i:i+markerLen])) {
			out = append(out, rest[:i+len(markerPrefix)]...)
			rest = rest[i+len(markerPrefix):]
			continue
		}
		out = append(append(out, rest[:i]...), Marker...)
		rest = rest[i+markerLen:]
	}
	if out == nil {
		return b
	}
	return append(out, rest...)
}

// Options configure a Redactor.
type Options struct {
	// Key keys the fingerprints. Empty: 32 random bytes, so that the same
	// credential has another fingerprint in another process.
	Key []byte
	// NoDefaults leaves Defaults out: only Extra is redacted. Whoever sets
	// it should say so loudly (refproxy logs a warning, gwdiag prints one).
	NoDefaults bool
	// Extra are more headers to redact (any case), e.g. the reference's
	// config.sensitiveHeaders or the header an apiKey policy reads.
	Extra []string
	// ExtraQuery are more query parameters to redact (any case), beside
	// QueryDefaults: a credential a service takes in the URL.
	ExtraQuery []string
	// EscapeHTML writes the strings a scrub changes with <, > and &
	// escaped (\u003c, \u003e, \u0026), as json.Marshal writes every
	// string: a writer whose events are json.Marshal's bytes (refproxy)
	// keeps them so. Without it they are written as the reference's
	// serializer writes them, a marker reading "<redacted:...>".
	EscapeHTML bool
}

// Redactor redacts the values of a set of headers and fingerprints
// secrets under one key. It is safe for concurrent use.
type Redactor struct {
	names      map[string]struct{}
	fields     bool                // FieldDefaults and KeyHolders (config.go)
	query      map[string]struct{} // query parameters (query.go)
	queryLens  uint64              // a bit per length of a name of query
	macs       sync.Pool
	key        []byte
	escapeHTML bool
	// made are the fingerprints made under key, shared with the
	// Redactors With makes.
	made *fingerprints
}

// fingerprints remembers the fingerprints a key made, by a 64-bit hash of
// the secret (hash/maphash, seeded at random; never the secret itself,
// which is not kept): a proxy sees the same credentials in request after
// request, and an HMAC costs some 6 000 instructions. Two secrets of the
// same hash and length would share a fingerprint (a wrong name, never a
// secret shown; one chance in 2^64). Bounded: forgotten when full.
type fingerprints struct {
	seed maphash.Seed
	mu   sync.Mutex
	m    map[fingerprintKey][FingerprintDigits]byte
}

type fingerprintKey struct {
	hash uint64
	n    int
}

// maxFingerprints bounds a key's remembered fingerprints.
const maxFingerprints = 4096

// New returns a Redactor for o.
func New(o Options) *Redactor {
	r := &Redactor{names: map[string]struct{}{}, query: map[string]struct{}{}, escapeHTML: o.EscapeHTML, fields: !o.NoDefaults}
	if !o.NoDefaults {
		for _, h := range Defaults {
			r.names[h.Name] = struct{}{}
		}
		for _, h := range QueryDefaults {
			r.query[h.Name] = struct{}{}
		}
	}
	for _, n := range o.Extra {
		if n = strings.ToLower(strings.TrimSpace(n)); n != "" {
			r.names[n] = struct{}{}
		}
	}
	for _, n := range o.ExtraQuery {
		if n = strings.ToLower(strings.TrimSpace(n)); n != "" && len(n) <= maxQueryName {
			r.query[n] = struct{}{}
		}
	}
	for n := range r.query {
		r.queryLens |= 1 << len(n)
	}
	r.key = slices.Clone(o.Key)
	if len(r.key) == 0 {
		r.key = make([]byte, 32)
		if _, err := rand.Read(r.key); err != nil {
			panic("redact: no random key: " + err.Error()) // crypto/rand does not fail on Linux
		}
	}
	r.macs.New = func() any { return &mac{h: hmac.New(sha256.New, r.key)} }
	r.made = &fingerprints{seed: maphash.MakeSeed(), m: map[fingerprintKey][FingerprintDigits]byte{}}
	return r
}

// With returns a Redactor with the same key that also redacts names
// (a config's own list on top of a process's).
func (r *Redactor) With(names ...string) *Redactor {
	n := &Redactor{names: make(map[string]struct{}, len(r.names)+len(names)), fields: r.fields, query: r.query, queryLens: r.queryLens, key: r.key, escapeHTML: r.escapeHTML, made: r.made}
	for k := range r.names {
		n.names[k] = struct{}{}
	}
	for _, k := range names {
		if k = strings.ToLower(strings.TrimSpace(k)); k != "" {
			n.names[k] = struct{}{}
		}
	}
	n.macs.New = func() any { return &mac{h: hmac.New(sha256.New, n.key)} }
	return n
}

// WithQuery returns a Redactor with the same key and headers that also
// redacts the query parameters names (those a config's auth policies read
// a credential from).
func (r *Redactor) WithQuery(names ...string) *Redactor {
	n := r.With()
	n.query = make(map[string]struct{}, len(r.query)+len(names))
	for k := range r.query {
		n.query[k] = struct{}{}
	}
	for _, k := range names {
		if k = strings.ToLower(strings.TrimSpace(k)); k != "" && len(k) <= maxQueryName {
			n.query[k] = struct{}{}
			n.queryLens |= 1 << len(k)
		}
	}
	return n
}

// Names are the headers r redacts, lower case, sorted.
func (r *Redactor) Names() []string {
	out := make([]string, 0, len(r.names))
	for n := range r.names {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Sensitive reports whether the header name (any case) is one r redacts.
func (r *Redactor) Sensitive(name string) bool {
	if r == nil || len(r.names) == 0 {
		return false
	}
	if _, ok := r.names[name]; ok {
		return true
	}
	var buf [64]byte
	if len(name) > len(buf) {
		_, ok := r.names[strings.ToLower(name)]
		return ok
	}
	lower := buf[:0]
	changed := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= utf8.RuneSelf {
			_, ok := r.names[strings.ToLower(name)]
			return ok
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
			changed = true
		}
		lower = append(lower, c)
	}
	if !changed {
		return false
	}
	_, ok := r.names[string(lower)]
	return ok
}

// AppendMarker appends the marker of secret: "<redacted:" + its
// fingerprint + ">".
func (r *Redactor) AppendMarker(b []byte, secret string) []byte {
	b = append(b, markerPrefix+":"...)
	k := fingerprintKey{maphash.String(r.made.seed, secret), len(secret)}
	r.made.mu.Lock()
	hx, ok := r.made.m[k]
	r.made.mu.Unlock()
	if !ok {
		m := r.macs.Get().(*mac)
		m.h.Reset()
		m.in = append(m.in[:0], secret...)
		m.h.Write(m.in)
		m.h.Sum(m.sum[:0])
		hex.Encode(hx[:], m.sum[:FingerprintDigits/2])
		clear(m.in) // no copy of the secret left behind
		if cap(m.in) <= 4<<10 {
			r.macs.Put(m)
		}
		r.made.mu.Lock()
		if len(r.made.m) >= maxFingerprints {
			clear(r.made.m)
		}
		r.made.m[k] = hx
		r.made.mu.Unlock()
	}
	b = append(b, hx[:]...)
	return append(b, '>')
}

// mac is a Redactor's HMAC with the buffers of one fingerprint, reused:
// a fingerprint allocates nothing.
type mac struct {
	h   hash.Hash
	in  []byte
	sum [sha256.Size]byte
}

// MarkerOf is AppendMarker as a string.
func (r *Redactor) MarkerOf(secret string) string { return string(r.AppendMarker(nil, secret)) }

// Value is AppendValue as a string.
func (r *Redactor) Value(name, value string) string {
	return string(r.AppendValue(nil, name, value))
}

// AppendValue appends the redacted form of a value of the sensitive header
// name, keeping what a diagnosis needs and is no secret: the scheme of an
// authorization ("Bearer <redacted:...>"), the names of cookies
// ("session=<redacted:...>; theme=<redacted:...>") and the attributes of
// a set-cookie ("id=<redacted:...>; Path=/; HttpOnly"). Each secret is
// replaced by its marker; a part that already is a marker is kept, so
// redacting twice changes nothing.
func (r *Redactor) AppendValue(b []byte, name, value string) []byte {
	return appendValue(b, name, value, r.AppendMarker)
}

// appendValue is AppendValue with the markers mark appends.
func appendValue(b []byte, name, value string, mark func([]byte, string) []byte) []byte {
	last := 0
	eachSecret(name, value, func(start, end int) {
		b = append(b, value[last:start]...)
		if s := value[start:end]; IsMarker(s) {
			b = append(b, s...)
		} else {
			b = mark(b, s)
		}
		last = end
	})
	return append(b, value[last:]...)
}

// Credentials calls f with each secret a value of the sensitive header
// name holds: the credential of an authorization (after its scheme; of a
// Basic one, also user:password and the password decoded, which a proxy's
// basicAuth policy may quote), the value of each cookie, and the whole
// value; markers are left out, and so are cookie values shorter than
// MinSubstring: a cookie such as theme=dark or a=1 is seldom a credential,
// and a short secret hides every string equal to it, which would turn
// every "1" of a trace into a marker. The cookie headers themselves are
// redacted whatever the length of their values.
func Credentials(name, value string, f func(secret string)) {
	least := 1
	if strings.EqualFold(name, "cookie") || strings.EqualFold(name, "set-cookie") {
		least = MinSubstring
	}
	whole := true
	eachSecret(name, value, func(start, end int) {
		if s := value[start:end]; !IsMarker(s) {
			if len(s) >= least {
				f(s)
			}
			basicDecoded(name, value[:start], s, f)
			whole = whole && !(start == 0 && end == len(value))
		} else {
			whole = false
		}
	})
	if whole && len(value) >= least && !IsMarker(value) && !HasMarker(value) {
		f(value)
	}
}

// basicDecoded calls f with user:password and the password of cred, the
// credential of an authorization after before ("... Basic "), when it is
// Basic's base64 of printable text.
func basicDecoded(name, before, cred string, f func(secret string)) {
	if n := strings.ToLower(name); n != "authorization" && n != "proxy-authorization" {
		return
	}
	if scheme := strings.TrimRight(before, " \t"); len(scheme) < 5 || !strings.EqualFold(scheme[len(scheme)-5:], "basic") {
		return
	}
	b, err := base64.StdEncoding.DecodeString(cred)
	if err != nil || !utf8.Valid(b) || strings.ContainsFunc(string(b), unicode.IsControl) {
		return
	}
	f(string(b))
	if _, pass, ok := strings.Cut(string(b), ":"); ok && pass != "" {
		f(pass)
	}
}

// eachSecret calls f with the byte ranges of value that are secrets, in
// order and not overlapping.
func eachSecret(name, value string, f func(start, end int)) {
	switch strings.ToLower(name) {
	case "authorization", "proxy-authorization":
		eachCredential(value, f)
	case "cookie":
		eachCookie(value, false, f)
	case "set-cookie":
		eachCookie(value, true, f)
	default:
		if value != "" {
			f(0, len(value))
		}
	}
}

// eachCredential: an authorization's credentials after its scheme (RFC
// 9110 11.4: a token, then a space), or the whole value without one.
// Repeated headers a proxy joined with ", " are each redacted.
func eachCredential(value string, f func(start, end int)) {
	for start := 0; start < len(value); {
		end := len(value)
		// A second credential joined by a proxy: ", Scheme ..." (a
		// token68 has no comma; auth-params do, and stay in one part).
		if i := nextJoined(value, start); i >= 0 {
			end = i
		}
		part := value[start:end]
		lead := len(part) - len(strings.TrimLeft(part, " \t"))
		s := start + lead
		if sp := schemeEnd(value[s:end]); sp > 0 {
			s += sp
			for s < end && (value[s] == ' ' || value[s] == '\t') {
				s++
			}
		}
		e := end
		for e > s && (value[e-1] == ' ' || value[e-1] == '\t') {
			e--
		}
		if e > s {
			f(s, e)
		}
		if end == len(value) {
			return
		}
		start = end + 1
	}
}

// schemeEnd is the length of an auth scheme that starts part (a token of
// letters, digits and "-", then a space), or 0.
func schemeEnd(part string) int {
	for i := 0; i < len(part); i++ {
		c := part[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		case c == ' ' && i > 0:
			return i
		default:
			return 0
		}
	}
	return 0
}

// nextJoined is the index of the first comma after from that starts
// another credential (", Bearer x": a scheme, then a space), or -1; the
// commas between auth-params (", realm=...") do not.
func nextJoined(value string, from int) int {
	for at := from; ; at++ {
		i := strings.IndexByte(value[at:], ',')
		if i < 0 {
			return -1
		}
		at += i
		if schemeEnd(strings.TrimLeft(value[at+1:], " ")) > 0 {
			return at
		}
	}
}

// setCookieAttrs are the attributes of a set-cookie (RFC 6265 5.2, and
// the later SameSite, Priority and Partitioned): their values are no
// secret.
var setCookieAttrs = map[string]bool{
	"expires": true, "max-age": true, "domain": true, "path": true, "secure": true,
	"httponly": true, "samesite": true, "priority": true, "partitioned": true,
}

// eachCookie: each cookie's value (name=value pairs separated by ";", and
// by "," where a proxy joined repeated headers); of a set-cookie, the
// attributes are kept, and so is the rest of an Expires date ("Wed, 21
// Oct 2015 07:28:00 GMT" has a comma). A piece that is no pair is a secret.
func eachCookie(value string, set bool, f func(start, end int)) {
	inDate := false
	for start := 0; start <= len(value); {
		end := strings.IndexAny(value[start:], ";,")
		sep := byte(0)
		if end < 0 {
			end = len(value)
		} else {
			end += start
			sep = value[end]
		}
		s, e := start, end
		for s < e && (value[s] == ' ' || value[s] == '\t') {
			s++
		}
		for e > s && (value[e-1] == ' ' || value[e-1] == '\t') {
			e--
		}
		piece := value[s:e]
		dateRest := inDate
		inDate = false
		switch eq := strings.IndexByte(piece, '='); {
		case piece == "":
		case eq < 0:
			if set && (setCookieAttrs[strings.ToLower(piece)] || dateRest && isDateRest(piece)) {
				break
			}
			f(s, e)
		default:
			n := strings.ToLower(strings.TrimSpace(piece[:eq]))
			if set && setCookieAttrs[n] {
				inDate = n == "expires" && sep == ','
				break
			}
			v := s + eq + 1
			for v < e && value[v] == ' ' {
				v++
			}
			if v < e {
				f(v, e)
			}
		}
		if end == len(value) {
			return
		}
		start = end + 1
	}
}

// isDateRest reports whether s is the part of an HTTP date after its
// comma ("21 Oct 2015 07:28:00 GMT", or RFC 850's "21-Oct-15 07:28:00 GMT").
func isDateRest(s string) bool {
	if !strings.HasSuffix(s, " GMT") || len(s) < len("1 Oct 15 00:00:00 GMT") || len(s) > len("21-Oct-2015 07:28:00 GMT") {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == ' ' || c == ':' || c == '-') {
			return false
		}
	}
	return '0' <= s[0] && s[0] <= '9'
}
