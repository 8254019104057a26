package proxy

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"

	"cel.dev/cel-go/cel"
	"github.com/valyala/fasthttp"

	"github.com/gwdiag/gwdiag/refproxy/celexpr"
	"github.com/gwdiag/gwdiag/refproxy/config"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit/remote"
)

// Table is the routing state compiled from one config: everything the
// request path needs, prepared at load so that serving does no parsing.
type Table struct {
	cfg   *config.Config
	binds []*bindTable
	// sensitive are the request headers traces redact (lower case).
	sensitive map[string]bool
}

type bindTable struct {
	key       int // see bindKey
	port      uint16
	gateway   string
	listeners []*listener
}

type listener struct {
	key      string
	name     string
	hostname string // "" matches every host
	routes   []*route
}

type route struct {
	key       string
	name      string
	namespace string
	hostnames []string
	matches   []match
	backends  []*backend
	weights   uint64
	next      atomic.Uint64
	// set is nil when no rate limit applies, so unlimited routes skip the limiter.
	set *ratelimit.Set
	// cond are the conditional local limits; nil for most routes.
	cond *condLimits
	// remote are the global limits, gateway-wide first; nil for most routes.
	remote []*remote.Limiter
	// tokens: some limit counts LLM tokens, so responses are watched.
	tokens bool
	// pol are the other policies; nil for most routes.
	pol *routePolicies
	// llm picks the backend by the request's model (llm: routes); nil
	// for others.
	llm       *llmRouter
	effective map[string]any
}

type match struct {
	exact, prefix string
	regex         *regexp.Regexp
	method        string
	headers       []headerMatch
}

type headerMatch struct {
	name  string
	exact *string
	regex *regexp.Regexp
}

type backend struct {
	name      string
	traceType string
	addr      string
	weight    uint64
	ai        bool
	tls       bool
	// Of AI backends: the model the request's is replaced with, the path
	// rewrite (pathOverride replaces the path, pathPrefix the provider's
	// /v1) and the API key sent as a bearer token; empty for most.
	model, pathOverride, pathPrefix, apiKey string
	client                                  *fasthttp.HostClient
	// do makes the round trip: client.Do, or a stub in benchmarks.
	do    func(req *fasthttp.Request, resp *fasthttp.Response) error
	stats *EndpointStats
	// service is the Service this endpoint belongs to (cluster configs);
	// nil for a plain host or AI backend.
	service *config.ServiceOf
}

// bindKey identifies a bind across reloads: its port, or for port 0 (a free
// port picked at start) its position, which cannot collide with a port.
func bindKey(i int, b config.Bind) int {
	if b.Port != 0 {
		return int(b.Port)
	}
	return -1 - i
}

// effectivePolicyKeys are the seventeen keys of spec part 2.1.
var effectivePolicyKeys = []string{
	"localRateLimit", "remoteRateLimit", "authorization", "jwt", "oidc", "basicAuth", "apiKey",
	"extAuthz", "extProc", "transformation", "csrf", "directResponse", "requestHeaderModifier",
	"responseHeaderModifier", "requestRedirect", "urlRewrite", "cors",
}

func (dp *Dataplane) build(cfg *config.Config) (*Table, error) {
	t := &Table{cfg: cfg}
	if cfg.Config != nil && len(cfg.Config.SensitiveHeaders) > 0 {
		t.sensitive = map[string]bool{}
		for _, h := range cfg.Config.SensitiveHeaders {
			t.sensitive[strings.ToLower(h)] = true
		}
	}
	for bi, b := range cfg.Binds {
		bt := &bindTable{key: bindKey(bi, b), port: b.Port, gateway: b.GatewayName()}
		for li, l := range b.Listeners {
			lt := &listener{key: config.ListenerKey(b, l, li), name: l.ListenerName(li), hostname: strings.ToLower(l.Hostname)}
			// Gateway-wide buckets are shared by every route of the listener.
			gw := &limits{}
			var gwPols []policyInput
			if p := l.Policies; p != nil {
				gwPols = append(gwPols, policyInput{cors: p.CORS, authorization: p.Authorization})
			}
			for _, p := range cfg.Policies {
				g := p.Target.Gateway
				if g == nil || g.GatewayName != bt.gateway || g.GatewayNamespace != config.DefaultNamespace {
					continue
				}
				if g.ListenerName != nil && *g.ListenerName != lt.name {
					continue
				}
				if g.Port != nil && *g.Port != b.Port {
					continue
				}
				if err := gw.add(dp, p.Name.Namespace+"/"+p.Name.Name+"/"+bt.gateway, &p.Policy); err != nil {
					return nil, fmt.Errorf("policy %s/%s: %w", p.Name.Namespace, p.Name.Name, err)
				}
				gwPols = append(gwPols, policyInput{p: &p.Policy})
			}
			for ri, r := range l.Routes {
				rt, err := dp.buildRoute(cfg, b, l, li, r, ri, gw, gwPols)
				if err != nil {
					return nil, err
				}
				lt.routes = append(lt.routes, rt)
			}
			bt.listeners = append(bt.listeners, lt)
		}
		t.binds = append(t.binds, bt)
	}
	return t, nil
}

// limits are the rate limits of one place (a gateway, a route): plain
// buckets, groups of conditional entries, global limits, and the configs
// they came from for effectivePolicy.
type limits struct {
	buckets []*ratelimit.Bucket
	specs   []config.RateLimit
	groups  []condGroup
	remotes []*config.RemoteRateLimit
}

// condGroup is one localRateLimit policy in the conditional form.
type condGroup struct {
	conds   []cel.Program // nil: the fallback
	buckets []*ratelimit.Bucket
	entries []config.ConditionalRateLimit
}

// add takes the limits of a policy block; key names its buckets, so that
// they keep their state across reloads.
func (l *limits) add(dp *Dataplane, key string, p *config.Policies) error {
	for _, rl := range p.LocalRateLimit {
		l.buckets = append(l.buckets, dp.bucket(key, rl))
		l.specs = append(l.specs, rl)
	}
	if c := p.LocalRateLimitConditional; len(c) > 0 {
		g := condGroup{entries: c}
		for i, e := range c {
			var prog cel.Program
			if e.Condition != "" {
				var err error
				if prog, err = celexpr.CompileRequest(e.Condition, celexpr.Bool); err != nil {
					return err
				}
			}
			g.conds = append(g.conds, prog)
			g.buckets = append(g.buckets, dp.bucket(fmt.Sprintf("%s/conditional/%d", key, i), e.RateLimit))
		}
		l.groups = append(l.groups, g)
	}
	if p.RemoteRateLimit != nil {
		l.remotes = append(l.remotes, p.RemoteRateLimit)
	}
	return nil
}

func (l *limits) merge(o *limits) {
	l.buckets = append(l.buckets, o.buckets...)
	l.specs = append(l.specs, o.specs...)
	l.groups = append(l.groups, o.groups...)
	l.remotes = append(l.remotes, o.remotes...)
}

func (dp *Dataplane) buildRoute(cfg *config.Config, b config.Bind, l config.Listener, li int, r config.Route, ri int, gw *limits, gwPols []policyInput) (*route, error) {
	rt := &route{
		key:       config.RouteKey(b, l, li, r, ri),
		name:      r.RouteName(ri),
		namespace: r.Namespace,
	}
	if rt.namespace == "" {
		rt.namespace = config.DefaultNamespace
	}
	for _, h := range r.Hostnames {
		rt.hostnames = append(rt.hostnames, strings.ToLower(h))
	}
	if len(r.Matches) == 0 {
		rt.matches = []match{{prefix: "/"}}
	}
	for _, m := range r.Matches {
		cm := match{method: m.Method}
		switch {
		case m.Path == nil:
			cm.prefix = "/"
		case m.Path.Exact != nil:
			cm.exact = *m.Path.Exact
		case m.Path.PathPrefix != nil:
			cm.prefix = *m.Path.PathPrefix
		case m.Path.Regex != nil:
			re, err := regexp.Compile("^(?:" + *m.Path.Regex + ")$")
			if err != nil {
				return nil, fmt.Errorf("route %s: %w", rt.key, err)
			}
			cm.regex = re
		}
		hms, err := compileHeaderMatches(m.Headers)
		if err != nil {
			return nil, fmt.Errorf("route %s: %w", rt.key, err)
		}
		cm.headers = hms
		rt.matches = append(rt.matches, cm)
	}

	// Limits: gateway-wide first, then targeted route policies, then inline.
	lim := &limits{}
	lim.merge(gw)
	pols := append([]policyInput(nil), gwPols...)
	for _, p := range cfg.Policies {
		t := p.Target.Route
		if t == nil || t.Name != rt.name || t.Namespace != rt.namespace {
			continue
		}
		if t.RuleName != nil && *t.RuleName != r.RuleName {
			continue
		}
		if err := lim.add(dp, p.Name.Namespace+"/"+p.Name.Name+"/"+rt.key, &p.Policy); err != nil {
			return nil, fmt.Errorf("route %s: %w", rt.key, err)
		}
		pols = append(pols, policyInput{p: &p.Policy})
	}
	if r.Policies != nil {
		// Inline buckets are keyed by their place in the list.
		for i, rl := range r.Policies.LocalRateLimit {
			lim.buckets = append(lim.buckets, dp.bucket(fmt.Sprintf("%s/inline/%d", rt.key, i), rl))
			lim.specs = append(lim.specs, rl)
		}
		inline := *r.Policies
		inline.LocalRateLimit = nil
		if err := lim.add(dp, rt.key+"/inline", &inline); err != nil {
			return nil, fmt.Errorf("route %s: %w", rt.key, err)
		}
		pols = append(pols, policyInput{p: r.Policies})
	}
	rt.limitSets(lim)
	for _, rr := range lim.remotes {
		conn, err := dp.rlsConn(rr.Host)
		if err != nil {
			return nil, fmt.Errorf("route %s: remoteRateLimit: %w", rt.key, err)
		}
		rem, err := remote.New(conn, rr.Remote())
		if err != nil {
			return nil, fmt.Errorf("route %s: remoteRateLimit: %w", rt.key, err)
		}
		rt.remote = append(rt.remote, rem)
		rt.tokens = rt.tokens || rem.Tokens()
	}
	rp, err := compilePolicies(pols)
	if err != nil {
		return nil, fmt.Errorf("route %s: %w", rt.key, err)
	}
	rt.pol = rp

	rt.effective = make(map[string]any, len(effectivePolicyKeys))
	for _, k := range effectivePolicyKeys {
		rt.effective[k] = nil
	}
	if ls := limitsEffective(lim); ls != nil {
		rt.effective["localRateLimit"] = ls
	}
	if len(lim.remotes) > 0 {
		rs := make([]any, 0, len(lim.remotes))
		for _, rr := range lim.remotes {
			rs = append(rs, remoteEffective(rr))
		}
		rt.effective["remoteRateLimit"] = rs
	}
	rp.effective(rt.effective, pols)

	for _, bk := range r.Backends {
		be := dp.backend(bk)
		rt.backends = append(rt.backends, be)
		rt.weights += be.weight
	}
	if r.LLM != nil {
		lr, err := dp.llmRouter(r.LLM)
		if err != nil {
			return nil, fmt.Errorf("route %s: %w", rt.key, err)
		}
		rt.llm = lr
	}
	return rt, nil
}

// limitSets makes the route's rate-limit Sets: one Set of every plain
// bucket, and with conditional entries, one per entry of a single group
// (groups of several policies are combined per request).
func (rt *route) limitSets(lim *limits) {
	if len(lim.buckets) > 0 {
		rt.set = ratelimit.NewSet(lim.buckets...)
	}
	rt.tokens = rt.set.HasTokens()
	if len(lim.groups) == 0 {
		return
	}
	c := &condLimits{none: rt.set, groups: lim.groups, base: lim.buckets}
	if len(lim.groups) == 1 {
		for _, b := range lim.groups[0].buckets {
			c.sets = append(c.sets, ratelimit.NewSet(append(append([]*ratelimit.Bucket(nil), lim.buckets...), b)...))
		}
	}
	for _, g := range lim.groups {
		for _, b := range g.buckets {
			rt.tokens = rt.tokens || b.Spec().Type == ratelimit.Tokens
		}
	}
	rt.cond = c
}

// limitsEffective is localRateLimit in effectivePolicy: every entry that
// may apply, conditional ones with their condition (null: the fallback).
func limitsEffective(lim *limits) []any {
	entry := func(l config.RateLimit) map[string]any {
		typ := l.Type
		if typ == "" {
			typ = string(ratelimit.Requests)
		}
		return map[string]any{"maxTokens": l.MaxTokens, "tokensPerFill": l.TokensPerFill,
			"fillInterval": l.FillInterval.String(), "type": typ}
	}
	var ls []any
	for _, l := range lim.specs {
		ls = append(ls, entry(l))
	}
	for _, g := range lim.groups {
		for _, e := range g.entries {
			m := entry(e.RateLimit)
			m["condition"] = nil
			if e.Condition != "" {
				m["condition"] = e.Condition
			}
			ls = append(ls, m)
		}
	}
	return ls
}

func compileHeaderMatches(hs []config.HeaderMatch) ([]headerMatch, error) {
	var out []headerMatch
	for _, h := range hs {
		hm := headerMatch{name: http.CanonicalHeaderKey(h.Name), exact: h.Value.Exact}
		if h.Value.Regex != nil {
			re, err := regexp.Compile("^(?:" + *h.Value.Regex + ")$")
			if err != nil {
				return nil, err
			}
			hm.regex = re
		}
		out = append(out, hm)
	}
	return out, nil
}

// remoteEffective is a remoteRateLimit policy as effectivePolicy shows it:
// the config's fields, with the defaults refproxy applies.
func remoteEffective(rr *config.RemoteRateLimit) map[string]any {
	p := rr.Remote()
	if p.Timeout <= 0 {
		p.Timeout = remote.DefaultTimeout
	}
	ds := make([]any, 0, len(rr.Descriptors))
	for _, d := range rr.Descriptors {
		es := make([]any, 0, len(d.Entries))
		for _, e := range d.Entries {
			es = append(es, map[string]any{"key": e.Key, "value": e.Value})
		}
		typ := d.Type
		if typ == "" {
			typ = string(ratelimit.Requests)
		}
		dm := map[string]any{"entries": es, "type": typ}
		if d.LimitOverride != "" {
			dm["limitOverride"] = d.LimitOverride
		}
		ds = append(ds, dm)
	}
	return map[string]any{"host": rr.Host, "domain": rr.Domain, "descriptors": ds,
		"failureMode": string(p.FailureMode), "timeout": config.Duration(p.Timeout).String()}
}

// pick chooses a backend by weighted round robin.
func (rt *route) pick() *backend {
	switch len(rt.backends) {
	case 0:
		return nil
	case 1:
		return rt.backends[0]
	}
	if rt.weights == 0 {
		return rt.backends[0]
	}
	n := rt.next.Add(1) % rt.weights
	for _, b := range rt.backends {
		if n < b.weight {
			return b
		}
		n -= b.weight
	}
	return rt.backends[0]
}

// matchesReq reports whether the route takes the request.
func (rt *route) matchesReq(v *reqView) bool {
	host := v.host
	if len(rt.hostnames) > 0 {
		ok := false
		for _, h := range rt.hostnames {
			if hostMatches(h, host) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	for i := range rt.matches {
		if rt.matches[i].matches(v) {
			return true
		}
	}
	return false
}

func (m *match) matches(v *reqView) bool {
	if m.method != "" && m.method != v.method {
		return false
	}
	p := v.path
	switch {
	case m.regex != nil:
		if !m.regex.MatchString(p) {
			return false
		}
	case m.exact != "":
		if p != m.exact {
			return false
		}
	default:
		if !prefixMatches(m.prefix, p) {
			return false
		}
	}
	for _, h := range m.headers {
		val, ok := v.header(h.name)
		if !ok {
			return false
		}
		if h.exact != nil && val != *h.exact {
			return false
		}
		if h.regex != nil && !h.regex.MatchString(val) {
			return false
		}
	}
	return true
}

// prefixMatches is a path-segment prefix match as in Gateway API: /foo
// matches /foo and /foo/bar but not /foobar.
func prefixMatches(prefix, path string) bool {
	if prefix == "" || prefix == "/" {
		return true
	}
	prefix = strings.TrimSuffix(prefix, "/")
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	return len(path) == len(prefix) || path[len(prefix)] == '/'
}

// hostMatches matches a hostname pattern ("a.example.com" or "*.example.com")
// against a lower-case host without port.
func hostMatches(pattern, host string) bool {
	if suffix, ok := strings.CutPrefix(pattern, "*"); ok {
		return strings.HasSuffix(host, suffix) && len(host) > len(suffix)
	}
	return pattern == host
}

// selectRoute returns the first matching route in config order and, when
// collect is set, the keys of every route evaluated on the way.
func (bt *bindTable) selectRoute(v *reqView, collect bool) (*route, []any) {
	host := v.host
	var evaluated []any
	for _, l := range bt.listeners {
		if l.hostname != "" && !hostMatches(l.hostname, host) {
			continue
		}
		for _, rt := range l.routes {
			if collect {
				evaluated = append(evaluated, rt.key)
			}
			if rt.matchesReq(v) {
				return rt, evaluated
			}
		}
	}
	return nil, evaluated
}
