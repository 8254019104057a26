package proxy

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"reflect"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gwdiag/gwdiag/golden/configdump"
	"github.com/gwdiag/gwdiag/golden/routing"
	"github.com/gwdiag/gwdiag/golden/trace/redact"
	"github.com/gwdiag/gwdiag/refproxy/config"
)

// endpointStats counts the calls to one backend endpoint.
type endpointStats struct {
	requests  atomic.Uint64
	successes atomic.Uint64
	latencyNs atomic.Uint64
}

func (s *endpointStats) record(d time.Duration, ok bool) {
	s.requests.Add(1)
	if ok {
		s.successes.Add(1)
	}
	s.latencyNs.Add(uint64(d.Nanoseconds()))
}

// Snapshot returns requests, health (success ratio, 1 with no requests) and
// mean latency in milliseconds.
func (s *endpointStats) Snapshot() (requests uint64, health, latencyMs float64) {
	n := s.requests.Load()
	if n == 0 {
		return 0, 1, 0
	}
	return n, float64(s.successes.Load()) / float64(n), float64(s.latencyNs.Load()) / float64(n) / 1e6
}

// bindAddr is the address a bind listens on: the bound one (port 0 resolved)
// while it serves, else the configured host and port.
func (dp *Dataplane) bindAddr(bt *bindTable) string {
	dp.applyMu.Lock()
	defer dp.applyMu.Unlock()
	if s, ok := dp.servers[bt.key]; ok {
		return s.ln.Addr().String()
	}
	return net.JoinHostPort(dp.opts.BindHost, strconv.Itoa(int(bt.port)))
}

// Dump is the /config_dump document in the reference implementation's
// shapes (package configdump), valid against its published schema. Each
// backend carries its endpoint's statistics: an AI backend under
// target.providers[] as the reference does, a host backend under endpoints[]
// (a refproxy extension: the reference keeps none for host backends, and
// its readers ignore the field).
func (dp *Dataplane) Dump() *configdump.Dump {
	d := &configdump.Dump{
		Workloads: []json.RawMessage{}, Services: []configdump.Service{}, Binds: []configdump.Bind{},
		Routes:   &configdump.Routes{HTTPMesh: map[string]map[string]configdump.Route{}, TCPMesh: map[string]map[string]any{}, RouteGroups: map[string]map[string]configdump.Route{}},
		Policies: []configdump.Policy{}, Backends: []configdump.Backend{}, Models: []json.RawMessage{},
	}
	t := dp.table.Load()
	if t == nil {
		return d
	}
	seen := map[*endpointStats]bool{}
	services := map[config.ServiceOf]*configdump.Service{}
	for _, bt := range t.binds {
		listeners := map[string]configdump.Listener{}
		for _, l := range bt.listeners {
			routes := map[string]configdump.Route{}
			for _, rt := range l.routes {
				routes[rt.key] = dumpRoute(rt, t.secretHeaders)
				for _, be := range rt.allBackends() {
					if seen[be.stats] {
						continue
					}
					seen[be.stats] = true
					if be.service == nil {
						d.Backends = append(d.Backends, dumpBackend(be))
						continue
					}
					// An endpoint of a Service: listed under the Service,
					// as the reference lists a cluster's endpoints.
					svc := *be.service
					svc.Port = 0 // one entry per Service, its ports together
					s, ok := services[svc]
					if !ok {
						s = &configdump.Service{Name: svc.Name, Namespace: svc.Namespace, Hostname: svc.Hostname(),
							Endpoints: []configdump.EndpointSet{{Active: map[string]configdump.EndpointEntry{}, Rejected: map[string]configdump.EndpointEntry{}}}}
						services[svc] = s
					}
					s.Endpoints[0].Active[be.addr] = endpointEntry(be, false)
				}
			}
			listeners[l.key] = configdump.Listener{
				Key: l.key, GatewayName: bt.gateway, GatewayNamespace: config.DefaultNamespace,
				ListenerName: l.name, Hostname: l.hostname, Protocol: "HTTP", Routes: routes,
			}
		}
		d.Binds = append(d.Binds, configdump.Bind{Key: bt.gateway, Address: dp.bindAddr(bt), Protocol: "http",
			TunnelProtocol: "direct", Mode: "standard", Listeners: listeners})
	}
	for _, s := range services {
		d.Services = append(d.Services, *s)
	}
	slices.SortFunc(d.Services, func(a, b configdump.Service) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for _, p := range t.cfg.Policies {
		d.Policies = append(d.Policies, dumpPolicies(p, t.secretHeaders)...)
	}
	slices.SortStableFunc(d.Backends, func(a, b configdump.Backend) int {
		return cmp.Compare(backendName(a), backendName(b))
	})
	return d
}

func backendName(b configdump.Backend) string {
	for _, spec := range b.Backend {
		return spec.Name
	}
	return ""
}

// dumpBackend is one backend with its endpoint's statistics.
func dumpBackend(be *backend) configdump.Backend {
	entries := map[string]configdump.EndpointEntry{be.addr: endpointEntry(be, be.ai)}
	set := []configdump.EndpointSet{{Active: entries, Rejected: map[string]configdump.EndpointEntry{}}}
	if be.ai {
		return configdump.Backend{Backend: map[string]configdump.BackendSpec{"ai": {
			Name: be.name, Namespace: config.DefaultNamespace, Target: map[string]any{"providers": set},
		}}}
	}
	return configdump.Backend{Backend: map[string]configdump.BackendSpec{"host": {
		Name: be.name, Namespace: config.DefaultNamespace, Target: be.addr, Endpoints: set,
	}}}
}

// endpointEntry is an endpoint's statistics; the reference writes an AI
// provider's in camelCase and a Service endpoint's in snake_case.
func endpointEntry(be *backend, camel bool) configdump.EndpointEntry {
	n, health, latMs := be.stats.Snapshot()
	lat := latMs / 1000
	e := configdump.EndpointEntry{Endpoint: map[string]any{"address": be.addr}, Info: configdump.Info{Health: health}}
	if camel {
		e.Info.RequestLatencyCamel, e.Info.TotalRequestsCamel = &lat, &n
	} else {
		e.Info.RequestLatency, e.Info.TotalRequests = &lat, &n
	}
	return e
}

// dumpPolicies is a configured policy as the reference lists it: one entry
// per kind, {key, name, target, policy: {traffic: {phase, <kind>: spec}}}.
func dumpPolicies(p config.Policy, secrets *redact.Redactor) []configdump.Policy {
	var target map[string]any
	if b, err := json.Marshal(p.Target); err == nil {
		_ = json.Unmarshal(b, &target)
	}
	phase := cmp.Or(p.Phase, "route")
	ns := cmp.Or(p.Name.Namespace, config.DefaultNamespace)
	// Every kind the policy sets, as the config writes it; the auth
	// policies in the reference's shapes, their secrets redacted, and
	// backendAuth as the backend policy it is.
	kinds, _ := asJSON(p.Policy).(map[string]any)
	kinds = configShown(kinds, secrets)
	var out []configdump.Policy
	for _, kind := range slices.Sorted(maps.Keys(kinds)) {
		key := fmt.Sprintf("traffic/%s/%s:%s:%s", ns, p.Name.Name, kind, targetKey(p.Target))
		policy := map[string]any{"traffic": map[string]any{"phase": phase, kind: kinds[kind]}}
		if name, shape, ok := authDumpShape(&p.Policy, kind); ok {
			policy = map[string]any{"traffic": map[string]any{"phase": phase, name: shape}}
			if kind == kindBackendAuth {
				key = fmt.Sprintf("%s/%s:%s:%s", ns, p.Name.Name, kind, targetKey(p.Target))
				policy = map[string]any{"backend": map[string]any{name: shape}}
			}
		}
		out = append(out, configdump.Policy{
			Key:    key,
			Name:   configdump.ResourceName{Name: p.Name.Name, Namespace: ns},
			Target: target,
			Policy: policy,
		})
	}
	return out
}

// targetKey is the target part of a policy key: namespace/name of the
// gateway (and listener) or route.
func targetKey(t config.PolicyTarget) string {
	switch {
	case t.Gateway != nil:
		k := t.Gateway.GatewayNamespace + "/" + t.Gateway.GatewayName
		if t.Gateway.ListenerName != nil {
			k += "/" + *t.Gateway.ListenerName
		}
		return k
	case t.Route != nil:
		k := t.Route.Namespace + "/" + t.Route.Name
		if t.Route.RuleName != nil {
			k += "/" + *t.Route.RuleName
		}
		return k
	}
	return ""
}

// allBackends are the backends a route may send to: its own, or its LLM
// models'.
func (rt *route) allBackends() []*backend {
	if rt.llm == nil {
		return rt.backends
	}
	out := make([]*backend, 0, len(rt.llm.models))
	for _, m := range rt.llm.models {
		out = append(out, m.be)
	}
	return out
}

func dumpRoute(rt *route, secrets *redact.Redactor) configdump.Route {
	// The matches as written, in the shape the config and the dump share
	// (routing.MatchSpec), so the dump can be matched against again
	// (gwdiag config explain).
	matches := []any{}
	for i := range rt.match.Matches {
		matches = append(matches, dumpMatch(rt.match.Matches[i].Spec(), secrets))
	}
	backends := []configdump.RouteBackend{}
	refd := map[config.ServiceOf]bool{}
	for _, be := range rt.allBackends() {
		if so := be.service; so != nil {
			// The endpoints of one Service port are one reference to it.
			if !refd[*so] {
				refd[*so] = true
				backends = append(backends, configdump.RouteBackend{Weight: be.weight,
					Service: &configdump.ServiceRef{Name: so.Namespace + "/" + so.Hostname(), Port: uint64(so.Port)}})
			}
			continue
		}
		// A backend reference is the backend's namespace/name, with the
		// backend's own policies (backendAuth, redacted).
		rb := configdump.RouteBackend{Weight: be.weight, Backend: config.DefaultNamespace + "/" + be.name}
		if be.auth != nil {
			rb.InlinePolicies = []map[string]any{{dumpAuthKinds[kindBackendAuth]: backendAuthShape(be.auth.cfg)}}
		}
		backends = append(backends, rb)
	}
	inline := ownPolicies(rt, secrets)
	hostnames := rt.match.Hostnames
	if hostnames == nil {
		hostnames = []string{}
	}
	return configdump.Route{Key: rt.key, Name: rt.name, Namespace: rt.namespace, Hostnames: hostnames,
		Matches: matches, Backends: backends, InlinePolicies: inline}
}

// ownPolicies are the route's inline policies, one object per kind, in
// effectivePolicy's key order; the top-level policies that apply to it
// are under policies[] with their targets, as the reference lists them.
func ownPolicies(rt *route, secrets *redact.Redactor) []map[string]any {
	out := []map[string]any{}
	own := rt.own
	if own == nil {
		return out
	}
	var limits []any
	for _, le := range rt.limits {
		if le.src.policy >= 0 {
			continue
		}
		m := effectiveLimit(le.spec)
		if le.conditional {
			m["condition"] = nil
			if le.condition != "" {
				m["condition"] = le.condition
			}
		}
		limits = append(limits, m)
	}
	kinds := map[string]any{}
	if limits != nil {
		kinds["localRateLimit"] = limits
	}
	if own.RemoteRateLimit != nil {
		kinds["remoteRateLimit"] = remoteEffective(own.RemoteRateLimit)
	}
	for k, v := range map[string]any{"cors": own.CORS, "authorization": own.Authorization, "directResponse": own.DirectResponse,
		"requestHeaderModifier": own.RequestHeaderModifier, "responseHeaderModifier": own.ResponseHeaderModifier} {
		if !reflect.ValueOf(v).IsNil() {
			kinds[k] = asJSON(v)
		}
	}
	kinds = configShown(kinds, secrets)
	for _, k := range effectivePolicyKeys {
		if v, ok := kinds[k]; ok {
			out = append(out, map[string]any{k: v})
		}
	}
	// The auth policies, in the reference's shapes and names, their
	// secrets redacted.
	for _, k := range []string{"jwtAuth", "basicAuth", "apiKey", "backendAuth"} {
		if name, shape, ok := authDumpShape(own, k); ok {
			out = append(out, map[string]any{name: shape})
		}
	}
	if own.RateLimitError != "" {
		// After the spec's kinds, as effectivePolicy has it.
		out = append(out, map[string]any{"rateLimitError": own.RateLimitError})
	}
	if own.RateLimitHeaders != nil {
		out = append(out, map[string]any{"rateLimitHeaders": own.RateLimitHeaders})
	}
	return out
}

// dumpMatch is a match as the dump writes it: always with a path (the
// schema requires one; no path is a "/" prefix); the value a condition on
// a credential header wants (secrets names them) reads "<redacted>".
func dumpMatch(s routing.MatchSpec, secrets *redact.Redactor) any {
	if s.Path == nil {
		root := "/"
		s.Path = &routing.PathSpec{PathPrefix: &root}
	}
	s.Headers = slices.Clone(s.Headers)
	for i, h := range s.Headers {
		if !secrets.Sensitive(h.Name) {
			continue
		}
		marker := redact.Marker
		if h.Value.Exact != nil {
			s.Headers[i].Value.Exact = &marker
		}
		if h.Value.Regex != nil {
			s.Headers[i].Value.Regex = &marker
		}
	}
	var v any
	if b, err := json.Marshal(s); err == nil {
		_ = json.Unmarshal(b, &v)
	}
	return v
}
