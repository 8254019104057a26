package proxy

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"

	"cel.dev/cel-go/cel"
	"github.com/valyala/fasthttp"

	"github.com/gwdiag/gwdiag/golden/routing"
	"github.com/gwdiag/gwdiag/golden/trace/redact"
	"github.com/gwdiag/gwdiag/refproxy/celexpr"
	"github.com/gwdiag/gwdiag/refproxy/config"
	"github.com/gwdiag/gwdiag/refproxy/internal/tracing"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit/remote"
)

// table is the routing state compiled from one config: everything the
// request path needs, prepared at load so that serving does no parsing.
type table struct {
	cfg   *config.Config
	binds []*bindTable
	// redaction redacts the credential headers of traces: the defaults
	// (unless shown in clear), config.sensitiveHeaders and the headers
	// the config's auth policies read, under the data plane's key.
	redaction *tracing.Redaction
	// secretHeaders are the same headers, the defaults always: the
	// values the config's header modifiers give them are credentials
	// (a backend's Authorization, a Set-Cookie), which effectivePolicy
	// and /config_dump show as "<redacted>" (configShown).
	secretHeaders *redact.Redactor
	// otel is the OpenTelemetry export (otel.go), nil without one.
	otel *otelExport
}

type bindTable struct {
	key       int // see bindKey
	port      uint16
	gateway   string
	listeners []*listener
	// routing selects a route; its route IDs index routes.
	routing *routing.Bind
	routes  []*route
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
	// match is the route's hostnames and matches, for routing.
	match    *routing.Route
	backends []*backend
	weights  uint64
	next     atomic.Uint64
	// set is nil when no rate limit applies, so unlimited routes skip the limiter.
	set *ratelimit.Set
	// cond are the conditional local limits; nil for most routes.
	cond *condLimits
	// limits are every local limit entry of the route, plain then
	// conditional, in effectivePolicy's order, with where each comes
	// from, for the trace's reasons.
	limits []limitEntry
	// remote are the global limits, gateway-wide first; nil for most routes.
	remote []*remote.Limiter
	// remoteFrom says where each of remote comes from.
	remoteFrom []policySource
	// own are the route's inline policies as configured, for the dump.
	own *config.Policies
	// policies are the configured policies that target this route's
	// gateway or name, applied or not, for the trace's reasons.
	policies []policyTarget
	// tokens: some limit counts LLM tokens, so responses are watched.
	tokens bool
	// keyed: some local limit has a bucket per key, so requests need
	// what key expressions read.
	keyed bool
	// errorShape is the route's rateLimitError: its 429s carry OpenAI's
	// or Anthropic's JSON error, or ("" or "text") the spec's text.
	errorShape string
	// families are the header families of the route's rate-limit
	// headers (rateLimitHeaders); zero: x-ratelimit-* only.
	families ratelimit.FamilySet
	// pol are the other policies; nil for most routes.
	pol *routePolicies
	// llm picks the backend by the request's model (llm: routes); nil
	// for others.
	llm       *llmRouter
	effective map[string]any
	// effectiveJSON is effective as policySelection sends it.
	effectiveJSON []byte
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
	stats *endpointStats
	// service is the Service this endpoint belongs to (cluster configs);
	// nil for a plain host or AI backend.
	service *config.ServiceOf
	// auth is the backend's own backendAuth (auth.go); nil for most.
	auth *backendAuthPolicy
}

// shownConfigValue is a value the config gives the header name as the
// trace's reasons show it: redacted for a credential header (a route
// matching an Authorization holds a credential), with the fingerprint a
// request carrying the same value shows.
func (t *table) shownConfigValue(name, value string) string {
	if !t.secretHeaders.Sensitive(name) {
		return value
	}
	return t.secretHeaders.Value(name, value)
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

func (dp *Dataplane) build(cfg *config.Config) (*table, error) {
	t := &table{cfg: cfg}
	t.redaction, t.secretHeaders = dp.tableRedaction(cfg)
	for bi, b := range cfg.Binds {
		bt := &bindTable{key: bindKey(bi, b), port: b.Port, gateway: b.GatewayName(), routing: &routing.Bind{}}
		for li, l := range b.Listeners {
			lt := &listener{key: config.ListenerKey(b, l, li), name: l.ListenerName(li), hostname: strings.ToLower(l.Hostname)}
			// Gateway-wide buckets are shared by every route of the listener.
			gw := &limits{}
			var gwPols []policyInput
			if p := l.Policies; p != nil {
				gwPols = append(gwPols, policyInput{gw: p})
			}
			for pi, p := range cfg.Policies {
				g := p.Target.Gateway
				if g == nil || g.GatewayName != bt.gateway || g.GatewayNamespace != config.DefaultNamespace {
					continue
				}
				src := policySource{policy: pi, name: p.Name.Namespace + "/" + p.Name.Name, target: "gateway " + bt.gateway}
				if g.ListenerName != nil && *g.ListenerName != lt.name {
					gw.skipped = append(gw.skipped, policyTarget{src: src, kinds: policyKinds(p.Policy),
						skip: fmt.Sprintf("targets listener %s of %s, the request came to listener %s", *g.ListenerName, bt.gateway, lt.name)})
					continue
				}
				if g.Port != nil && *g.Port != b.Port {
					gw.skipped = append(gw.skipped, policyTarget{src: src, kinds: policyKinds(p.Policy),
						skip: fmt.Sprintf("targets port %d, the request came to port %d", *g.Port, b.Port)})
					continue
				}
				if g.ListenerName != nil {
					src.target += " listener " + *g.ListenerName
				}
				if err := gw.add(dp, p.Name.Namespace+"/"+p.Name.Name+"/"+bt.gateway, &p.Policy, src); err != nil {
					return nil, fmt.Errorf("policy %s/%s: %w", p.Name.Namespace, p.Name.Name, err)
				}
				gw.applied = append(gw.applied, policyTarget{src: src, kinds: policyKinds(p.Policy)})
				gwPols = append(gwPols, policyInput{p: &p.Policy, gatewayPhase: p.Phase == "gateway"})
			}
			var rroutes []*routing.Route
			for ri, r := range l.Routes {
				rt, err := dp.buildRoute(t, b, l, li, r, ri, gw, gwPols)
				if err != nil {
					return nil, err
				}
				rr, err := routing.NewRoute(rt.key, len(bt.routes), r.Hostnames, r.Matches)
				if err != nil {
					return nil, err
				}
				rr.ShowHeaderValues(t.shownConfigValue)
				rt.match = rr
				bt.routes = append(bt.routes, rt)
				rroutes = append(rroutes, rr)
				lt.routes = append(lt.routes, rt)
			}
			bt.listeners = append(bt.listeners, lt)
			bt.routing.Listeners = append(bt.routing.Listeners, routing.NewListener(lt.key, lt.hostname, rroutes))
		}
		t.binds = append(t.binds, bt)
	}
	return t, nil
}

// limits are the rate limits of one place (a gateway, a route): plain
// buckets, groups of conditional entries, global limits, and the configs
// they came from for effectivePolicy; with where each comes from, and the
// place's policies applied and skipped, for the trace's reasons.
type limits struct {
	buckets []limit
	specs   []config.RateLimit
	entries []limitEntry // one per bucket
	groups  []condGroup
	remotes []*config.RemoteRateLimit
	from    []policySource // one per remote

	applied, skipped []policyTarget
}

// condGroup is one localRateLimit policy in the conditional form.
type condGroup struct {
	conds   []cel.Program // nil: the fallback
	buckets []limit
	entries []config.ConditionalRateLimit
	src     policySource
}

// add takes the limits of a policy block from src; key names its buckets,
// so that they keep their state across reloads.
func (l *limits) add(dp *Dataplane, key string, p *config.Policies, src policySource) error {
	for i, rl := range p.LocalRateLimit {
		b, err := dp.limit(key, rl)
		if err != nil {
			return err
		}
		l.buckets = append(l.buckets, b)
		l.specs = append(l.specs, rl)
		l.entries = append(l.entries, limitEntry{lim: b, spec: rl, src: src, index: i})
	}
	if c := p.LocalRateLimitConditional; len(c) > 0 {
		g := condGroup{entries: c, src: src}
		for i, e := range c {
			var prog cel.Program
			if e.Condition != "" {
				var err error
				if prog, err = celexpr.CompileRequest(e.Condition, celexpr.Bool); err != nil {
					return err
				}
			}
			g.conds = append(g.conds, prog)
			b, err := dp.limit(fmt.Sprintf("%s/conditional/%d", key, i), e.RateLimit)
			if err != nil {
				return err
			}
			g.buckets = append(g.buckets, b)
		}
		l.groups = append(l.groups, g)
	}
	if p.RemoteRateLimit != nil {
		l.remotes = append(l.remotes, p.RemoteRateLimit)
		l.from = append(l.from, src)
	}
	return nil
}

func (l *limits) merge(o *limits) {
	l.buckets = append(l.buckets, o.buckets...)
	l.specs = append(l.specs, o.specs...)
	l.entries = append(l.entries, o.entries...)
	l.groups = append(l.groups, o.groups...)
	l.remotes = append(l.remotes, o.remotes...)
	l.from = append(l.from, o.from...)
	l.applied = append(l.applied, o.applied...)
	l.skipped = append(l.skipped, o.skipped...)
}

// entryList is every local limit entry, plain then conditional, in
// effectivePolicy's order (limitsEffective).
func (l *limits) entryList() []limitEntry {
	out := append([]limitEntry(nil), l.entries...)
	for _, g := range l.groups {
		for i, e := range g.entries {
			out = append(out, limitEntry{lim: g.buckets[i], spec: e.RateLimit, src: g.src, index: i, condition: e.Condition, conditional: true})
		}
	}
	return out
}

func (dp *Dataplane) buildRoute(t *table, b config.Bind, l config.Listener, li int, r config.Route, ri int, gw *limits, gwPols []policyInput) (*route, error) {
	cfg := t.cfg
	rt := &route{
		key:       config.RouteKey(b, l, li, r, ri),
		name:      r.RouteName(ri),
		namespace: r.Namespace,
	}
	if rt.namespace == "" {
		rt.namespace = config.DefaultNamespace
	}

	// Limits: gateway-wide first, then targeted route policies, then inline.
	lim := &limits{}
	lim.merge(gw)
	pols := append([]policyInput(nil), gwPols...)
	for pi, p := range cfg.Policies {
		t := p.Target.Route
		if t == nil || t.Name != rt.name || t.Namespace != rt.namespace {
			continue
		}
		src := policySource{policy: pi, name: p.Name.Namespace + "/" + p.Name.Name, target: "route " + rt.namespace + "/" + rt.name}
		if t.RuleName != nil && *t.RuleName != r.RuleName {
			lim.skipped = append(lim.skipped, policyTarget{src: src, kinds: policyKinds(p.Policy),
				skip: fmt.Sprintf("targets rule %s of route %s/%s, the request matched rule %q", *t.RuleName, rt.namespace, rt.name, r.RuleName)})
			continue
		}
		if t.RuleName != nil {
			src.target += " rule " + *t.RuleName
		}
		if err := lim.add(dp, p.Name.Namespace+"/"+p.Name.Name+"/"+rt.key, &p.Policy, src); err != nil {
			return nil, fmt.Errorf("route %s: %w", rt.key, err)
		}
		lim.applied = append(lim.applied, policyTarget{src: src, kinds: policyKinds(p.Policy)})
		pols = append(pols, policyInput{p: &p.Policy})
	}
	if r.Policies != nil {
		rt.own = r.Policies
		src := policySource{policy: -1, target: "route " + rt.namespace + "/" + rt.name}
		// Inline buckets are keyed by their place in the list.
		for i, rl := range r.Policies.LocalRateLimit {
			b, err := dp.limit(fmt.Sprintf("%s/inline/%d", rt.key, i), rl)
			if err != nil {
				return nil, fmt.Errorf("route %s: %w", rt.key, err)
			}
			lim.buckets = append(lim.buckets, b)
			lim.specs = append(lim.specs, rl)
			lim.entries = append(lim.entries, limitEntry{lim: b, spec: rl, src: src, index: i})
		}
		inline := *r.Policies
		inline.LocalRateLimit = nil
		if err := lim.add(dp, rt.key+"/inline", &inline, src); err != nil {
			return nil, fmt.Errorf("route %s: %w", rt.key, err)
		}
		pols = append(pols, policyInput{p: r.Policies})
	}
	rt.limits = lim.entryList()
	rt.remoteFrom = lim.from
	rt.policies = append(append([]policyTarget(nil), lim.applied...), lim.skipped...)
	rt.limitSets(lim)
	for _, rr := range lim.remotes {
		conn, err := dp.rlsConn(rr.Host)
		if err != nil {
			return nil, fmt.Errorf("route %s: remoteRateLimit: %w", rt.key, err)
		}
		pol := rr.Remote()
		pol.SkipUnevaluated = dp.opts.SkipUnevaluatedDescriptors
		rem, err := remote.New(conn, pol)
		if err != nil {
			return nil, fmt.Errorf("route %s: remoteRateLimit: %w", rt.key, err)
		}
		rt.remote = append(rt.remote, rem)
		rt.tokens = rt.tokens || rem.Tokens()
	}
	var rlErr string // the route's rateLimitError, as configured; the more specific wins
	for _, in := range pols {
		if in.p != nil && in.p.RateLimitError != "" {
			rlErr = in.p.RateLimitError
		}
	}
	rt.errorShape = rlErr
	var rlHeaders []string // the route's rateLimitHeaders; the more specific wins
	for _, in := range pols {
		if in.p != nil && in.p.RateLimitHeaders != nil {
			rlHeaders = in.p.RateLimitHeaders
		}
	}
	if rlHeaders != nil {
		fams, err := ratelimit.ParseFamilies(rlHeaders)
		if err != nil {
			return nil, fmt.Errorf("route %s: rateLimitHeaders: %w", rt.key, err)
		}
		rt.families = fams
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
	rp.effective(rt.effective, pols, t.secretHeaders)
	if rlErr != "" {
		// A refproxy extension beside the spec's seventeen keys, there
		// only when a policy sets it: the body of the route's 429s.
		rt.effective["rateLimitError"] = rlErr
	}
	if rlHeaders != nil {
		// The same: the header families of the route's rate-limit headers.
		rt.effective["rateLimitHeaders"] = rlHeaders
	}
	var ok bool
	if rt.effectiveJSON, ok = tracing.AppendValue(nil, rt.effective); !ok {
		_, err := json.Marshal(rt.effective)
		return nil, fmt.Errorf("route %s: effectivePolicy is not JSON: %v", rt.key, err)
	}

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
// limit, and with conditional entries, one per entry of a single group
// (groups of several policies are combined per request).
func (rt *route) limitSets(lim *limits) {
	if len(lim.buckets) > 0 {
		rt.set = newSet(lim.buckets)
	}
	rt.tokens = rt.set.HasTokens()
	rt.keyed = rt.set.IsKeyed()
	if len(lim.groups) == 0 {
		return
	}
	c := &condLimits{none: rt.set, groups: lim.groups, base: lim.buckets}
	if len(lim.groups) == 1 {
		for _, b := range lim.groups[0].buckets {
			c.sets = append(c.sets, newSet(append(append([]limit(nil), lim.buckets...), b)))
		}
	}
	for _, g := range lim.groups {
		for _, b := range g.buckets {
			rt.tokens = rt.tokens || b.spec().Type == ratelimit.Tokens
			rt.keyed = rt.keyed || b.keyed != nil
		}
	}
	rt.cond = c
}

// newSet is the Set of some limits.
func newSet(ls []limit) *ratelimit.Set {
	var (
		bs []*ratelimit.Bucket
		ks []*ratelimit.Keyed
	)
	for _, l := range ls {
		if l.keyed != nil {
			ks = append(ks, l.keyed)
		} else {
			bs = append(bs, l.bucket)
		}
	}
	return ratelimit.NewKeyedSet(bs, ks)
}

// spec is the limit's bucket configuration.
func (l limit) spec() ratelimit.Spec {
	if l.keyed != nil {
		return l.keyed.Spec()
	}
	return l.bucket.Spec()
}

// holds reports whether b is a bucket of l.
func (l limit) holds(b *ratelimit.Bucket) bool {
	if l.keyed != nil {
		return b.Keyed() == l.keyed
	}
	return b == l.bucket
}

// effectiveLimit is a local limit entry as effectivePolicy and the dump
// show it.
func effectiveLimit(l config.RateLimit) map[string]any {
	typ := l.Type
	if typ == "" {
		typ = string(ratelimit.Requests)
	}
	m := map[string]any{"maxTokens": l.MaxTokens, "tokensPerFill": l.TokensPerFill,
		"fillInterval": l.FillInterval.String(), "type": typ}
	if l.Key != "" {
		m["key"] = l.Key
	}
	return m
}

// limitsEffective is localRateLimit in effectivePolicy: every entry that
// may apply, conditional ones with their condition (null: the fallback).
func limitsEffective(lim *limits) []any {
	entry := effectiveLimit
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

// selectRoute returns the route that takes the request: the listener of
// the request's host, then its routes by the reference's precedence
// (routing.Bind.Select).
func (bt *bindTable) selectRoute(v *reqView) *route {
	r := routing.Request{Method: v.method, Path: v.path, Host: v.host, Query: v.query}
	if rr, _ := bt.routing.Select(&r, v.header); rr != nil {
		return bt.routes[rr.ID]
	}
	return nil
}

// explainRoute is selectRoute for a traced request: the route, and why each
// route of the bind did or did not take it.
func (bt *bindTable) explainRoute(v *reqView) (*route, routing.Selection) {
	r := routing.Request{Method: v.method, Path: v.path, Host: v.host, Query: v.query}
	sel := bt.routing.Explain(&r, v.header)
	if sel.Route != nil {
		return bt.routes[sel.Route.ID], sel
	}
	return nil, sel
}
