package proxy

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"github.com/valyala/fasthttp"

	"github.com/gwdiag/gwdiag/golden/trace/redact"
	"github.com/gwdiag/gwdiag/refproxy/celexpr"
	"github.com/gwdiag/gwdiag/refproxy/config"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit"
)

// The policies of a route beyond its rate limits, one small piece per kind,
// each compiled once at load and applied by serve in the reference's order:
// cors, authorization, the rate limits, directResponse, then
// requestHeaderModifier on the way out and responseHeaderModifier and the
// CORS headers on the way back. A route without any has a nil
// *routePolicies and pays nothing for them.

// routePolicies are a route's policies: its listener's (a gateway's), the
// top-level policies targeting its gateway or itself, then its own.
type routePolicies struct {
	cors   *corsPolicy
	authz  []*authzPolicy // every one must allow
	direct *config.DirectResponse
	reqMod []*headerMod
	resMod []*headerMod
	// auth are the auth policies in the order they run (auth.go);
	// backendAuth the route's, for backends without their own.
	auth        []authStage
	backendAuth *backendAuthPolicy
}

// policyInput is one source of a route's policies, in the order they
// apply: a listener's own policies (gw), or a block of policies (p), from
// a top-level policy (of the gateway phase when gatewayPhase) or the
// route.
type policyInput struct {
	gw           *config.GatewayPolicies
	p            *config.Policies
	gatewayPhase bool
}

// compilePolicies builds a route's policies from its sources; nil when
// none sets any of them. A later source's cors and directResponse replace
// an earlier one's (the more specific wins); authorization rules and
// header modifiers add up.
func compilePolicies(ins []policyInput) (*routePolicies, error) {
	rp := &routePolicies{}
	for _, in := range ins {
		var cors *config.CORS
		var authz *config.Authorization
		if g := in.gw; g != nil {
			cors, authz = g.CORS, g.Authorization
		}
		if p := in.p; p != nil {
			if p.CORS != nil {
				cors = p.CORS
			}
			if p.Authorization != nil {
				authz = p.Authorization
			}
			if p.DirectResponse != nil {
				rp.direct = p.DirectResponse
			}
			if m := newHeaderMod(p.RequestHeaderModifier); m != nil {
				rp.reqMod = append(rp.reqMod, m)
			}
			if m := newHeaderMod(p.ResponseHeaderModifier); m != nil {
				rp.resMod = append(rp.resMod, m)
			}
		}
		if cors != nil {
			rp.cors = newCORS(cors)
		}
		if authz != nil {
			a, err := newAuthz(authz)
			if err != nil {
				return nil, err
			}
			rp.authz = append(rp.authz, a)
		}
	}
	if err := rp.compileAuth(ins); err != nil {
		return nil, err
	}
	if rp.cors == nil && rp.authz == nil && rp.direct == nil && rp.reqMod == nil && rp.resMod == nil && rp.auth == nil && rp.backendAuth == nil {
		return nil, nil
	}
	return rp, nil
}

// effective fills the route's effectivePolicy with these policies, as the
// config writes them, the secrets of their header modifiers redacted
// (configShown).
func (rp *routePolicies) effective(eff map[string]any, ins []policyInput, secrets *redact.Redactor) {
	if rp == nil {
		return
	}
	var cors, direct any
	var authz, req, res []any
	for _, in := range ins {
		if g := in.gw; g != nil && g.CORS != nil {
			cors = asJSON(g.CORS)
		}
		if g := in.gw; g != nil && g.Authorization != nil {
			authz = append(authz, asJSON(g.Authorization))
		}
		if p := in.p; p != nil {
			if p.CORS != nil {
				cors = asJSON(p.CORS)
			}
			if p.Authorization != nil {
				authz = append(authz, asJSON(p.Authorization))
			}
			if p.DirectResponse != nil {
				direct = asJSON(p.DirectResponse)
			}
			if p.RequestHeaderModifier != nil {
				req = append(req, shownHeaderModifier(asJSON(p.RequestHeaderModifier), secrets))
			}
			if p.ResponseHeaderModifier != nil {
				res = append(res, shownHeaderModifier(asJSON(p.ResponseHeaderModifier), secrets))
			}
		}
	}
	set := func(k string, v any) {
		if v != nil {
			eff[k] = v
		}
	}
	set("cors", cors)
	set("directResponse", direct)
	if authz != nil {
		eff["authorization"] = authz
	}
	if req != nil {
		eff["requestHeaderModifier"] = req
	}
	if res != nil {
		eff["responseHeaderModifier"] = res
	}
	rp.authEffective(eff)
}

// shownHeaderModifier is a header modifier of the config (asJSON) as
// effectivePolicy and /config_dump show it: the value it adds or sets for
// a credential header (an Authorization for the backend, a Set-Cookie for
// the client: secrets names them) reads "<redacted>", as the reference's
// dump writes its secrets.
func shownHeaderModifier(v any, secrets *redact.Redactor) any {
	m, _ := v.(map[string]any)
	for _, op := range []string{"add", "set"} {
		hs, _ := m[op].(map[string]any)
		for name, val := range hs {
			if s, _ := val.(string); s != "" && secrets.Sensitive(name) {
				hs[name] = redact.Marker
			}
		}
	}
	return v
}

// configShown is a policy block of the config (asJSON of a
// config.Policies) as /config_dump shows it: its header modifiers'
// secrets redacted (shownHeaderModifier).
func configShown(kinds map[string]any, secrets *redact.Redactor) map[string]any {
	for _, k := range []string{"requestHeaderModifier", "responseHeaderModifier"} {
		if v, ok := kinds[k]; ok {
			kinds[k] = shownHeaderModifier(v, secrets)
		}
	}
	return kinds
}

// asJSON is a config value as a trace shows it (JSON objects as maps).
func asJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return nil
	}
	return out
}

// --- localRateLimit, conditional form

// condLimits is a route's conditional local limits: of each group the
// first entry whose condition holds applies (a nil condition is the
// fallback), with the route's plain limits. With one group (the usual
// case) each entry's Set is made at load, so picking one allocates
// nothing; several groups are combined per request. An entry with a key
// is resolved to its key's bucket when the Set is held (ratelimit.Held).
type condLimits struct {
	groups []condGroup
	base   []limit
	// sets[i] is base with entry i of the single group.
	sets []*ratelimit.Set
	// none applies when no entry does: the plain limits alone.
	none *ratelimit.Set
}

// pick returns the Set of the request.
func (c *condLimits) pick(act *celActivation) *ratelimit.Set {
	if len(c.groups) == 1 {
		if i := c.groups[0].pick(act); i >= 0 {
			return c.sets[i]
		}
		return c.none
	}
	ls := append([]limit(nil), c.base...)
	for _, g := range c.groups {
		if i := g.pick(act); i >= 0 {
			ls = append(ls, g.buckets[i])
		}
	}
	return newSet(ls)
}

// pick returns the entry that applies, -1 for none.
func (g *condGroup) pick(act *celActivation) int {
	for i, p := range g.conds {
		if p == nil || celexpr.Holds(p, act) {
			return i
		}
	}
	return -1
}

// --- authorization

// authzPolicy is one authorization rule set; the expressions as written
// name a refusing rule in the trace.
type authzPolicy struct {
	allow, deny, require             []cel.Program
	allowExpr, denyExpr, requireExpr []string
}

func newAuthz(a *config.Authorization) (*authzPolicy, error) {
	p := &authzPolicy{}
	for _, r := range a.Rules {
		prog, err := celexpr.CompileRequest(r.Expr, celexpr.Bool)
		if err != nil {
			return nil, err
		}
		switch r.Mode {
		case config.AuthzDeny:
			p.deny, p.denyExpr = append(p.deny, prog), append(p.denyExpr, r.Expr)
		case config.AuthzRequire:
			p.require, p.requireExpr = append(p.require, prog), append(p.requireExpr, r.Expr)
		default:
			p.allow, p.allowExpr = append(p.allow, prog), append(p.allowExpr, r.Expr)
		}
	}
	return p, nil
}

// authorize reports whether every rule set lets the request through: no
// deny rule holds, every require rule holds, and some allow rule holds
// when there are any (rules that cannot be evaluated do not hold).
func authorize(sets []*authzPolicy, act *celActivation) bool {
	anyAllow, allowed := false, false
	for _, s := range sets {
		for _, p := range s.deny {
			if celexpr.Holds(p, act) {
				return false
			}
		}
		for _, p := range s.require {
			if !celexpr.Holds(p, act) {
				return false
			}
		}
		for _, p := range s.allow {
			anyAllow = true
			if !allowed && celexpr.Holds(p, act) {
				allowed = true
			}
		}
	}
	return allowed || !anyAllow
}

// authzDeniedBody is the body of a 403 from authorization.
const authzDeniedBody = "authorization failed\n"

// --- header modifiers

// headerMod is a compiled requestHeaderModifier or responseHeaderModifier:
// names sorted, so that headers are set in the same order every time.
type headerMod struct {
	remove   []string
	set, add [][2]string
}

func newHeaderMod(m *config.HeaderModifier) *headerMod {
	if m == nil {
		return nil
	}
	hm := &headerMod{remove: slices.Sorted(slices.Values(m.Remove))}
	for _, k := range slices.Sorted(mapKeys(m.Set)) {
		hm.set = append(hm.set, [2]string{k, m.Set[k]})
	}
	for _, k := range slices.Sorted(mapKeys(m.Add)) {
		hm.add = append(hm.add, [2]string{k, m.Add[k]})
	}
	return hm
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// headerSetter is what a modifier needs of request and response headers.
type headerSetter interface {
	headers
	Set(key, value string)
	Add(key, value string)
}

// apply removes, then sets, then adds; names match in any case.
func (m *headerMod) apply(h headerSetter) {
	for _, k := range m.remove {
		delFold(h, k)
	}
	for _, kv := range m.set {
		delFold(h, kv[0])
		h.Set(kv[0], kv[1])
	}
	for _, kv := range m.add {
		h.Add(kv[0], kv[1])
	}
}

// --- cors

// corsPolicy is a compiled cors policy (config.CORS).
type corsPolicy struct {
	anyOrigin   bool
	origins     []parsedOrigin
	credentials bool
	anyMethod   bool
	methods     string
	anyHeader   bool
	headers     string
	expose      string
	maxAge      string
}

type parsedOrigin struct {
	scheme, host string // host may hold * wildcards
	port         int
}

func newCORS(c *config.CORS) *corsPolicy {
	p := &corsPolicy{credentials: c.AllowCredentials}
	for _, o := range c.AllowOrigins {
		if o == "*" {
			p.anyOrigin = true
			continue
		}
		if po, ok := parseOrigin(o, true); ok {
			p.origins = append(p.origins, po)
		}
	}
	list := func(vals []string) (string, bool) {
		if slices.Contains(vals, "*") {
			return "", true
		}
		return strings.Join(vals, ","), false
	}
	p.methods, p.anyMethod = list(c.AllowMethods)
	p.headers, p.anyHeader = list(c.AllowHeaders)
	p.expose, _ = list(c.ExposeHeaders)
	if slices.Contains(c.ExposeHeaders, "*") {
		p.expose = "*"
	}
	if c.MaxAge != nil {
		p.maxAge = strconv.FormatInt(int64(time.Duration(*c.MaxAge)/time.Second), 10)
	}
	return p
}

// parseOrigin reads scheme://host[:port]; the host may hold * wildcards
// when wild (an allowed origin).
func parseOrigin(s string, wild bool) (parsedOrigin, bool) {
	scheme, hp, ok := strings.Cut(s, "://")
	scheme = strings.ToLower(scheme)
	if !ok || (scheme != "http" && scheme != "https") || hp == "" || strings.ContainsAny(hp, "/?#") {
		return parsedOrigin{}, false
	}
	o := parsedOrigin{scheme: scheme, port: 80}
	if scheme == "https" {
		o.port = 443
	}
	host := hp
	if h, port, ok := strings.Cut(hp, ":"); ok {
		n, err := strconv.Atoi(port)
		if err != nil || n <= 0 || n > 65535 || strings.TrimLeft(port, "0123456789") != "" || h == "" {
			return parsedOrigin{}, false
		}
		host, o.port = h, n
	}
	if !wild && strings.Contains(host, "*") {
		return parsedOrigin{}, false
	}
	o.host = strings.ToLower(host)
	return o, true
}

// wildMatch matches a host against a pattern where * stands for any run.
func wildMatch(pattern, s string) bool {
	if pattern == "*" {
		return true
	}
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return pattern == s
	}
	prefix, rest := pattern[:star], pattern[star+1:]
	if !strings.HasPrefix(s, prefix) {
		return false
	}
	s = s[len(prefix):]
	for i := 0; i <= len(s); i++ {
		if wildMatch(rest, s[i:]) {
			return true
		}
	}
	return false
}

// corsResult is what the cors policy decided for a request: the origin to
// allow (empty: add nothing) and whether the request is a preflight the
// proxy answers itself.
type corsResult struct {
	origin    string
	preflight bool
	// reqMethod and reqHeaders echo a preflight's wishes where the policy
	// allows any.
	reqMethod, reqHeaders string
}

// evaluate decides for a request, as Envoy's CORS filter does: no Origin,
// nothing; an origin not allowed, nothing, but a preflight is still
// answered (with no CORS headers) rather than forwarded.
func (p *corsPolicy) evaluate(req *fasthttp.Request) corsResult {
	origin, ok := peekFold(&req.Header, "Origin")
	if !ok {
		return corsResult{}
	}
	var r corsResult
	if string(req.Header.Method()) == http.MethodOptions {
		if m, ok := peekFold(&req.Header, "Access-Control-Request-Method"); ok && len(strings.TrimSpace(b2s(m))) > 0 {
			r.preflight = true
			r.reqMethod = strings.TrimSpace(string(m))
			if h, ok := peekFold(&req.Header, "Access-Control-Request-Headers"); ok {
				var parts []string
				for f := range strings.SplitSeq(string(h), ",") {
					if f = strings.TrimSpace(f); f != "" {
						parts = append(parts, f)
					}
				}
				r.reqHeaders = strings.Join(parts, ", ")
			}
		}
	}
	if p.allowed(b2s(origin)) {
		r.origin = string(origin)
	}
	return r
}

func (p *corsPolicy) allowed(origin string) bool {
	if p.anyOrigin {
		return true
	}
	o, ok := parseOrigin(origin, false)
	if !ok {
		return false
	}
	for _, a := range p.origins {
		if a.scheme == o.scheme && a.port == o.port && wildMatch(a.host, o.host) {
			return true
		}
	}
	return false
}

// corsHeaders adds the CORS headers of a decision, if the route has a
// cors policy.
func (rp *routePolicies) corsHeaders(r corsResult, h *fasthttp.ResponseHeader) {
	if rp != nil && rp.cors != nil {
		rp.cors.addHeaders(r, h)
	}
}

// applyResponse applies the response header modifiers and adds the CORS
// headers to a response.
func (rp *routePolicies) applyResponse(r corsResult, h *fasthttp.ResponseHeader) {
	if rp == nil {
		return
	}
	for _, m := range rp.resMod {
		m.apply(h)
	}
	rp.corsHeaders(r, h)
}

// allowList is a preflight's Allow-Methods or Allow-Headers: what the
// request asked for where the policy allows any ("*" without
// credentials, which the wildcard does not cover), else the policy's
// list ("": none).
func (p *corsPolicy) allowList(anyValue bool, asked, list string) string {
	switch {
	case anyValue && asked != "":
		return asked
	case anyValue && !p.credentials:
		return "*"
	}
	return list
}

// addHeaders adds the CORS headers of a decision to a response.
func (p *corsPolicy) addHeaders(r corsResult, h *fasthttp.ResponseHeader) {
	if r.origin == "" {
		return
	}
	h.Set("Access-Control-Allow-Origin", r.origin)
	if p.credentials {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	if p.expose != "" {
		h.Set("Access-Control-Expose-Headers", p.expose)
	}
	if !r.preflight {
		return
	}
	if v := p.allowList(p.anyMethod, r.reqMethod, p.methods); v != "" {
		h.Set("Access-Control-Allow-Methods", v)
	}
	if v := p.allowList(p.anyHeader, r.reqHeaders, p.headers); v != "" {
		h.Set("Access-Control-Allow-Headers", v)
	}
	if p.maxAge != "" {
		h.Set("Access-Control-Max-Age", p.maxAge)
	}
}
