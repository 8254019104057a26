// Package whatif evaluates a request against a saved /config_dump (the
// real proxy's or refproxy's, read through golden/configdump) without
// sending it: the bind and listener it would reach, the route it would
// take and why each other route would not, the policies on that route,
// and its backends. Routes are selected by golden/routing, the matcher
// refproxy's data plane runs, so a what-if and a trace of the same
// request agree.
package whatif

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gwdiag/gwdiag/golden/configdump"
	"github.com/gwdiag/gwdiag/golden/routing"
)

// Request is the request to evaluate.
type Request struct {
	Method string
	// Host is the Host header (a port in it is ignored for matching).
	Host string
	// Path is the request path, percent-decoded, and Query the raw query.
	Path, Query string
	Header      http.Header
	// Port picks the bind; 0 lets the dump decide (its only bind, or the
	// bind of PortHint).
	Port int
	// PortHint is the URL's port, used when Port is 0 and a bind has it.
	PortHint int
}

// Result is what the dump would do with the request.
type Result struct {
	Bind      string
	Listener  *configdump.Listener
	Selection routing.Selection
	// Route is the dump's route the request would take (nil for none).
	Route    *configdump.Route
	Policies []policy
	Backends []backend
	// Skipped are the policies of the route's gateway or name that do not
	// apply to it (another listener or rule), with why.
	Skipped []policy
}

// policy is one policy kind that would apply: where it comes from and
// what it says.
type policy struct {
	Kind string
	// From is "inline" or the policy's namespace/name and target.
	From string
	Spec any
	// Why is, for a skipped policy, why it does not apply.
	Why string
}

// backend is one backend reference of the route and what it points to.
type backend struct {
	Weight uint64
	// Ref is how the route names it: "service ns/host:port", "backend
	// ns/name", "inline host:port".
	Ref string
	// Target is where traffic would go, when the dump says.
	Target string
	// Endpoints counts a service's endpoints (active, rejected).
	Active, Rejected int
	Found            bool
}

// Evaluate selects the bind, listener and route of r in d and gathers the
// route's policies and backends.
func Evaluate(d *configdump.Dump, r Request) (*Result, error) {
	bind, err := pickBind(d, r)
	if err != nil {
		return nil, err
	}
	res := &Result{Bind: bind.Key}
	b, keys, err := routingBind(bind)
	if err != nil {
		return nil, err
	}
	host := strings.ToLower(r.Host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	req := &routing.Request{Method: r.Method, Path: r.Path, Host: host, Query: r.Query}
	res.Selection = b.Explain(req, func(name string) (string, bool) {
		v := r.Header.Values(name)
		if len(v) == 0 {
			return "", false
		}
		return v[0], true
	})
	if l := res.Selection.Listener; l != nil {
		dl := bind.Listeners[keys.listeners[l]]
		res.Listener = &dl
	}
	if rt := res.Selection.Route; rt != nil {
		route := res.Listener.Routes[keys.routes[rt]]
		res.Route = &route
		res.Policies, res.Skipped = policies(d, res.Listener, &route)
		res.Backends = backends(d, &route)
	}
	return res, nil
}

// pickBind is the bind of the request's port: r.Port, else the URL's port
// when a bind has it, else the dump's only bind.
func pickBind(d *configdump.Dump, r Request) (*configdump.Bind, error) {
	if len(d.Binds) == 0 {
		return nil, errors.New("the dump has no binds: the proxy listens on no port")
	}
	var ports []string
	for i := range d.Binds {
		p := bindPort(d.Binds[i])
		if p == 0 {
			continue
		}
		ports = append(ports, strconv.Itoa(p))
		if r.Port != 0 && p == r.Port || r.Port == 0 && r.PortHint != 0 && p == r.PortHint {
			return &d.Binds[i], nil
		}
	}
	switch {
	case r.Port != 0:
		return nil, fmt.Errorf("the dump has no bind on port %d (ports: %s)", r.Port, strings.Join(ports, ", "))
	case len(d.Binds) == 1:
		return &d.Binds[0], nil
	}
	return nil, fmt.Errorf("the dump has %d binds (ports %s): pass --port", len(d.Binds), strings.Join(ports, ", "))
}

// bindPort is a bind's port, from its address ("[::]:3000") or its key
// ("bind/3000"); 0 when neither tells.
func bindPort(b configdump.Bind) int {
	if _, p, err := net.SplitHostPort(b.Address); err == nil {
		if n, err := strconv.Atoi(p); err == nil {
			return n
		}
	}
	if p, ok := strings.CutPrefix(b.Key, "bind/"); ok {
		if n, err := strconv.Atoi(p); err == nil {
			return n
		}
	}
	return 0
}

// dumpKeys map routing's listeners and routes back to the dump's keys.
type dumpKeys struct {
	listeners map[*routing.Listener]string
	routes    map[*routing.Route]string
}

// routingBind compiles a dump's bind for routing, listeners and routes in
// key order (a map's order means nothing).
func routingBind(bind *configdump.Bind) (*routing.Bind, dumpKeys, error) {
	keys := dumpKeys{listeners: map[*routing.Listener]string{}, routes: map[*routing.Route]string{}}
	b := &routing.Bind{}
	for _, lk := range slices.Sorted(maps.Keys(bind.Listeners)) {
		l := bind.Listeners[lk]
		var routes []*routing.Route
		for _, rk := range slices.Sorted(maps.Keys(l.Routes)) {
			dr := l.Routes[rk]
			specs, err := matchSpecs(dr.Matches)
			if err != nil {
				return nil, keys, fmt.Errorf("route %s: %w", rk, err)
			}
			key := cmp.Or(dr.Key, rk)
			rr, err := routing.NewRoute(key, len(routes), dr.Hostnames, specs)
			if err != nil {
				return nil, keys, err
			}
			keys.routes[rr] = rk
			routes = append(routes, rr)
		}
		rl := routing.NewListener(cmp.Or(l.Key, lk), l.Hostname, routes)
		keys.listeners[rl] = lk
		b.Listeners = append(b.Listeners, rl)
	}
	return b, keys, nil
}

// matchSpecs reads a dump route's matches (kept as JSON values by
// configdump) in routing's shape, which is the dump's.
func matchSpecs(ms []any) ([]routing.MatchSpec, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	raw, err := json.Marshal(ms)
	if err != nil {
		return nil, err
	}
	var out []routing.MatchSpec
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("matches: %w", err)
	}
	return out, nil
}

// policies are the route's inline policies, then the dump's policies that
// target its gateway (and listener) or its name (and rule); those that
// name the gateway or route but another listener or rule are skipped.
func policies(d *configdump.Dump, l *configdump.Listener, r *configdump.Route) (applied, skipped []policy) {
	for _, ip := range r.InlinePolicies {
		for _, k := range slices.Sorted(maps.Keys(ip)) {
			applied = append(applied, policy{Kind: k, From: "inline", Spec: ip[k]})
		}
	}
	for _, p := range d.Policies {
		why, ok := targets(p.Target, l, r)
		if !ok && why == "" {
			continue
		}
		from := p.Name.Namespace + "/" + p.Name.Name
		if p.Name.Kind != "" {
			from = p.Name.Kind + " " + from
		}
		from += " (" + describeTarget(p.Target) + ")"
		for _, section := range slices.Sorted(maps.Keys(p.Policy)) {
			kinds, _ := p.Policy[section].(map[string]any)
			for _, k := range slices.Sorted(maps.Keys(kinds)) {
				if k == "phase" {
					continue
				}
				pol := policy{Kind: k, From: from, Spec: kinds[k]}
				if !ok {
					pol.Why = why
					skipped = append(skipped, pol)
					continue
				}
				applied = append(applied, pol)
			}
		}
	}
	return applied, skipped
}

// targets tells whether a policy's target is the route's gateway (and
// listener) or the route (and rule); why says why a target that names
// them does not apply.
func targets(t map[string]any, l *configdump.Listener, r *configdump.Route) (why string, ok bool) {
	if g, isGW := t["gateway"].(map[string]any); isGW {
		if str(g["gatewayName"]) != l.GatewayName || str(g["gatewayNamespace"]) != l.GatewayNamespace {
			return "", false
		}
		if ln := str(g["listenerName"]); ln != "" && ln != l.ListenerName {
			return fmt.Sprintf("targets listener %s, the request reaches listener %s", ln, l.ListenerName), false
		}
		return "", true
	}
	if rt, isRoute := t["route"].(map[string]any); isRoute {
		if str(rt["name"]) != r.Name || str(rt["namespace"]) != r.Namespace {
			return "", false
		}
		if rn := str(rt["ruleName"]); rn != "" && (r.RuleName == nil || *r.RuleName != rn) {
			return fmt.Sprintf("targets rule %s, the request matches rule %s", rn, ptrStr(r.RuleName)), false
		}
		return "", true
	}
	return "", false
}

func describeTarget(t map[string]any) string {
	for _, k := range slices.Sorted(maps.Keys(t)) {
		m, _ := t[k].(map[string]any)
		switch k {
		case "gateway":
			s := "gateway " + str(m["gatewayNamespace"]) + "/" + str(m["gatewayName"])
			if ln := str(m["listenerName"]); ln != "" {
				s += " listener " + ln
			}
			return s
		case "route":
			s := "route " + str(m["namespace"]) + "/" + str(m["name"])
			if rn := str(m["ruleName"]); rn != "" {
				s += " rule " + rn
			}
			return s
		}
		b, _ := json.Marshal(m)
		return k + " " + string(b)
	}
	return "no target"
}

// backends resolves the route's backend references against the dump's
// backends and services.
func backends(d *configdump.Dump, r *configdump.Route) []backend {
	var out []backend
	for _, rb := range r.Backends {
		b := backend{Weight: rb.Weight}
		switch {
		case rb.Service != nil:
			ns, host := serviceName(rb.Service.Name)
			b.Ref = fmt.Sprintf("service %s/%s:%d", ns, host, rb.Service.Port)
			b.Target = fmt.Sprintf("%s:%d", host, rb.Service.Port)
			for _, s := range d.Services {
				if s.Namespace == ns && s.Hostname == host {
					b.Found = true
					for _, set := range s.Endpoints {
						b.Active += len(set.Active)
						b.Rejected += len(set.Rejected)
					}
				}
			}
		case rb.Backend != "":
			b.Ref = "backend " + rb.Backend
			for _, db := range d.Backends {
				for kind, spec := range db.Backend {
					if spec.Namespace+"/"+spec.Name != rb.Backend && spec.Name != rb.Backend {
						continue
					}
					b.Found = true
					b.Ref = kind + " backend " + rb.Backend
					switch t := spec.Target.(type) {
					case string:
						b.Target = t
					case map[string]any:
						for _, p := range spec.Providers() {
							b.Active += len(p.Active)
							b.Rejected += len(p.Rejected)
							for k := range p.Active {
								b.Target = k
							}
						}
					}
				}
			}
		case rb.InlineBackend != "":
			b.Ref, b.Target, b.Found = "inline "+rb.InlineBackend, rb.InlineBackend, true
		case rb.RouteGroup != "":
			b.Ref, b.Found = "route group "+rb.RouteGroup, true
		}
		out = append(out, b)
	}
	return out
}

// serviceName reads a service reference's name: "namespace/hostname" or
// {namespace, hostname}.
func serviceName(v any) (ns, host string) {
	switch n := v.(type) {
	case string:
		ns, host, _ = strings.Cut(n, "/")
		return ns, host
	case map[string]any:
		return str(n["namespace"]), str(n["hostname"])
	}
	return "", ""
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func ptrStr(p *string) string {
	if p == nil {
		return "(none)"
	}
	return *p
}
