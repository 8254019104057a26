package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gwdiag/gwdiag/golden/trace/redact"
	"github.com/gwdiag/gwdiag/refproxy/internal/authn"
)

// The auth policies of the reference's schema that refproxy implements:
// apiKey (LocalAPIKeys), basicAuth (LocalBasicAuth), jwtAuth
// (LocalJwtConfig) and backendAuth's key, credentials and passthrough
// forms. Their secrets (API keys and their hashes, the htpasswd database,
// backend keys) are SecretValue: they never show in JSON, in errors or in
// fmt output.

// Auth modes of apiKey, basicAuth and jwtAuth (the reference's; the default
// is optional).
const (
	ModeStrict     = "strict"
	ModeOptional   = "optional"
	ModePermissive = "permissive"
)

// SecretValue is a credential from the config, given inline or read from
// a file ({file: path}, the reference's FileOrInline, read at load
// relative to the working directory, as the reference reads it). It
// marshals to JSON, and formats with fmt, as redact.Marker: a config
// dumped, logged or traced never carries it. string(s) is the value.
type SecretValue string

// MarshalJSON writes redact.Marker, never the secret.
func (SecretValue) MarshalJSON() ([]byte, error) { return json.Marshal(redact.Marker) }

// String is redact.Marker, so that %v and %s never print the secret.
func (SecretValue) String() string { return redact.Marker }

// GoString is redact.Marker too (%#v).
func (SecretValue) GoString() string { return redact.Marker }

// maxSecretFile bounds a file read for a secret, an htpasswd or a JWKS.
const maxSecretFile = 1 << 20

func (s *SecretValue) decodeYAML(d *decoder, n *yaml.Node, path string, segs []string) error {
	v, err := d.fileOrInline(n, path, segs)
	*s = SecretValue(v)
	return err
}

// fileOrInline reads a FileOrInline value: a string, or {file: path}. An
// error never quotes the file's content.
func (d *decoder) fileOrInline(n *yaml.Node, path string, segs []string) (string, error) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		var v string
		err := d.decode(n, refValue(&v), path, segs)
		return v, err
	}
	var f struct {
		File string `yaml:"file"`
	}
	if err := d.decode(n, refValue(&f), path, segs); err != nil {
		return "", err
	}
	return d.readFile(n, path+".file", f.File)
}

// readFile reads a file a config names, relative to the working
// directory (the reference's rule: its examples say "relative to the
// folder the binary runs from, not the config file").
func (d *decoder) readFile(n *yaml.Node, path, name string) (string, error) {
	if name == "" {
		return "", d.fail(n, path, "empty file name")
	}
	f, err := os.Open(name)
	if err != nil {
		return "", d.fail(n, path, "cannot read the file: %v", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return "", d.fail(n, path, "cannot read the file %s: %v", name, err)
	}
	if len(b) > maxSecretFile {
		return "", d.fail(n, path, "the file %s is larger than %d bytes", name, maxSecretFile)
	}
	return string(b), nil
}

// AuthLocation is where a credential is read from (or, for backendAuth,
// sent in): exactly one of a header (with a prefix such as "Bearer " to
// strip or add), a query parameter or a cookie. The reference's fourth
// form, a CEL expression, is refused.
type AuthLocation struct {
	Header         *HeaderLocation `yaml:"header" json:"header,omitempty"`
	QueryParameter *NamedLocation  `yaml:"queryParameter" json:"queryParameter,omitempty"`
	Cookie         *NamedLocation  `yaml:"cookie" json:"cookie,omitempty"`
}

// HeaderLocation is a credential in a header; Prefix (matched without
// regard to case) comes before it.
type HeaderLocation struct {
	Name   string  `yaml:"name" json:"name"`
	Prefix *string `yaml:"prefix" json:"prefix,omitempty"`
}

// NamedLocation is a query parameter or a cookie, by name.
type NamedLocation struct {
	Name string `yaml:"name" json:"name"`
}

// BearerLocation and BasicLocation are the default locations: the
// Authorization header after "Bearer " (apiKey, jwtAuth, backendAuth) or
// "Basic " (basicAuth).
func BearerLocation() AuthLocation { return headerLocation("authorization", "Bearer ") }

// BasicLocation is basicAuth's default location.
func BasicLocation() AuthLocation { return headerLocation("authorization", "Basic ") }

func headerLocation(name, prefix string) AuthLocation {
	return AuthLocation{Header: &HeaderLocation{Name: name, Prefix: &prefix}}
}

// Or is l, or def when l is nil.
func (l *AuthLocation) Or(def AuthLocation) AuthLocation {
	if l == nil {
		return def
	}
	return *l
}

func (l *AuthLocation) check() error {
	if l == nil {
		return nil
	}
	n := 0
	for _, set := range []bool{l.Header != nil, l.QueryParameter != nil, l.Cookie != nil} {
		if set {
			n++
		}
	}
	switch {
	case n != 1:
		return errors.New("set exactly one of header, queryParameter or cookie")
	case l.Header != nil && !validHeaderName(l.Header.Name):
		return fmt.Errorf("header.name: %q is not a header name", l.Header.Name)
	case l.Header != nil && l.Header.Prefix != nil && strings.ContainsAny(*l.Header.Prefix, "\r\n\x00"):
		return errors.New("header.prefix: holds a line break or NUL")
	case l.QueryParameter != nil && l.QueryParameter.Name == "":
		return errors.New("queryParameter.name: empty")
	case l.Cookie != nil && !validHeaderName(l.Cookie.Name):
		return fmt.Errorf("cookie.name: %q is not a cookie name", l.Cookie.Name)
	}
	return nil
}

// HeaderName is the lower-case header the location reads, "cookie" for a
// cookie, "" for a query parameter.
func (l AuthLocation) HeaderName() string {
	switch {
	case l.Header != nil:
		return strings.ToLower(l.Header.Name)
	case l.Cookie != nil:
		return "cookie"
	}
	return ""
}

// APIKeyAuth is the apiKey policy (the reference's LocalAPIKeys): requests
// present one of Keys at Location (default: Authorization: Bearer). Mode
// strict refuses a request without a valid key (401), optional (the
// default) one with an invalid key, permissive none.
type APIKeyAuth struct {
	Keys     []APIKeyEntry `yaml:"keys" json:"keys"`
	Mode     string        `yaml:"mode" json:"mode,omitempty"`
	Location *AuthLocation `yaml:"location" json:"location,omitempty"`
}

// APIKeyEntry is one accepted key: Key in clear, or KeyHash
// ("sha256:<hex>", or a bcrypt hash); Metadata is attached to the requests
// it authenticates (CEL's apiKey, the trace). allowedModels is refused.
type APIKeyEntry struct {
	Key      SecretValue `yaml:"key" json:"key,omitempty"`
	KeyHash  SecretValue `yaml:"keyHash" json:"keyHash,omitempty"`
	Metadata *JSONValue  `yaml:"metadata" json:"metadata,omitempty"`
}

// decodeField refuses allowedModels, even an empty list (which denies
// every model): it restricts the llm models a key may ask for.
func (e *APIKeyEntry) decodeField(d *decoder, key, val *yaml.Node, path string, _ []string) (bool, error) {
	if key.Value != "allowedModels" {
		return false, nil
	}
	for val.Kind == yaml.AliasNode && val.Alias != nil {
		val = val.Alias
	}
	if !(val.Kind == yaml.ScalarNode && val.Tag == "!!null") {
		d.refuse(path, "the models a key may ask for")
	}
	return true, nil
}

// JSONValue is any JSON value of the config (an API key's metadata):
// numbers are int64 when whole, float64 otherwise, as CEL and the trace
// take them.
type JSONValue struct {
	V any
}

// MarshalJSON writes the value.
func (j JSONValue) MarshalJSON() ([]byte, error) { return json.Marshal(j.V) }

func (j *JSONValue) decodeYAML(d *decoder, n *yaml.Node, path string, _ []string) error {
	budget := maxValues
	v, err := d.value(n, path, &budget, 0)
	if err != nil {
		return err
	}
	j.V = plainNumbers(v)
	return nil
}

// plainNumbers turns json.Number into int64 or float64 (a number neither
// holds stays its text).
func plainNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		if f, err := v.Float64(); err == nil {
			return f
		}
		return string(v)
	case map[string]any:
		for k, e := range v {
			v[k] = plainNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = plainNumbers(e)
		}
	}
	return v
}

// BasicAuth is the basicAuth policy (LocalBasicAuth): user and password
// from Authorization: Basic (or AuthorizationLocation), checked against
// the htpasswd database; a refusal is 401 with WWW-Authenticate: Basic
// realm="<Realm>" (default "Restricted"). Mode strict or optional.
type BasicAuth struct {
	Htpasswd              SecretValue   `yaml:"htpasswd" json:"htpasswd"`
	Realm                 *string       `yaml:"realm" json:"realm,omitempty"`
	Mode                  string        `yaml:"mode" json:"mode,omitempty"`
	AuthorizationLocation *AuthLocation `yaml:"authorizationLocation" json:"authorizationLocation,omitempty"`
}

// DefaultRealm is the realm of a basicAuth policy that names none.
const DefaultRealm = "Restricted"

// basicAuthFields decodes BasicAuth's fields.
type basicAuthFields BasicAuth

// decodeYAML refuses an htpasswd entry in a format refproxy does not
// verify (the reference may); a malformed one is an error of the field.
func (b *BasicAuth) decodeYAML(d *decoder, n *yaml.Node, path string, segs []string) error {
	if err := d.decode(n, refValue((*basicAuthFields)(b)), path, segs); err != nil {
		return err
	}
	if _, err := authn.ParseHtpasswd(string(b.Htpasswd)); err != nil {
		var he *authn.HtpasswdError
		if errors.As(err, &he) && he.Unsupported {
			d.refuse(path+".htpasswd", he.Error())
			return nil
		}
		return d.fail(n, path+".htpasswd", "%v", err)
	}
	return nil
}

// JWTAuth is the jwtAuth policy (LocalJwtConfig), in either of its forms:
// Providers, or one provider's fields inline (Issuer, Audiences, JWKS,
// JWTValidationOptions). The token comes from Location (default
// Authorization: Bearer); mode strict, optional (the default) or
// permissive, as apiKey's.
type JWTAuth struct {
	Mode      string        `yaml:"mode" json:"mode,omitempty"`
	Location  *AuthLocation `yaml:"location" json:"location,omitempty"`
	Providers []JWTProvider `yaml:"providers" json:"providers,omitempty"`

	Issuer               string                `yaml:"issuer" json:"issuer,omitempty"`
	Audiences            []string              `yaml:"audiences" json:"audiences,omitempty"`
	JWKS                 *JWKS                 `yaml:"jwks" json:"jwks,omitempty"`
	JWTValidationOptions *JWTValidationOptions `yaml:"jwtValidationOptions" json:"jwtValidationOptions,omitempty"`
}

// JWTProvider is a trusted issuer: its JWKS, the audiences accepted (none:
// any) and the claims a token must carry.
type JWTProvider struct {
	Issuer               string                `yaml:"issuer" json:"issuer"`
	Audiences            []string              `yaml:"audiences" json:"audiences,omitempty"`
	JWKS                 *JWKS                 `yaml:"jwks" json:"jwks"`
	JWTValidationOptions *JWTValidationOptions `yaml:"jwtValidationOptions" json:"jwtValidationOptions,omitempty"`
}

// JWTValidationOptions are the claims a token must carry (default exp).
type JWTValidationOptions struct {
	RequiredClaims []string `yaml:"requiredClaims" json:"requiredClaims"`
}

// RequiredClaims are the claims the provider requires.
func (p JWTProvider) RequiredClaims() []string {
	if p.JWTValidationOptions == nil || p.JWTValidationOptions.RequiredClaims == nil {
		return authn.DefaultRequiredClaims
	}
	return p.JWTValidationOptions.RequiredClaims
}

// AllProviders are the policy's providers, whichever form it takes.
func (j *JWTAuth) AllProviders() []JWTProvider {
	if j.Providers != nil {
		return j.Providers
	}
	return []JWTProvider{{Issuer: j.Issuer, Audiences: j.Audiences, JWKS: j.JWKS, JWTValidationOptions: j.JWTValidationOptions}}
}

// JWKS is a JSON Web Key Set, inline or read from a file (File names it);
// the reference's third form, a URL to fetch it from, is refused. Its keys
// are public: a dump lists their kids, as the reference's does.
type JWKS struct {
	JSON string `json:"-"`
	File string `json:"file,omitempty"`
}

// MarshalJSON writes the file's name, or that the set is inline.
func (j JWKS) MarshalJSON() ([]byte, error) {
	if j.File != "" {
		return json.Marshal(map[string]string{"file": j.File})
	}
	return json.Marshal("<inline>")
}

func (j *JWKS) decodeYAML(d *decoder, n *yaml.Node, path string, segs []string) error {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "url" {
				d.refuse(path+".url", "a JWKS fetched from a URL; give it inline or as a file")
				return nil
			}
		}
		var f struct {
			File string `yaml:"file"`
		}
		if err := d.decode(n, refValue(&f), path, segs); err != nil {
			return err
		}
		v, err := d.readFile(n, path+".file", f.File)
		j.JSON, j.File = v, f.File
		return err
	}
	return d.decode(n, refValue(&j.JSON), path, segs)
}

// BackendAuth is the backendAuth policy: credentials the proxy sends to
// the backend. Of the reference's forms refproxy implements a key (Key:
// {value, location}, or the older `key: <secret>`), additional
// Credentials (each a key at a location) and Passthrough (the JWT a
// jwtAuth policy validated, sent on); gcp, aws, azure, copilot, jwtSign,
// oauthTokenExchange and crossAppAccess are refused.
type BackendAuth struct {
	Key         *BackendKey         `yaml:"key" json:"key,omitempty"`
	Credentials []BackendCredential `yaml:"credentials" json:"credentials,omitempty"`
	Passthrough *Passthrough        `yaml:"passthrough" json:"passthrough,omitempty"`
}

// BackendKey is a secret sent at Location (default Authorization: Bearer).
type BackendKey struct {
	Value    SecretValue   `yaml:"value" json:"value"`
	Location *AuthLocation `yaml:"location" json:"location,omitempty"`
}

// BackendCredential is a further secret, at its own location.
type BackendCredential struct {
	Location AuthLocation `yaml:"location" json:"location"`
	Key      SecretValue  `yaml:"key" json:"key"`
}

// Passthrough sends the request's validated JWT at Location (default
// Authorization: Bearer).
type Passthrough struct {
	Location *AuthLocation `yaml:"location" json:"location,omitempty"`
}

type backendAuthFields BackendAuth

func (b *BackendAuth) decodeYAML(d *decoder, n *yaml.Node, path string, segs []string) error {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		d.refuse(path, "backendAuth "+n.Value)
		return nil
	}
	return d.decode(n, refValue((*backendAuthFields)(b)), path, segs)
}

// decodeField reads key in both of its forms: {value, location}, or the
// secret itself (a string or {file}).
func (b *backendAuthFields) decodeField(d *decoder, key, val *yaml.Node, path string, segs []string) (bool, error) {
	if key.Value != "key" {
		return false, nil
	}
	v := val
	for v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias
	}
	bk := &BackendKey{}
	if v.Kind == yaml.MappingNode && !isFileForm(v) {
		if err := d.decode(v, refValue(bk), path, segs); err != nil {
			return true, err
		}
	} else {
		s, err := d.fileOrInline(v, path, segs)
		if err != nil {
			return true, err
		}
		bk.Value = SecretValue(s)
	}
	b.Key = bk
	return true, nil
}

// isFileForm reports whether a mapping is {file: ...}.
func isFileForm(n *yaml.Node) bool {
	return len(n.Content) == 2 && n.Content[0].Value == "file"
}

// BackendPolicies are a backend's own policies: refproxy implements
// backendAuth; the others are refused, each by name.
type BackendPolicies struct {
	BackendAuth *BackendAuth `yaml:"backendAuth" json:"backendAuth,omitempty"`
}

// checkAuthPolicies validates the auth policies of a block (route,
// top-level policy, listener, llm); errors never quote a secret.
func checkAuthPolicies(a *APIKeyAuth, b *BasicAuth, j *JWTAuth, path string, fail func(string, string, ...any) error) error {
	if a != nil {
		p := path + ".apiKey"
		if err := checkMode(a.Mode, p, fail, ModeStrict, ModeOptional, ModePermissive); err != nil {
			return err
		}
		if err := a.Location.check(); err != nil {
			return fail(p+".location", "%v", err)
		}
		if len(a.Keys) == 0 {
			return fail(p+".keys", "want at least one key")
		}
		for i, k := range a.Keys {
			kp := fmt.Sprintf("%s.keys[%d]", p, i)
			switch {
			case (k.Key == "") == (k.KeyHash == ""):
				return fail(kp, "set exactly one of key or keyHash")
			case k.KeyHash != "":
				if err := authn.ParseKeyHash(string(k.KeyHash)); err != nil {
					return fail(kp+".keyHash", "%v", err)
				}
			}
		}
	}
	if b != nil {
		p := path + ".basicAuth"
		if err := checkMode(b.Mode, p, fail, ModeStrict, ModeOptional); err != nil {
			return err
		}
		if err := b.AuthorizationLocation.check(); err != nil {
			return fail(p+".authorizationLocation", "%v", err)
		}
		if _, err := authn.ParseHtpasswd(string(b.Htpasswd)); err != nil {
			return fail(p+".htpasswd", "%v", err)
		}
		if b.Realm != nil && strings.ContainsAny(*b.Realm, "\"\r\n\x00") {
			return fail(p+".realm", "a realm holds no quote, line break or NUL")
		}
	}
	if j != nil {
		p := path + ".jwtAuth"
		if err := checkMode(j.Mode, p, fail, ModeStrict, ModeOptional, ModePermissive); err != nil {
			return err
		}
		if err := j.Location.check(); err != nil {
			return fail(p+".location", "%v", err)
		}
		if j.Providers != nil && (j.Issuer != "" || j.JWKS != nil || j.Audiences != nil || j.JWTValidationOptions != nil) {
			return fail(p, "set providers, or one provider's issuer and jwks, not both")
		}
		if j.Providers != nil && len(j.Providers) == 0 {
			return fail(p+".providers", "want at least one provider")
		}
		for i, pr := range j.AllProviders() {
			pp := p
			if j.Providers != nil {
				pp = fmt.Sprintf("%s.providers[%d]", p, i)
			}
			if pr.Issuer == "" {
				return fail(pp+".issuer", "missing required field issuer")
			}
			if pr.JWKS == nil {
				return fail(pp+".jwks", "missing required field jwks")
			}
			if _, err := authn.NewProvider(pr.Issuer, pr.Audiences, pr.RequiredClaims(), []byte(pr.JWKS.JSON)); err != nil {
				return fail(pp+".jwks", "%v", err)
			}
		}
	}
	return nil
}

// checkBackendAuth validates a backendAuth policy.
func checkBackendAuth(b *BackendAuth, path string, fail func(string, string, ...any) error) error {
	if b == nil {
		return nil
	}
	n := 0
	if b.Key != nil {
		n++
		if b.Key.Value == "" {
			return fail(path+".key", "empty key")
		}
		if err := checkSendLocation(b.Key.Location, string(b.Key.Value)); err != nil {
			return fail(path+".key.location", "%v", err)
		}
	}
	if b.Passthrough != nil {
		n++
		if err := checkSendLocation(b.Passthrough.Location, ""); err != nil {
			return fail(path+".passthrough.location", "%v", err)
		}
	}
	if n > 1 {
		return fail(path, "set one of key or passthrough")
	}
	if n == 0 && len(b.Credentials) == 0 {
		return fail(path, "set key, credentials or passthrough")
	}
	for i, c := range b.Credentials {
		cp := fmt.Sprintf("%s.credentials[%d]", path, i)
		if c.Key == "" {
			return fail(cp+".key", "empty key")
		}
		if err := checkSendLocation(&c.Location, string(c.Key)); err != nil {
			return fail(cp+".location", "%v", err)
		}
	}
	return nil
}

// checkSendLocation checks a location a secret is sent in; the secret
// must fit in a header (the error does not quote it).
func checkSendLocation(l *AuthLocation, secret string) error {
	if err := l.check(); err != nil {
		return err
	}
	if strings.ContainsAny(secret, "\r\n\x00") {
		return errors.New("the secret holds a line break or NUL, which no header takes")
	}
	return nil
}

func checkMode(mode, path string, fail func(string, string, ...any) error, modes ...string) error {
	if mode == "" || slices.Contains(modes, mode) {
		return nil
	}
	return fail(path+".mode", "unknown mode %q (want %s)", mode, strings.Join(modes, ", "))
}

// CredentialHeaders are the request headers (lower case, sorted, once
// each) that the config's auth policies read a credential from (the
// location of apiKey, basicAuth and jwtAuth: authorization by default;
// cookie for a cookie) and that backendAuth sends one in: traces redact
// their values as they do the default credential headers.
func (c *Config) CredentialHeaders() []string {
	seen := map[string]bool{}
	c.eachCredentialLocation(func(l AuthLocation) {
		if h := l.HeaderName(); h != "" {
			seen[h] = true
		}
	})
	return sortedKeys(seen)
}

// CredentialQueryParams are the query parameters (as configured, sorted,
// once each) that the config's auth policies read a credential from or
// send one in: traces show their values redacted in a request's uri and
// pathAndQuery.
func (c *Config) CredentialQueryParams() []string {
	seen := map[string]bool{}
	c.eachCredentialLocation(func(l AuthLocation) {
		if l.QueryParameter != nil && l.QueryParameter.Name != "" {
			seen[l.QueryParameter.Name] = true
		}
	})
	return sortedKeys(seen)
}

// eachCredentialLocation calls f with every location an auth policy of c
// reads a credential from or a backendAuth sends one in (defaults filled).
func (c *Config) eachCredentialLocation(f func(AuthLocation)) {
	if c == nil {
		return
	}
	add := func(l *AuthLocation, def AuthLocation) { f(l.Or(def)) }
	reads := func(a *APIKeyAuth, b *BasicAuth, j *JWTAuth) {
		if a != nil {
			add(a.Location, BearerLocation())
		}
		if b != nil {
			add(b.AuthorizationLocation, BasicLocation())
		}
		if j != nil {
			add(j.Location, BearerLocation())
		}
	}
	sends := func(b *BackendAuth) {
		if b == nil {
			return
		}
		if b.Key != nil {
			add(b.Key.Location, BearerLocation())
		}
		if b.Passthrough != nil {
			add(b.Passthrough.Location, BearerLocation())
		}
		for i := range b.Credentials {
			add(&b.Credentials[i].Location, BearerLocation())
		}
	}
	block := func(p *Policies) {
		if p != nil {
			reads(p.APIKey, p.BasicAuth, p.JWTAuth)
			sends(p.BackendAuth)
		}
	}
	for _, b := range c.Binds {
		for _, l := range b.Listeners {
			if p := l.Policies; p != nil {
				reads(p.APIKey, p.BasicAuth, p.JWTAuth)
			}
			for _, r := range l.Routes {
				block(r.Policies)
				for _, be := range r.Backends {
					if be.Policies != nil {
						sends(be.Policies.BackendAuth)
					}
				}
			}
		}
	}
	for i := range c.Policies {
		block(&c.Policies[i].Policy)
	}
}

// sortedKeys is the keys of m, sorted; nil for none.
func sortedKeys(m map[string]bool) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
