package controller

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/api/v1alpha1"
	"github.com/gwdiag/gwdiag/refproxy/config"
)

// Model is what a Gateway's data plane is made from: the Gateway, the
// routes accepted on its listeners, the policies of this controller that
// apply to it or to those routes, and the ready endpoints of each backend.
type Model struct {
	Gateway  *gwv1.Gateway
	Routes   []AttachedRoute
	Policies []v1alpha1.GatewayPolicy
	// Endpoints maps "namespace/service:port" to the ready pod endpoints
	// (ip:port) behind that Service port.
	Endpoints map[string][]string
}

// AttachedRoute is an HTTPRoute with the listeners of the Gateway that
// take it.
type AttachedRoute struct {
	Route     *gwv1.HTTPRoute
	Listeners []gwv1.SectionName
}

// routeKey is the cluster form of a route key in traces, as the reference
// implementation writes it: "namespace/route.<rule><match>.http"
// (REFERENCE.md: "httpbin/httpbin.00.http").
func routeKey(namespace, name string, rule, match int) string {
	return fmt.Sprintf("%s/%s.%d%d.http", namespace, name, rule, match)
}

// adminAddr is where the data plane's admin server listens in the pod:
// loopback only, reached through a port-forward.
const adminAddr = "127.0.0.1:15000"

// Translate builds refproxy's standalone config for m: a bind per listener
// port, a listener per Gateway listener, a route per rule and match of each
// attached route (with its cluster key), the route's backends as the ready
// endpoints of their Services, weighted, and the policies' limits. A
// backend Service with no ready endpoint keeps its place under its cluster
// DNS name, so that requests to it fail as unreachable rather than fall
// through to another route.
func Translate(m Model) (*config.Config, error) {
	cfg := &config.Config{Config: &config.Settings{AdminAddr: adminAddr}}
	bindOf := map[gwv1.PortNumber]int{}
	for _, l := range m.Gateway.Spec.Listeners {
		if !supportedProtocols[l.Protocol] {
			continue
		}
		bi, ok := bindOf[l.Port]
		if !ok {
			bi = len(cfg.Binds)
			bindOf[l.Port] = bi
			cfg.Binds = append(cfg.Binds, config.Bind{Port: uint16(l.Port)})
		}
		cl := config.Listener{Name: string(l.Name), Protocol: "HTTP"}
		if l.Hostname != nil {
			cl.Hostname = string(*l.Hostname)
		}
		for _, ar := range m.Routes {
			if !slices.Contains(ar.Listeners, l.Name) {
				continue
			}
			routes, err := translateRoute(ar.Route, m.Endpoints)
			if err != nil {
				return nil, err
			}
			cl.Routes = append(cl.Routes, routes...)
		}
		cfg.Binds[bi].Listeners = append(cfg.Binds[bi].Listeners, cl)
	}
	for _, p := range m.Policies {
		cps, err := translatePolicy(m.Gateway, &p)
		if err != nil {
			return nil, err
		}
		cfg.Policies = append(cfg.Policies, cps...)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("translated config of Gateway %s/%s: %w", m.Gateway.Namespace, m.Gateway.Name, err)
	}
	return cfg, nil
}

func translateRoute(r *gwv1.HTTPRoute, endpoints map[string][]string) ([]config.Route, error) {
	var out []config.Route
	hosts := make([]string, 0, len(r.Spec.Hostnames))
	for _, h := range r.Spec.Hostnames {
		hosts = append(hosts, string(h))
	}
	for ri, rule := range r.Spec.Rules {
		matches := rule.Matches
		if len(matches) == 0 {
			matches = []gwv1.HTTPRouteMatch{{}}
		}
		backends := translateBackends(r.Namespace, rule.BackendRefs, endpoints)
		for mi, match := range matches {
			cm := Match(match)
			cr := config.Route{
				Key: routeKey(r.Namespace, r.Name, ri, mi), Name: r.Name, Namespace: r.Namespace,
				Hostnames: hosts, Matches: []config.Match{cm}, Backends: backends,
			}
			if rule.Name != nil {
				cr.RuleName = string(*rule.Name)
			}
			out = append(out, cr)
		}
	}
	return out, nil
}

// Match is a Gateway API match as refproxy's config, its data plane and
// gwdiag's what-if hold one (config.Match is routing.MatchSpec): the one
// translation of an HTTPRoute's match.
func Match(m gwv1.HTTPRouteMatch) config.Match {
	var cm config.Match
	if m.Path != nil && m.Path.Value != nil {
		v := *m.Path.Value
		switch ptr.Deref(m.Path.Type, gwv1.PathMatchPathPrefix) {
		case gwv1.PathMatchExact:
			cm.Path = &config.PathMatch{Exact: &v}
		case gwv1.PathMatchRegularExpression:
			cm.Path = &config.PathMatch{Regex: &v}
		default:
			cm.Path = &config.PathMatch{PathPrefix: &v}
		}
	}
	if m.Method != nil {
		cm.Method = string(*m.Method)
	}
	for _, h := range m.Headers {
		cm.Headers = append(cm.Headers, valueMatch(string(h.Name), h.Value,
			ptr.Deref(h.Type, gwv1.HeaderMatchExact) == gwv1.HeaderMatchRegularExpression))
	}
	for _, q := range m.QueryParams {
		cm.Query = append(cm.Query, valueMatch(string(q.Name), q.Value,
			ptr.Deref(q.Type, gwv1.QueryParamMatchExact) == gwv1.QueryParamMatchRegularExpression))
	}
	return cm
}

// valueMatch is a header or query parameter match: the value as a regular
// expression or exactly.
func valueMatch(name, value string, regex bool) config.HeaderMatch {
	m := config.HeaderMatch{Name: name}
	if regex {
		m.Value.Regex = &value
	} else {
		m.Value.Exact = &value
	}
	return m
}

// translateBackends turns a rule's Service references into weighted
// backends, one per ready endpoint, a reference's weight split among its
// endpoints.
func translateBackends(ns string, refs []gwv1.HTTPBackendRef, endpoints map[string][]string) []config.Backend {
	var out []config.Backend
	for _, br := range refs {
		bns := ns
		if br.Namespace != nil {
			bns = string(*br.Namespace)
		}
		var port int32
		if br.Port != nil {
			port = int32(*br.Port)
		}
		weight := uint32(1)
		if br.Weight != nil {
			if *br.Weight == 0 {
				continue
			}
			weight = uint32(*br.Weight)
		}
		// Each endpoint names its Service, so that /config_dump lists it
		// under services[] as the reference implementation does.
		svc := &config.ServiceOf{Name: string(br.Name), Namespace: bns, Port: uint16(port)}
		eps := endpoints[ServicePortKey(bns, string(br.Name), port)]
		if len(eps) == 0 {
			out = append(out, config.Backend{Host: fmt.Sprintf("%s:%d", svc.Hostname(), port), Weight: &weight, ServiceOf: svc})
			continue
		}
		for _, ep := range eps {
			out = append(out, config.Backend{Host: ep, Weight: &weight, ServiceOf: svc})
		}
	}
	return out
}

// ServicePortKey is the key of Model.Endpoints.
func ServicePortKey(namespace, name string, port int32) string {
	return fmt.Sprintf("%s/%s:%d", namespace, name, port)
}

var localUnits = map[v1alpha1.RateLimitUnit]time.Duration{v1alpha1.UnitSeconds: time.Second, v1alpha1.UnitMinutes: time.Minute, v1alpha1.UnitHours: time.Hour}

// translatePolicy turns a valid policy into refproxy's top-level policies:
// one per target, the gateway phase for a Gateway (or one of its
// listeners), the route phase for an HTTPRoute.
func translatePolicy(gw *gwv1.Gateway, p *v1alpha1.GatewayPolicy) ([]config.Policy, error) {
	if p.Spec.Traffic == nil || p.Spec.Traffic.RateLimit == nil {
		return nil, nil
	}
	rl := p.Spec.Traffic.RateLimit
	var pol config.Policies
	for i, l := range rl.Local {
		amount, typ := ptr.Deref(l.Requests, 0), "requests"
		if l.Tokens != nil {
			amount, typ = *l.Tokens, "tokens"
		}
		unit, ok := localUnits[l.Unit]
		if !ok || amount < 1 {
			return nil, fmt.Errorf("GatewayPolicy %s/%s: spec.traffic.rateLimit.local[%d]: invalid", p.Namespace, p.Name, i)
		}
		pol.LocalRateLimit = append(pol.LocalRateLimit, config.RateLimit{
			MaxTokens: uint64(amount + ptr.Deref(l.Burst, 0)), TokensPerFill: uint64(amount), FillInterval: config.Duration(unit), Type: typ, Key: l.Key})
	}
	if rl.Global != nil {
		pol.RemoteRateLimit = remoteRateLimit(p.Namespace, rl.Global)
	}
	var out []config.Policy
	for i, t := range p.Spec.TargetRefs {
		cp := config.Policy{Name: config.ResourceName{Name: fmt.Sprintf("%s.%d", p.Name, i), Namespace: p.Namespace}, Policy: pol}
		switch t.Kind {
		case "Gateway":
			if string(t.Name) != gw.Name || p.Namespace != gw.Namespace {
				continue
			}
			for _, l := range gw.Spec.Listeners {
				if t.SectionName != nil && *t.SectionName != l.Name || !supportedProtocols[l.Protocol] {
					continue
				}
				lcp := cp
				lcp.Name.Name = fmt.Sprintf("%s.%d.%s", p.Name, i, l.Name)
				port := uint16(l.Port)
				lcp.Target.Gateway = &config.GatewayTarget{GatewayName: fmt.Sprintf("bind/%d", port), GatewayNamespace: config.DefaultNamespace,
					ListenerName: ptr.To(string(l.Name)), Port: &port}
				lcp.Phase = "gateway"
				out = append(out, lcp)
			}
		case "HTTPRoute":
			cp.Target.Route = &config.RouteTarget{Name: string(t.Name), Namespace: p.Namespace}
			if t.SectionName != nil {
				cp.Target.Route.RuleName = ptr.To(string(*t.SectionName))
			}
			cp.Phase = "route"
			out = append(out, cp)
		}
	}
	return out, nil
}
