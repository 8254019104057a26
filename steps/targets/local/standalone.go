package local

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gwdiag/gwdiag/golden/duration"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit"

	"github.com/gwdiag/gwdiag/steps/freeport"
	"github.com/gwdiag/gwdiag/steps/targets"
)

// ConfigStyle is how the standalone config a target writes is laid out:
// both are the reference implementation's format (REFERENCE.md
// "Standalone config and admin"), and mean the same to it.
type ConfigStyle string

// Config styles.
const (
	// StyleBinds: binds with listeners and their routes (spec part 2.2),
	// one bind per listener. The default.
	StyleBinds ConfigStyle = "binds"
	// StyleGateways: a gateway per listener and top-level routes attached
	// to it, as the reference's current docs write them.
	StyleGateways ConfigStyle = "gateways"
)

// Validate checks a style a user gives ("" is binds).
func (s ConfigStyle) Validate() error {
	switch s {
	case "", StyleBinds, StyleGateways:
		return nil
	}
	return fmt.Errorf("--config-style %q: want %s or %s", s, StyleBinds, StyleGateways)
}

// StandaloneConfig renders setup in the standalone config format of the
// reference implementation (REFERENCE.md "Standalone config and admin"),
// in style: one bind (or gateway) per listener on the chosen ports, route
// policies as localRateLimit buckets. backendAddrs maps backend names to
// host:port.
func StandaloneConfig(setup targets.Setup, style ConfigStyle, adminAddr string, ports map[string]int, backendAddrs map[string]string) ([]byte, error) {
	type node = map[string]any
	kinds := map[string]targets.BackendKind{}
	keys := map[string]string{}
	for _, b := range setup.Backends {
		kinds[b.Name] = b.Kind
		keys[b.Name] = b.APIKey
	}
	binds, gateways, attached := []any{}, node{}, []any{}
	for _, l := range setup.Listeners {
		port, ok := ports[l.Name]
		if !ok {
			return nil, fmt.Errorf("standalone config: no port chosen for listener %q", l.Name)
		}
		routes := []any{}
		for _, r := range l.Routes {
			addr, ok := backendAddrs[r.Backend]
			if !ok {
				return nil, fmt.Errorf("standalone config: route %q: unknown backend %q", r.Name, r.Backend)
			}
			backend := node{"host": addr}
			if kinds[r.Backend] == targets.BackendLLM {
				// An LLM provider backend, as token limits need on real proxies.
				backend = node{"ai": node{"name": r.Backend, "provider": node{"openAI": node{}}, "hostOverride": addr}}
				if k := keys[r.Backend]; k != "" {
					// The provider's key, as the reference sends it: a
					// backendAuth policy of the backend (Authorization: Bearer).
					backend["policies"] = node{"backendAuth": node{"key": k}}
				}
			}
			match := node{"path": node{"pathPrefix": r.PathPrefix}}
			if r.Method != "" {
				match["method"] = r.Method
			}
			if h := r.Header; h != nil {
				match["headers"] = []any{node{"name": h.Name, "value": node{"exact": h.Value}}}
			}
			route := node{
				"name":     r.Name,
				"matches":  []any{match},
				"backends": []any{backend},
			}
			if len(r.Limits) > 0 {
				buckets, err := bucketsFor(r.Limits)
				if err != nil {
					return nil, fmt.Errorf("standalone config: route %q: %w", r.Name, err)
				}
				route["policies"] = node{"localRateLimit": buckets}
			}
			if r.RateLimitError != "" {
				pol, _ := route["policies"].(node)
				if pol == nil {
					pol = node{}
				}
				pol["rateLimitError"] = r.RateLimitError
				route["policies"] = pol
			}
			if r.RateLimitHeaders != nil {
				pol, _ := route["policies"].(node)
				if pol == nil {
					pol = node{}
				}
				pol["rateLimitHeaders"] = r.RateLimitHeaders
				route["policies"] = pol
			}
			if len(r.Global) > 0 {
				if setup.RateLimitService == "" {
					return nil, fmt.Errorf("standalone config: route %q has global limits and the setup names no rate-limit service", r.Name)
				}
				pol, _ := route["policies"].(node)
				if pol == nil {
					pol = node{}
				}
				pol["remoteRateLimit"] = remoteRateLimit(setup, r)
				route["policies"] = pol
			}
			if style == StyleGateways {
				route["gateways"] = l.Name
				attached = append(attached, route)
			}
			routes = append(routes, route)
		}
		if style == StyleGateways {
			gateways[l.Name] = node{"port": port, "protocol": "HTTP"}
			continue
		}
		binds = append(binds, node{
			"port":      port,
			"listeners": []any{node{"name": l.Name, "protocol": "HTTP", "routes": routes}},
		})
	}
	settings := node{"adminAddr": adminAddr}
	if len(setup.SensitiveHeaders) > 0 {
		settings["sensitiveHeaders"] = setup.SensitiveHeaders
	}
	if setup.OTLPEndpoint != "" {
		tr := node{"otlpEndpoint": setup.OTLPEndpoint, "randomSampling": true}
		if setup.OTLPProtocol != "" {
			tr["otlpProtocol"] = setup.OTLPProtocol
		}
		settings["tracing"] = tr
	}
	doc := node{"config": settings, "binds": binds}
	if style == StyleGateways {
		doc = node{"config": settings, "gateways": gateways, "routes": attached}
	}
	// Gateway-wide limits: a top-level policy on the listener's bind, the
	// standalone gateway "bind/<port>" (a gateway is one too). The listener
	// name keeps it to that bind when several binds share port 0; a
	// gateway's one listener is unnamed.
	var policies []any
	for _, p := range setup.Policies {
		if p.TargetKind != "Gateway" {
			continue // route targets that name no configured route exist only in clusters
		}
		port, ok := ports[p.TargetName]
		if !ok {
			return nil, fmt.Errorf("standalone config: policy %q: no listener %q", p.Name, p.TargetName)
		}
		buckets, err := bucketsFor(p.Limits)
		if err != nil {
			return nil, fmt.Errorf("standalone config: policy %q: %w", p.Name, err)
		}
		gw := node{"gatewayName": "bind/" + strconv.Itoa(port), "gatewayNamespace": "default", "listenerName": p.TargetName}
		if style == StyleGateways {
			delete(gw, "listenerName")
		}
		policies = append(policies, node{
			"name":   node{"name": p.Name, "namespace": "default"},
			"target": node{"gateway": gw},
			"policy": node{"localRateLimit": buckets},
		})
	}
	if len(policies) > 0 {
		doc["policies"] = policies
	}
	return yaml.Marshal(doc)
}

// remoteRateLimit is the reference's remoteRateLimit policy for a route's
// global limits: one descriptor per limit, keyed by the scenario, the route
// and the limit's place, carrying its limit as a limitOverride so that the
// service needs no configuration of its own beyond the domain.
func remoteRateLimit(setup targets.Setup, r targets.Route) map[string]any {
	var descriptors []any
	for i, g := range r.Global {
		entries := []any{
			map[string]any{"key": "gwdiag_scenario", "value": strconv.Quote(setup.RateLimitKey)},
			map[string]any{"key": "gwdiag_route", "value": strconv.Quote(r.Name)},
			map[string]any{"key": "gwdiag_limit", "value": strconv.Quote(strconv.Itoa(i))},
		}
		if g.KeyHeader != "" {
			// The client's part of the descriptor: a CEL value, so each
			// value of the header is counted on its own by the service.
			entries = append(entries, map[string]any{"key": "gwdiag_client", "value": targets.HeaderCEL(g.KeyHeader)})
		}
		d := map[string]any{
			"entries":       entries,
			"type":          string(g.Kind),
			"limitOverride": fmt.Sprintf(`{"unit": %q, "requestsPerUnit": %d}`, g.Unit, g.Amount),
		}
		descriptors = append(descriptors, d)
	}
	mode := "failClosed"
	if r.GlobalFailOpen {
		mode = "failOpen"
	}
	rrl := map[string]any{"host": setup.RateLimitService, "domain": targets.RateLimitDomain,
		"failureMode": mode, "descriptors": descriptors}
	if setup.RateLimitTimeout > 0 {
		rrl["policies"] = map[string]any{"http": map[string]any{"requestTimeout": setup.RateLimitTimeout.String()}}
	}
	return rrl
}

// bucketsFor is bucketFor of each limit, in order.
func bucketsFor(limits []targets.Limit) ([]any, error) {
	var buckets []any
	for _, l := range limits {
		b, err := bucketFor(l)
		if err != nil {
			return nil, err
		}
		buckets = append(buckets, b)
	}
	return buckets, nil
}

// bucketFor maps a policy-resource limit to a token bucket with the one
// mapping the reference proxy and controller use (ratelimit.FromPolicy).
func bucketFor(l targets.Limit) (map[string]any, error) {
	e := ratelimit.PolicyEntry{Unit: l.UnitName(), Burst: &l.Burst}
	if l.Kind == targets.LimitTokens {
		e.Tokens = &l.Amount
	} else {
		e.Requests = &l.Amount
	}
	spec, err := ratelimit.FromPolicy(e)
	if err != nil {
		return nil, err
	}
	b := map[string]any{
		"maxTokens":     spec.MaxTokens,
		"tokensPerFill": spec.TokensPerFill,
		"fillInterval":  duration.Duration(spec.FillInterval).String(),
	}
	if spec.Type == ratelimit.Tokens {
		b["type"] = "tokens"
	}
	if l.KeyHeader != "" {
		// The reference's key: a CEL expression; a request without the
		// header fails it, and shares the bucket of requests without a key.
		b["key"] = l.KeyExpr()
	}
	if l.Shadow {
		b["shadow"] = true
	}
	if l.ShadowHeaders {
		b["shadowHeaders"] = true
	}
	return b, nil
}

// portsMissing makes a machine without free ports the suite's
// environment, never the proxy's failure: the scenario is not run, with
// the fix.
func portsMissing(err error) error {
	if !errors.Is(err, freeport.ErrNoFreePorts) {
		return err
	}
	lo, hi := freeport.Range()
	return targets.Missing("free TCP ports on 127.0.0.1 for the proxy's admin server and listeners",
		fmt.Sprintf("free ports from %d to %d (stop what holds them), then run again", lo, hi), err)
}

// ChoosePorts picks distinct free ports of 127.0.0.1 for the admin server
// (its address) and each listener (by name), for a proxy that binds them
// itself (RetryTakenPorts).
func ChoosePorts(setup targets.Setup) (admin string, ports map[string]int, err error) {
	free, err := freeport.Pick("127.0.0.1", 1+len(setup.Listeners))
	if err != nil {
		return "", nil, portsMissing(err)
	}
	ports = map[string]int{}
	for i, l := range setup.Listeners {
		ports[l.Name] = free[1+i]
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(free[0])), ports, nil
}

// RetryTakenPorts runs start, a proxy's start on ports ChoosePorts picked,
// up to three times while it fails with "address already in use": the
// ports were free when picked, and another program may bind one before the
// proxy does.
func RetryTakenPorts[T any](start func() (T, error)) (v T, err error) {
	for range 3 {
		if v, err = start(); err == nil || !strings.Contains(err.Error(), "address already in use") {
			return v, err
		}
	}
	return v, err
}
