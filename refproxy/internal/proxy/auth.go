package proxy

// The auth policies, as the reference applies them: after cors, before
// authorization and the rate limits, the gateway phase's (a listener's own
// policies and top-level policies targeting its gateway with phase
// gateway) then the route phase's, each phase in the reference's order:
// jwtAuth, basicAuth, apiKey. Each reads a credential at its location,
// checks it (refproxy/internal/authn), and on success removes it from the request
// (the backend never sees the client's credential) and records who the
// client is: the JWT's claims (CEL's jwt), the API key's metadata (CEL's
// apiKey), the Basic user (CEL's basicAuth). A refusal is 401 with the
// reference's body. backendAuth (a backend's own, else its route's) then
// sends credentials to the backend: a configured key, further
// credentials, or the validated JWT (passthrough).
//
// A traced request gives the tracer every credential value read or sent
// (Tracer.AddSecret), so that no event shows it, and a policy event per
// policy: who was authenticated (key index and metadata, user, issuer and
// subject), or why the request was refused, never the credential itself.

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/explain"
	"github.com/gwdiag/gwdiag/golden/trace/redact"
	"github.com/gwdiag/gwdiag/refproxy/config"
	"github.com/gwdiag/gwdiag/refproxy/internal/authn"
	"github.com/gwdiag/gwdiag/refproxy/internal/tracing"
)

// Policy kinds of the auth policies in traces: effectivePolicy's keys
// (spec part 2.1), and backendAuth beside them.
const (
	kindJWT         = "jwt"
	kindBasicAuth   = "basicAuth"
	kindAPIKey      = "apiKey"
	kindBackendAuth = "backendAuth"
)

// causeAuthn is requestFinished.cause.kind of a 401 from an auth policy.
const causeAuthn = "authentication"

// identity is who the auth policies found the client to be.
type identity struct {
	// claims and token are the validated JWT's (nil and "" without one).
	claims map[string]any
	token  string
	// apiKey is the matched key's metadata, with key as redact.Marker.
	apiKey map[string]any
	// user is the Basic user ("" without one).
	user string
}

// authStage is one auth policy of a route: exactly one of jwt, basic, key.
type authStage struct {
	kind  string
	phase string // "gateway" or "route"
	jwt   *jwtPolicy
	basic *basicPolicy
	key   *apiKeyPolicy
}

// authRefusal is a 401 of an auth policy.
type authRefusal struct {
	kind, body, wwwAuthenticate, reason string
}

// authenticate runs the route's auth stages in order; the first refusal
// ends the request.
func (rp *routePolicies) authenticate(req *fasthttp.Request, tr *tracing.Tracer, id *identity) *authRefusal {
	for i := range rp.auth {
		s := &rp.auth[i]
		var r *authRefusal
		switch {
		case s.jwt != nil:
			r = s.jwt.run(req, tr, id, s.phase)
		case s.basic != nil:
			r = s.basic.run(req, tr, id, s.phase)
		default:
			r = s.key.run(req, tr, id, s.phase)
		}
		if r != nil {
			return r
		}
	}
	return nil
}

// --- locations

// location is where a credential is read from or sent in (config.AuthLocation).
type location struct {
	header, prefix string // a header; prefix matched without regard to case
	query          string // a query parameter
	cookie         string
}

func newLocation(l config.AuthLocation) location {
	switch {
	case l.Header != nil:
		loc := location{header: l.Header.Name}
		if l.Header.Prefix != nil {
			loc.prefix = *l.Header.Prefix
		}
		return loc
	case l.QueryParameter != nil:
		return location{query: l.QueryParameter.Name}
	}
	return location{cookie: l.Cookie.Name}
}

// String describes the location for a reason.
func (l location) String() string {
	switch {
	case l.header != "" && l.prefix != "":
		return fmt.Sprintf("header %s (after %q)", strings.ToLower(l.header), l.prefix)
	case l.header != "":
		return "header " + strings.ToLower(l.header)
	case l.query != "":
		return "query parameter " + l.query
	}
	return "cookie " + l.cookie
}

// read returns the credential at the location (the header after its
// prefix, the query parameter decoded, the cookie), and the forms it takes
// in the request as received (the whole header, the query's encoded
// value), for the tracer's secrets. A header without the prefix holds no
// credential, as the reference reads it.
func (l location) read(req *fasthttp.Request) (value string, raw []string, ok bool) {
	switch {
	case l.header != "":
		v, found := peekFold(&req.Header, l.header)
		if !found {
			return "", nil, false
		}
		s := string(v)
		if len(s) < len(l.prefix) || !strings.EqualFold(s[:len(l.prefix)], l.prefix) {
			return "", nil, false
		}
		return s[len(l.prefix):], []string{s}, true
	case l.query != "":
		rawValue, decoded, found := queryParam(b2s(req.URI().QueryString()), l.query)
		if !found {
			return "", nil, false
		}
		return decoded, []string{rawValue}, true
	}
	v := req.Header.Cookie(l.cookie)
	if v == nil {
		return "", nil, false
	}
	return string(v), nil, true
}

// remove takes the credential out of the request (after it was accepted).
func (l location) remove(req *fasthttp.Request) {
	switch {
	case l.header != "":
		delFold(&req.Header, l.header)
	case l.query != "":
		q := string(req.URI().QueryString())
		setQuery(req, withoutQueryParam(q, l.query))
	default:
		req.Header.DelCookie(l.cookie)
	}
}

// insert puts a credential in the request (backendAuth), replacing what
// the location held; it returns the bytes the request now holds for it.
func (l location) insert(req *fasthttp.Request, v string) string {
	switch {
	case l.header != "":
		delFold(&req.Header, l.header)
		req.Header.Set(l.header, l.prefix+v)
		return l.prefix + v
	case l.query != "":
		q := withoutQueryParam(string(req.URI().QueryString()), l.query)
		enc := url.QueryEscape(v)
		if q != "" {
			q += "&"
		}
		setQuery(req, q+url.QueryEscape(l.query)+"="+enc)
		return enc
	}
	req.Header.SetCookie(l.cookie, v)
	return v
}

// setQuery replaces the request's query string, in its URI and in the
// request line that trace snapshots read (the path as received).
func setQuery(req *fasthttp.Request, q string) {
	path, _ := splitRequestURI(string(req.Header.RequestURI()))
	req.URI().SetQueryString(q)
	if q != "" {
		path += "?" + q
	}
	req.Header.SetRequestURI(path)
}

// queryParam finds the first parameter called name in a raw query string:
// its value as sent and decoded (form encoding, as the reference reads it).
func queryParam(q, name string) (rawValue, decoded string, ok bool) {
	if q == "" {
		return "", "", false
	}
	for pair := range strings.SplitSeq(q, "&") {
		k, v, _ := strings.Cut(pair, "=")
		if dk, err := url.QueryUnescape(k); err != nil || dk != name {
			continue
		}
		dv, err := url.QueryUnescape(v)
		if err != nil {
			dv = v
		}
		return v, dv, true
	}
	return "", "", false
}

// withoutQueryParam is a raw query string without the parameters called
// name, every other byte as sent.
func withoutQueryParam(q, name string) string {
	if q == "" {
		return ""
	}
	var out []string
	for pair := range strings.SplitSeq(q, "&") {
		k, _, _ := strings.Cut(pair, "=")
		if dk, err := url.QueryUnescape(k); err == nil && dk == name {
			continue
		}
		out = append(out, pair)
	}
	return strings.Join(out, "&")
}

// secrets gives the tracer of a traced request the credential and the
// forms it takes in the request.
func secrets(tr *tracing.Tracer, value string, raw []string) {
	if tr == nil {
		return
	}
	if value != "" {
		tr.AddSecret(value)
	}
	for _, r := range raw {
		if r != "" && r != value {
			tr.AddSecret(r)
		}
	}
}

// --- apiKey

type apiKeyPolicy struct {
	mode  string
	loc   location
	keys  *authn.KeyStore
	n     int
	meta  []map[string]any // per key; never nil
	names []string         // per key: its metadata's name, or ""
	// cel is per key what CEL's apiKey holds when it matched: its metadata
	// with key as redact.Marker, made once and shared, read-only, by every
	// request the key authenticates.
	cel []map[string]any
}

func newAPIKeyPolicy(c *config.APIKeyAuth) (*apiKeyPolicy, error) {
	p := &apiKeyPolicy{mode: modeOr(c.Mode), loc: newLocation(c.Location.Or(config.BearerLocation())), n: len(c.Keys)}
	entries := make([]authn.KeyEntry, 0, len(c.Keys))
	for _, k := range c.Keys {
		entries = append(entries, authn.KeyEntry{Key: string(k.Key), Hash: string(k.KeyHash)})
		md := map[string]any{}
		if k.Metadata != nil {
			if m, ok := k.Metadata.V.(map[string]any); ok {
				md = m
			}
		}
		p.meta = append(p.meta, md)
		name, _ := md["name"].(string)
		p.names = append(p.names, name)
		cel := make(map[string]any, len(md)+1)
		for k, v := range md {
			cel[k] = v
		}
		cel["key"] = redact.Marker
		p.cel = append(p.cel, cel)
	}
	ks, err := authn.NewKeyStore(entries)
	if err != nil {
		return nil, err
	}
	p.keys = ks
	return p, nil
}

// refuse traces an auth policy's refusal (r.reason, in the request's
// phase) and returns r.
func refuse(tr *tracing.Tracer, phase string, r *authRefusal) *authRefusal {
	tracePolicy(tr, r.kind, applied("refused: "+r.reason, trace.PolicyOutcome{Decision: "refused", Phase: phase}), true)
	return r
}

// noCredential is an auth policy's answer to a request without its
// credential (what, at loc): in strict mode the refusal r, with why as
// its reason; otherwise the request goes on, and the trace says why.
func noCredential(tr *tracing.Tracer, what, policy string, loc location, mode, phase string, r authRefusal) *authRefusal {
	strict := mode == config.ModeStrict
	if !strict && tr == nil {
		return nil
	}
	why := fmt.Sprintf("the request has no %s (%s) and the %s phase's %s mode is %s", what, loc, phase, policy, mode)
	if strict {
		r.reason = why
		return refuse(tr, phase, &r)
	}
	tracePolicy(tr, r.kind, skipped(why), false)
	return nil
}

func modeOr(m string) string {
	if m == "" {
		return config.ModeOptional
	}
	return m
}

func (p *apiKeyPolicy) run(req *fasthttp.Request, tr *tracing.Tracer, id *identity, phase string) *authRefusal {
	key, raw, found := p.loc.read(req)
	secrets(tr, key, raw)
	if !found {
		return noCredential(tr, "API key", "apiKey", p.loc, p.mode, phase,
			authRefusal{kind: kindAPIKey, body: "api key authentication failure: no API Key found\n"})
	}
	i := p.keys.Match(key)
	if i < 0 {
		var why string
		if tr != nil {
			why = fmt.Sprintf("the API key (%s) is none of the %d %s of the %s phase's apiKey policy", p.loc, p.n, explain.Plural(p.n, "key", "keys"), phase)
		}
		if p.mode == config.ModePermissive {
			if tr != nil {
				tracePolicy(tr, kindAPIKey, skipped(why+"; let through (mode permissive)"), false)
			}
			return nil
		}
		return refuse(tr, phase, &authRefusal{kind: kindAPIKey, body: "api key authentication failure: invalid credentials\n", reason: why})
	}
	p.loc.remove(req)
	id.apiKey = p.cel[i]
	if tr != nil {
		which := fmt.Sprintf("keys[%d]", i)
		if p.names[i] != "" {
			which += fmt.Sprintf(" (name %q)", p.names[i])
		}
		tracePolicy(tr, kindAPIKey, applied("authenticated with API key "+which,
			trace.PolicyOutcome{Decision: "allowed", Phase: phase, Key: &i, Metadata: p.meta[i]}), false)
	}
	return nil
}

// --- basicAuth

type basicPolicy struct {
	mode  string
	loc   location
	db    *authn.Htpasswd
	realm string
}

func newBasicPolicy(c *config.BasicAuth) (*basicPolicy, error) {
	db, err := authn.ParseHtpasswd(string(c.Htpasswd))
	if err != nil {
		return nil, err
	}
	realm := config.DefaultRealm
	if c.Realm != nil {
		realm = *c.Realm
	}
	return &basicPolicy{mode: modeOr(c.Mode), loc: newLocation(c.AuthorizationLocation.Or(config.BasicLocation())), db: db, realm: realm}, nil
}

func (p *basicPolicy) run(req *fasthttp.Request, tr *tracing.Tracer, id *identity, phase string) *authRefusal {
	enc, raw, found := p.loc.read(req)
	secrets(tr, enc, raw)
	www := `Basic realm="` + p.realm + `"`
	if !found {
		// basicAuth's modes are strict and optional (config checks).
		return noCredential(tr, "Basic credentials", "basicAuth", p.loc, p.mode, phase,
			authRefusal{kind: kindBasicAuth, body: "basic authentication failure: no basic authentication credentials found\n", wwwAuthenticate: www})
	}
	refused := func(why string) *authRefusal {
		return refuse(tr, phase, &authRefusal{kind: kindBasicAuth, body: "basic authentication failure: invalid credentials\n", wwwAuthenticate: www, reason: why})
	}
	dec, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return refused("the Basic credentials are not base64")
	}
	user, password, ok := strings.Cut(string(dec), ":")
	if tr != nil {
		secrets(tr, password, []string{string(dec)})
	}
	if !ok {
		return refused("the Basic credentials are not user:password")
	}
	good, known := p.db.Check(user, password)
	switch {
	case !known:
		// An unknown name may be anything the client typed: not shown.
		return refused(fmt.Sprintf("no such user in the %s phase's htpasswd (%d %s)", phase, p.db.Users(), explain.Plural(p.db.Users(), "user", "users")))
	case !good:
		return refused(fmt.Sprintf("wrong password for user %q", user))
	}
	p.loc.remove(req)
	id.user = user
	if tr != nil {
		tracePolicy(tr, kindBasicAuth, applied(fmt.Sprintf("authenticated as user %q", user),
			trace.PolicyOutcome{Decision: "allowed", Phase: phase, User: user}), false)
	}
	return nil
}

// --- jwtAuth

type jwtPolicy struct {
	mode      string
	loc       location
	v         *authn.Verifier
	providers []map[string]any // for effectivePolicy and the dump
}

func newJWTPolicy(c *config.JWTAuth) (*jwtPolicy, error) {
	p := &jwtPolicy{mode: modeOr(c.Mode), loc: newLocation(c.Location.Or(config.BearerLocation())), v: &authn.Verifier{}}
	for _, pc := range c.AllProviders() {
		pr, err := authn.NewProvider(pc.Issuer, pc.Audiences, pc.RequiredClaims(), []byte(pc.JWKS.JSON))
		if err != nil {
			return nil, fmt.Errorf("jwtAuth: %w", err)
		}
		p.v.Providers = append(p.v.Providers, pr)
		kids := make([]any, 0, len(pr.KeyIDs()))
		for _, k := range pr.KeyIDs() {
			kids = append(kids, k)
		}
		p.providers = append(p.providers, map[string]any{"issuer": pc.Issuer, "keys": kids})
	}
	return p, nil
}

func (p *jwtPolicy) run(req *fasthttp.Request, tr *tracing.Tracer, id *identity, phase string) *authRefusal {
	token, raw, found := p.loc.read(req)
	secrets(tr, token, raw)
	if !found {
		return noCredential(tr, "JWT", "jwtAuth", p.loc, p.mode, phase,
			authRefusal{kind: kindJWT, body: "authentication failure: " + authn.ErrNoToken.Msg + "\n"})
	}
	v, err := p.v.Verify(token, time.Now())
	if err != nil {
		if p.mode == config.ModePermissive {
			if tr != nil {
				tracePolicy(tr, kindJWT, skipped(fmt.Sprintf("token verification failed (%v); let through (mode permissive)", err)), false)
			}
			return nil
		}
		return refuse(tr, phase, &authRefusal{kind: kindJWT, body: "authentication failure: " + err.Error() + "\n", reason: err.Error()})
	}
	p.loc.remove(req)
	id.claims, id.token = v.Claims, token
	if tr != nil {
		details := fmt.Sprintf("authenticated with a JWT of issuer %q", v.Issuer)
		if v.Subject != "" {
			details += fmt.Sprintf(", subject %q", v.Subject)
		}
		tracePolicy(tr, kindJWT, applied(details+" (key "+strconv.Quote(v.KeyID)+")", trace.PolicyOutcome{Decision: "allowed", Phase: phase,
			Issuer: v.Issuer, Subject: &v.Subject, KeyID: v.KeyID, Provider: &v.Provider}), false)
	}
	return nil
}

// --- backendAuth

// backendAuthPolicy sends credentials to a backend.
type backendAuthPolicy struct {
	key         *sentSecret
	credentials []sentSecret
	passthrough *location
	cfg         *config.BackendAuth
}

type sentSecret struct {
	value string
	loc   location
}

func newBackendAuth(c *config.BackendAuth) *backendAuthPolicy {
	if c == nil {
		return nil
	}
	p := &backendAuthPolicy{cfg: c}
	if c.Key != nil {
		p.key = &sentSecret{value: string(c.Key.Value), loc: newLocation(c.Key.Location.Or(config.BearerLocation()))}
	}
	for _, cr := range c.Credentials {
		p.credentials = append(p.credentials, sentSecret{value: string(cr.Key), loc: newLocation(cr.Location)})
	}
	if c.Passthrough != nil {
		l := newLocation(c.Passthrough.Location.Or(config.BearerLocation()))
		p.passthrough = &l
	}
	return p
}

// apply puts the policy's credentials in the request to be for be.
func (p *backendAuthPolicy) apply(req *fasthttp.Request, tr *tracing.Tracer, id *identity, be *backend) {
	var sent []string
	send := func(s sentSecret) {
		in := s.loc.insert(req, s.value)
		secrets(tr, s.value, []string{in})
		sent = append(sent, s.loc.String())
	}
	if p.key != nil {
		send(*p.key)
	}
	for _, c := range p.credentials {
		send(c)
	}
	if p.passthrough != nil {
		if id.token == "" {
			tracePolicy(tr, kindBackendAuth, skipped("passthrough: the request has no validated JWT to send on to backend "+be.name), false)
		} else {
			send(sentSecret{value: id.token, loc: *p.passthrough})
		}
	}
	if tr != nil && len(sent) > 0 {
		what := "the configured key"
		if p.key == nil {
			what = "the configured credentials"
		}
		if p.passthrough != nil {
			what = "the validated JWT"
		}
		tracePolicy(tr, kindBackendAuth, applied(fmt.Sprintf("sent %s to backend %s in %s", what, be.name, strings.Join(sent, ", ")),
			trace.PolicyOutcome{Backend: be.name, Locations: sent}), false)
	}
}

// --- compilation, effectivePolicy and the dump

// authInputs are the auth policies of one phase, the more specific source
// replacing the less for each kind.
type authInputs struct {
	jwt   *config.JWTAuth
	basic *config.BasicAuth
	key   *config.APIKeyAuth
}

func (a *authInputs) take(key *config.APIKeyAuth, basic *config.BasicAuth, jwt *config.JWTAuth) {
	if jwt != nil {
		a.jwt = jwt
	}
	if basic != nil {
		a.basic = basic
	}
	if key != nil {
		a.key = key
	}
}

// authPhases are a route's auth policies by phase (gateway, then route),
// and its route-level backendAuth.
func authPhases(ins []policyInput) (gw, rt authInputs, backend *config.BackendAuth) {
	for _, in := range ins {
		if g := in.gw; g != nil {
			gw.take(g.APIKey, g.BasicAuth, g.JWTAuth)
		}
		if p := in.p; p != nil {
			if in.gatewayPhase {
				gw.take(p.APIKey, p.BasicAuth, p.JWTAuth)
			} else {
				rt.take(p.APIKey, p.BasicAuth, p.JWTAuth)
			}
			if p.BackendAuth != nil {
				backend = p.BackendAuth
			}
		}
	}
	return gw, rt, backend
}

// compileAuth fills the route's auth stages and backendAuth.
func (rp *routePolicies) compileAuth(ins []policyInput) error {
	gw, rt, backend := authPhases(ins)
	for _, ph := range []struct {
		name string
		in   authInputs
	}{{"gateway", gw}, {"route", rt}} {
		if ph.in.jwt != nil {
			p, err := newJWTPolicy(ph.in.jwt)
			if err != nil {
				return err
			}
			rp.auth = append(rp.auth, authStage{kind: kindJWT, phase: ph.name, jwt: p})
		}
		if ph.in.basic != nil {
			p, err := newBasicPolicy(ph.in.basic)
			if err != nil {
				return fmt.Errorf("basicAuth: %w", err)
			}
			rp.auth = append(rp.auth, authStage{kind: kindBasicAuth, phase: ph.name, basic: p})
		}
		if ph.in.key != nil {
			p, err := newAPIKeyPolicy(ph.in.key)
			if err != nil {
				return fmt.Errorf("apiKey: %w", err)
			}
			rp.auth = append(rp.auth, authStage{kind: kindAPIKey, phase: ph.name, key: p})
		}
	}
	rp.backendAuth = newBackendAuth(backend)
	return nil
}

// authEffective adds the auth policies to effectivePolicy, each in the
// reference's shape (secrets as redact.Marker): one object, or a list of
// two when both phases set the kind (gateway first); backendAuth, a
// refproxy extension beside the spec's keys, when the route sets one.
func (rp *routePolicies) authEffective(eff map[string]any) {
	byKind := map[string][]any{}
	for _, s := range rp.auth {
		byKind[s.kind] = append(byKind[s.kind], s.shape())
	}
	for k, v := range byKind {
		if len(v) == 1 {
			eff[k] = v[0]
		} else {
			eff[k] = v
		}
	}
	if rp.backendAuth != nil {
		eff[kindBackendAuth] = backendAuthShape(rp.backendAuth.cfg)
	}
}

// shape is the stage's policy as the reference serialises it.
func (s *authStage) shape() map[string]any {
	switch {
	case s.jwt != nil:
		providers := make([]any, 0, len(s.jwt.providers))
		for _, p := range s.jwt.providers {
			providers = append(providers, p)
		}
		return map[string]any{"mode": s.jwt.mode, "providers": providers, "location": s.jwt.loc.shape()}
	case s.basic != nil:
		return map[string]any{"htpasswd": redact.Marker, "realm": s.basic.realm, "mode": s.basic.mode, "authorizationLocation": s.basic.loc.shape()}
	}
	return map[string]any{"users": redact.Marker, "mode": s.key.mode, "location": s.key.loc.shape()}
}

// shape is the location as the config writes it.
func (l location) shape() map[string]any {
	switch {
	case l.header != "":
		h := map[string]any{"name": strings.ToLower(l.header)}
		if l.prefix != "" {
			h["prefix"] = l.prefix
		}
		return map[string]any{"header": h}
	case l.query != "":
		return map[string]any{"queryParameter": map[string]any{"name": l.query}}
	}
	return map[string]any{"cookie": map[string]any{"name": l.cookie}}
}

// backendAuthShape is a backendAuth policy as the reference serialises
// it: {key: {value: <redacted>, location}}, {passthrough: {location}},
// and the credentials, each key redacted.
func backendAuthShape(c *config.BackendAuth) map[string]any {
	m := map[string]any{}
	if c.Key != nil {
		k := map[string]any{"value": redact.Marker}
		if c.Key.Location != nil {
			k["location"] = newLocation(*c.Key.Location).shape()
		}
		m["key"] = k
	}
	if c.Passthrough != nil {
		pt := map[string]any{}
		if c.Passthrough.Location != nil {
			pt["location"] = newLocation(*c.Passthrough.Location).shape()
		}
		m["passthrough"] = pt
	}
	if len(c.Credentials) > 0 {
		cs := make([]any, 0, len(c.Credentials))
		for _, cr := range c.Credentials {
			cs = append(cs, map[string]any{"location": newLocation(cr.Location).shape(), "key": redact.Marker})
		}
		m["credentials"] = cs
	}
	return m
}

// dumpAuthKinds are the dump's names of the auth policies (the reference
// writes its policy enums' variants in serde's camelCase: APIKey is
// "aPIKey", as HTTP is "hTTP" in real dumps), by config name.
var dumpAuthKinds = map[string]string{"apiKey": "aPIKey", "basicAuth": "basicAuth", "jwtAuth": "jwtAuth", "backendAuth": "backendAuth"}

// authDumpShape is a block's auth policy of config name kind in the
// dump's shape; ok is false for other kinds.
func authDumpShape(p *config.Policies, kind string) (name string, shape map[string]any, ok bool) {
	var s authStage
	switch kind {
	case "apiKey":
		if p.APIKey == nil {
			return "", nil, false
		}
		s = authStage{key: &apiKeyPolicy{mode: modeOr(p.APIKey.Mode), loc: newLocation(p.APIKey.Location.Or(config.BearerLocation()))}}
	case "basicAuth":
		if p.BasicAuth == nil {
			return "", nil, false
		}
		realm := config.DefaultRealm
		if p.BasicAuth.Realm != nil {
			realm = *p.BasicAuth.Realm
		}
		s = authStage{basic: &basicPolicy{mode: modeOr(p.BasicAuth.Mode), realm: realm, loc: newLocation(p.BasicAuth.AuthorizationLocation.Or(config.BasicLocation()))}}
	case "jwtAuth":
		if p.JWTAuth == nil {
			return "", nil, false
		}
		jp, err := newJWTPolicy(p.JWTAuth)
		if err != nil {
			return "", nil, false
		}
		s = authStage{jwt: jp}
	case "backendAuth":
		if p.BackendAuth == nil {
			return "", nil, false
		}
		return dumpAuthKinds[kind], backendAuthShape(p.BackendAuth), true
	default:
		return "", nil, false
	}
	return dumpAuthKinds[kind], s.shape(), true
}
