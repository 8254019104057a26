package redact

import (
	"bytes"
	"strings"
)

// Field is a member of a policy or a config whose value is a credential,
// and why it is one.
type Field struct {
	Name string // as the reference and refproxy write it
	Why  string
}

// FieldDefaults are the members of a policy or a config whose string
// values are credentials: redacted whole wherever they stand in a
// config dump or in a trace event's effectivePolicy (the route's merged
// policies, where a proxy that does not redact shows the keys its config
// holds), unless a setting, loudly named, turns redaction off. A name
// matches in any ASCII case with "_" and "-" left out: client_secret and
// clientSecret are one. An array of strings under such a member has each
// of its strings redacted. The reference's config serializer writes
// these as "<redacted>" (ser_redact); refproxy writes them so too.
var FieldDefaults = []Field{
	{"htpasswd", "a basicAuth policy's users and password hashes (Apache htpasswd)"},
	{"password", "passwords: a basicAuth user's, a backend's"},
	{"passwd", "passwords (the same, another spelling)"},
	{"secret", "shared secrets"},
	{"clientSecret", "OAuth 2.0 and OIDC client secrets (RFC 6749 2.3.1), Azure's"},
	{"secretKey", "secret keys"},
	{"accessKeyId", "AWS access key ids (with their secret, an AWS backendAuth)"},
	{"secretAccessKey", "AWS secret access keys"},
	{"sessionToken", "AWS temporary credentials' session token"},
	{"privateKey", "private keys: a TLS key, a JWT signing key, a GCP service account's"},
	{"credentials", "a cloud provider's credentials given inline (GCP's service account JSON)"},
	{"apiKey", "an LLM provider's API key given inline (an object: an apiKey policy, below)"},
	{"keyHash", "an apiKey policy's key hashes: enough to test guesses against"},
	{"token", "tokens: a backend's bearer token, a static token"},
	{"accessToken", "OAuth 2.0 access tokens"},
	{"refreshToken", "OAuth 2.0 refresh tokens"},
	{"idToken", "OpenID Connect ID tokens"},
	{"bearerToken", "bearer tokens"},
}

// KeyHolders are the members whose object (or array of objects) holds
// credentials under plain names: their members key, keys and value (and
// those of the objects within) are redacted as FieldDefaults are.
var KeyHolders = []Field{
	{"apiKey", "an apiKey policy: keys: [{key, metadata}], every client's key"},
	{"backendAuth", "the credential the proxy sends a backend: key, value (an LLM provider's API key)"},
}

// policyMember is the member of a trace event that holds a route's
// policies (spec part 3, policySelection), written as it is: the strings
// of its object are read as a config's (FieldDefaults, KeyHolders, and
// members named as a header r redacts: a requestHeaderModifier's set).
const policyMember = "effectivePolicy"

// fieldNames and holderNames are the normalized names of FieldDefaults
// and KeyHolders; holderMembers, those of the members a KeyHolder's
// objects hold credentials in.
var (
	fieldNames, holderNames = normalizedSet(FieldDefaults), normalizedSet(KeyHolders)
	holderMembers           = map[string]struct{}{"key": {}, "keys": {}, "value": {}}
)

// credentialMember reports whether the member key of a config's object
// (within a KeyHolder with holder) holds credentials.
func credentialMember(key string, holder bool) bool {
	return inSet(fieldNames, key) || holder && inSet(holderMembers, key)
}

func normalizedSet(fs []Field) map[string]struct{} {
	m := make(map[string]struct{}, len(fs))
	for _, f := range fs {
		m[normalizeField(f.Name)] = struct{}{}
	}
	return m
}

// maxFieldName bounds the names looked up: longer ones are none of them.
const maxFieldName = 32

// normalizeField is name in lower case, "_" and "-" left out.
func normalizeField(name string) string {
	var buf [maxFieldName]byte
	n, ok := appendNormalized(buf[:0], name)
	if !ok {
		return ""
	}
	return string(n)
}

// appendNormalized appends name normalized to b, up to cap(b); false when
// it is longer.
func appendNormalized(b []byte, name string) ([]byte, bool) {
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_' || c == '-':
			continue
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		if len(b) == cap(b) {
			return b, false
		}
		b = append(b, c)
	}
	return b, true
}

// inSet reports whether name, normalized, is in set, allocating nothing.
func inSet(set map[string]struct{}, name string) bool {
	if len(name) > 2*maxFieldName {
		return false
	}
	var buf [maxFieldName]byte
	n, ok := appendNormalized(buf[:0], name)
	if !ok {
		return false
	}
	_, found := set[string(n)]
	return found
}

// mayHoldPolicies reports whether walk may read a string of src as a
// config's (the value of an effectivePolicy member, its name written as
// it is, without escapes) that r could redact: false when src has no such
// member, or each is null or an object whose members are all null (as
// the real proxies and refproxy write it when no policy applies: most
// policySelection events), each followed by "," or "}". Those are found
// by searching src, not by reading its strings.
//
// seen (nil: none) holds the last all-null object found, which is then
// passed over by one comparison (a proxy writes the same one for every
// request its policies leave alone).
func (r *Redactor) mayHoldPolicies(src []byte, seen *[]byte) bool {
	if !r.fields && len(r.names) == 0 {
		return false
	}
	for off := 0; ; {
		// Policy" first: a quote, or an e, starts the search too often.
		k := bytes.Index(src[off:], []byte(`Policy"`))
		if k < 0 {
			return false
		}
		k += off
		off = k + len(`Policy"`)
		head := policyMember[:len(policyMember)-len("Policy")] // "effective"
		if k < len(head)+1 || src[k-len(head)-1] != '"' || string(src[k-len(head):k]) != head {
			continue
		}
		j := skipWS(src, off)
		if j >= len(src) || src[j] != ':' {
			return true // what walk makes of it, walk says
		}
		j = skipWS(src, j+1)
		switch {
		case bytes.HasPrefix(src[j:], []byte("null")):
			j += len("null")
		case seen != nil && len(*seen) > 0 && bytes.HasPrefix(src[j:], *seen):
			j += len(*seen)
		case j < len(src) && src[j] == '{':
			end := nullMembers(src, j+1)
			if end < 0 {
				return true
			}
			if seen != nil && end-j <= maxClean {
				*seen = append((*seen)[:0], src[j:end]...)
			}
			j = end
		default:
			return true
		}
		if j = skipWS(src, j); j < len(src) && src[j] != ',' && src[j] != '}' {
			return true // walk would take what follows for the member's value
		}
	}
}

// nullMembers reads the members of the object whose "{" ends before
// src[i]: when each is "name":null, written so (the name without a quote
// or backslash, no white space around the colon), it returns the index
// after the object's "}", else -1.
func nullMembers(src []byte, i int) int {
	i = skipWS(src, i)
	if i < len(src) && src[i] == '}' {
		return i + 1
	}
	for i < len(src) && src[i] == '"' {
		k := bytes.IndexByte(src[i+1:], '"')
		if k < 0 || bytes.IndexByte(src[i+1:i+1+k], '\\') >= 0 {
			return -1
		}
		i += 1 + k + 1
		if !bytes.HasPrefix(src[i:], []byte(":null")) {
			return -1
		}
		i = skipWS(src, i+len(":null"))
		if i >= len(src) {
			return -1
		}
		switch src[i] {
		case '}':
			return i + 1
		case ',':
			i = skipWS(src, i+1)
		default:
			return -1
		}
	}
	return -1
}

// hasConfigCredential reports whether AppendEvent would redact a string
// of src's effectivePolicy as a config's: a field, a header's value, a
// URL's password.
func (r *Redactor) hasConfigCredential(src []byte, root bool) bool {
	found := false
	walk(src, root, func(t token) {
		if !found && t.config {
			_, found = r.configValue(t, t.text(src))
		}
	})
	return found
}

// AppendConfig appends the JSON text src (a config dump) to dst with the
// credentials it holds redacted: the strings of FieldDefaults' members
// and KeyHolders' keys whole, the values of members (and of [name,
// value] pairs) named as a header r redacts as AppendValue redacts them,
// a URL's password (scheme://user:password@host), a credential query
// parameter; then each of those wherever else a string of src holds it.
// Everything else is copied byte for byte. Nothing changed: dst gets src,
// and false.
func (r *Redactor) AppendConfig(dst, src []byte) ([]byte, bool) {
	var s Secrets
	return r.appendJSON(dst, src, &s, true, true)
}

// CollectConfig adds to s the credentials the config dump src (JSON)
// holds (what AppendConfig would redact), changing nothing.
func (r *Redactor) CollectConfig(src []byte, s *Secrets) {
	r.collect(src, s, true)
}

// configValue is the redaction of the string v of a config (t.config): a
// credential field whole, a header's value, a URL's password; ok reports
// a change.
func (r *Redactor) configValue(t token, v string) (string, bool) {
	switch {
	case t.field && r.fields, t.query && r.SensitiveQuery(t.header):
		if v == "" || IsMarker(v) {
			return v, false
		}
		return r.MarkerOf(v), true
	case t.query:
	case t.header != "" && r.Sensitive(t.header):
		out := r.Value(t.header, v)
		return out, out != v
	}
	if p, ok := userinfoPassword(v); ok && r.fields {
		return v[:p.start] + r.MarkerOf(v[p.start:p.end]) + v[p.end:], true
	}
	return v, false
}

// collectConfig adds to s the credential the config string v holds
// (configValue's), while s holds fewer than MaxSecretsPerRequest: a
// config may hold a key for each of 100 000 clients, each redacted where
// it stands, and searching every string for each would cost their
// product (50 000 keys took 12 s).
func (r *Redactor) collectConfig(t token, v string, s *Secrets) {
	if s.Len() >= MaxSecretsPerRequest {
		return
	}
	switch {
	case t.field && r.fields, t.query && r.SensitiveQuery(t.header):
		s.Add(v)
	case t.query:
	case t.header != "" && r.Sensitive(t.header):
		Credentials(t.header, v, s.Add)
	default:
		if p, ok := userinfoPassword(v); ok && r.fields {
			s.Add(v[p.start:p.end])
		}
	}
}

// part is s[start:end].
type part struct{ start, end int }

// userinfoPassword finds the password of a URL's user info in s
// ("scheme://user:password@host..."): a redis, OTLP or backend URL a
// config gives with its credential. A marker is no password.
func userinfoPassword(s string) (part, bool) {
	i := strings.Index(s, "://")
	if i <= 0 {
		return part{}, false
	}
	auth := s[i+3:]
	if k := strings.IndexAny(auth, "/?# \t\"'"); k >= 0 {
		auth = auth[:k]
	}
	at := strings.LastIndexByte(auth, '@')
	if at < 0 {
		return part{}, false
	}
	colon := strings.IndexByte(auth[:at], ':')
	if colon < 0 || colon+1 == at {
		return part{}, false
	}
	p := part{start: i + 3 + colon + 1, end: i + 3 + at}
	if IsMarker(s[p.start:p.end]) {
		return part{}, false
	}
	return p, true
}
