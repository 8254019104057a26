package proxy

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"github.com/gwdiag/gwdiag/refproxy/config"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit/remote"
	"github.com/gwdiag/gwdiag/refproxy/routing"
)

// Table is the routing state compiled from one config: everything the
// request path needs, prepared at load so that serving does no parsing.
type Table struct {
	cfg   *config.Config
	binds []*bindTable
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
	// limits are the set's entries in the order of the route's policies,
	// with where each comes from, for the trace's reasons.
	limits []limitEntry
	// remote are the global limits, gateway-wide first; nil for most routes.
	remote []*remote.Limiter
	// remoteFrom says where each of remote comes from; inlineRemote is the
	// route's own, for the dump.
	remoteFrom   []policySource
	inlineRemote *config.RemoteRateLimit
	tokens       bool
	effective    map[string]any
	// policies are the configured policies that target this route's
	// gateway or name, applied or not, for the trace's reasons.
	policies []policyTarget
}

type backend struct {
	name      string
	traceType string
	addr      string
	weight    uint64
	ai        bool
	tls       bool
	client    *fasthttp.HostClient
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
	for bi, b := range cfg.Binds {
		bt := &bindTable{key: bindKey(bi, b), port: b.Port, gateway: b.GatewayName(), routing: &routing.Bind{}}
		for li, l := range b.Listeners {
			lt := &listener{key: config.ListenerKey(b, l, li), name: l.ListenerName(li), hostname: strings.ToLower(l.Hostname)}
			// Gateway-wide buckets are shared by every route of the listener.
			gw := gatewayLimits{}
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
				gw.applied = append(gw.applied, policyTarget{src: src, kinds: policyKinds(p.Policy)})
				for i, rl := range p.Policy.LocalRateLimit {
					gw.limits = append(gw.limits, limitEntry{bucket: dp.bucket(p.Name.Namespace+"/"+p.Name.Name+"/"+bt.gateway, rl), spec: rl, src: src, index: i})
				}
				if p.Policy.RemoteRateLimit != nil {
					gw.remote = append(gw.remote, p.Policy.RemoteRateLimit)
					gw.remoteFrom = append(gw.remoteFrom, src)
				}
			}
			var rroutes []*routing.Route
			for ri, r := range l.Routes {
				rt, err := dp.buildRoute(cfg, b, l, li, r, ri, gw)
				if err != nil {
					return nil, err
				}
				rr, err := routing.NewRoute(rt.key, len(bt.routes), r.Hostnames, matchSpecs(r.Matches))
				if err != nil {
					return nil, err
				}
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

func (dp *Dataplane) buildRoute(cfg *config.Config, b config.Bind, l config.Listener, li int, r config.Route, ri int, gw gatewayLimits) (*route, error) {
	rt := &route{
		key:       config.RouteKey(b, l, li, r, ri),
		name:      r.RouteName(ri),
		namespace: r.Namespace,
	}
	if rt.namespace == "" {
		rt.namespace = config.DefaultNamespace
	}

	// Buckets: gateway-wide first, then targeted route policies, then inline.
	limits := slices.Clone(gw.limits)
	remotes := slices.Clone(gw.remote)
	rt.remoteFrom = slices.Clone(gw.remoteFrom)
	rt.policies = slices.Clone(gw.applied)
	rt.policies = append(rt.policies, gw.skipped...)
	for pi, p := range cfg.Policies {
		t := p.Target.Route
		if t == nil || t.Name != rt.name || t.Namespace != rt.namespace {
			continue
		}
		src := policySource{policy: pi, name: p.Name.Namespace + "/" + p.Name.Name, target: "route " + rt.namespace + "/" + rt.name}
		if t.RuleName != nil && *t.RuleName != r.RuleName {
			rt.policies = append(rt.policies, policyTarget{src: src, kinds: policyKinds(p.Policy),
				skip: fmt.Sprintf("targets rule %s of route %s/%s, the request matched rule %q", *t.RuleName, rt.namespace, rt.name, r.RuleName)})
			continue
		}
		if t.RuleName != nil {
			src.target += " rule " + *t.RuleName
		}
		rt.policies = append(rt.policies, policyTarget{src: src, kinds: policyKinds(p.Policy)})
		for i, rl := range p.Policy.LocalRateLimit {
			limits = append(limits, limitEntry{bucket: dp.bucket(p.Name.Namespace+"/"+p.Name.Name+"/"+rt.key, rl), spec: rl, src: src, index: i})
		}
		if p.Policy.RemoteRateLimit != nil {
			remotes = append(remotes, p.Policy.RemoteRateLimit)
			rt.remoteFrom = append(rt.remoteFrom, src)
		}
	}
	if r.Policies != nil {
		src := policySource{policy: -1, target: "route " + rt.namespace + "/" + rt.name}
		for i, rl := range r.Policies.LocalRateLimit {
			limits = append(limits, limitEntry{bucket: dp.bucket(fmt.Sprintf("%s/inline/%d", rt.key, i), rl), spec: rl, src: src, index: i})
		}
		if r.Policies.RemoteRateLimit != nil {
			remotes = append(remotes, r.Policies.RemoteRateLimit)
			rt.remoteFrom = append(rt.remoteFrom, src)
			rt.inlineRemote = r.Policies.RemoteRateLimit
		}
	}
	rt.limits = limits
	buckets := make([]*ratelimit.Bucket, 0, len(limits))
	for _, le := range limits {
		buckets = append(buckets, le.bucket)
	}
	if len(buckets) > 0 {
		rt.set = ratelimit.NewSet(buckets...)
		rt.tokens = rt.set.HasTokens()
	}
	for _, rr := range remotes {
		conn, err := dp.rlsConn(rr.Host)
		if err != nil {
			return nil, fmt.Errorf("route %s: remoteRateLimit: %w", rt.key, err)
		}
		lim, err := remote.New(conn, rr.Remote())
		if err != nil {
			return nil, fmt.Errorf("route %s: remoteRateLimit: %w", rt.key, err)
		}
		rt.remote = append(rt.remote, lim)
		rt.tokens = rt.tokens || lim.Tokens()
	}
	rt.effective = make(map[string]any, len(effectivePolicyKeys))
	for _, k := range effectivePolicyKeys {
		rt.effective[k] = nil
	}
	if len(limits) > 0 {
		ls := make([]any, 0, len(limits))
		for _, le := range limits {
			ls = append(ls, effectiveLimit(le.spec))
		}
		rt.effective["localRateLimit"] = ls
	}
	if len(remotes) > 0 {
		rs := make([]any, 0, len(remotes))
		for _, rr := range remotes {
			rs = append(rs, remoteEffective(rr))
		}
		rt.effective["remoteRateLimit"] = rs
	}

	for _, bk := range r.Backends {
		be := dp.backend(bk)
		rt.backends = append(rt.backends, be)
		rt.weights += be.weight
	}
	return rt, nil
}

// effectiveLimit is a local limit entry as effectivePolicy and the dump
// show it.
func effectiveLimit(l config.RateLimit) map[string]any {
	typ := l.Type
	if typ == "" {
		typ = string(ratelimit.Requests)
	}
	return map[string]any{"maxTokens": l.MaxTokens, "tokensPerFill": l.TokensPerFill,
		"fillInterval": l.FillInterval.String(), "type": typ}
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

// matchSpecs are a config route's matches in routing's shape, which is
// also the dump's.
func matchSpecs(ms []config.Match) []routing.MatchSpec {
	out := make([]routing.MatchSpec, 0, len(ms))
	for _, m := range ms {
		s := routing.MatchSpec{Method: m.Method, Headers: valueSpecs(m.Headers), Query: valueSpecs(m.Query)}
		if p := m.Path; p != nil {
			s.Path = &routing.PathSpec{Exact: p.Exact, PathPrefix: p.PathPrefix, Regex: p.Regex}
		}
		out = append(out, s)
	}
	return out
}

func valueSpecs(hs []config.HeaderMatch) []routing.ValueSpec {
	var out []routing.ValueSpec
	for _, h := range hs {
		out = append(out, routing.ValueSpec{Name: h.Name, Value: routing.StringSpec{Exact: h.Value.Exact, Regex: h.Value.Regex}})
	}
	return out
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
