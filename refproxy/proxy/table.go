package proxy

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"github.com/gwdiag/gwdiag/refproxy/config"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit/remote"
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
	// remote are the global limits, gateway-wide first; nil for most routes.
	remote    []*remote.Limiter
	tokens    bool
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
		bt := &bindTable{key: bindKey(bi, b), port: b.Port, gateway: b.GatewayName()}
		for li, l := range b.Listeners {
			lt := &listener{key: config.ListenerKey(b, l, li), name: l.ListenerName(li), hostname: strings.ToLower(l.Hostname)}
			// Gateway-wide buckets are shared by every route of the listener.
			var gw []*ratelimit.Bucket
			var gwLimits []config.RateLimit
			var gwRemote []*config.RemoteRateLimit
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
				for _, rl := range p.Policy.LocalRateLimit {
					gw = append(gw, dp.bucket(p.Name.Namespace+"/"+p.Name.Name+"/"+bt.gateway, rl))
					gwLimits = append(gwLimits, rl)
				}
				if p.Policy.RemoteRateLimit != nil {
					gwRemote = append(gwRemote, p.Policy.RemoteRateLimit)
				}
			}
			for ri, r := range l.Routes {
				rt, err := dp.buildRoute(cfg, b, l, li, r, ri, gw, gwLimits, gwRemote)
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

func (dp *Dataplane) buildRoute(cfg *config.Config, b config.Bind, l config.Listener, li int, r config.Route, ri int, gw []*ratelimit.Bucket, gwLimits []config.RateLimit, gwRemote []*config.RemoteRateLimit) (*route, error) {
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
		for _, h := range m.Headers {
			hm := headerMatch{name: http.CanonicalHeaderKey(h.Name), exact: h.Value.Exact}
			if h.Value.Regex != nil {
				re, err := regexp.Compile("^(?:" + *h.Value.Regex + ")$")
				if err != nil {
					return nil, fmt.Errorf("route %s: %w", rt.key, err)
				}
				hm.regex = re
			}
			cm.headers = append(cm.headers, hm)
		}
		rt.matches = append(rt.matches, cm)
	}

	// Buckets: gateway-wide first, then targeted route policies, then inline.
	buckets := append([]*ratelimit.Bucket(nil), gw...)
	limits := append([]config.RateLimit(nil), gwLimits...)
	remotes := append([]*config.RemoteRateLimit(nil), gwRemote...)
	for _, p := range cfg.Policies {
		t := p.Target.Route
		if t == nil || t.Name != rt.name || t.Namespace != rt.namespace {
			continue
		}
		if t.RuleName != nil && *t.RuleName != r.RuleName {
			continue
		}
		for _, rl := range p.Policy.LocalRateLimit {
			buckets = append(buckets, dp.bucket(p.Name.Namespace+"/"+p.Name.Name+"/"+rt.key, rl))
			limits = append(limits, rl)
		}
		if p.Policy.RemoteRateLimit != nil {
			remotes = append(remotes, p.Policy.RemoteRateLimit)
		}
	}
	if r.Policies != nil {
		for i, rl := range r.Policies.LocalRateLimit {
			buckets = append(buckets, dp.bucket(fmt.Sprintf("%s/inline/%d", rt.key, i), rl))
			limits = append(limits, rl)
		}
		if r.Policies.RemoteRateLimit != nil {
			remotes = append(remotes, r.Policies.RemoteRateLimit)
		}
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
		for _, l := range limits {
			typ := l.Type
			if typ == "" {
				typ = string(ratelimit.Requests)
			}
			ls = append(ls, map[string]any{"maxTokens": l.MaxTokens, "tokensPerFill": l.TokensPerFill,
				"fillInterval": l.FillInterval.String(), "type": typ})
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
