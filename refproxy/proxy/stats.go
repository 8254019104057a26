package proxy

import (
	"net"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gwdiag/gwdiag/refproxy/config"
)

// EndpointStats counts the calls to one backend endpoint.
type EndpointStats struct {
	requests  atomic.Uint64
	successes atomic.Uint64
	latencyNs atomic.Uint64
}

func (s *EndpointStats) record(d time.Duration, ok bool) {
	s.requests.Add(1)
	if ok {
		s.successes.Add(1)
	}
	s.latencyNs.Add(uint64(d.Nanoseconds()))
}

// Snapshot returns requests, health (success ratio, 1 with no requests) and
// mean latency in milliseconds.
func (s *EndpointStats) Snapshot() (requests uint64, health, latencyMs float64) {
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

// Dump is the /config_dump document: the shape of the reference
// config_dump.schema.json, with endpoint stats on backends.
func (dp *Dataplane) Dump() map[string]any {
	t := dp.table.Load()
	binds := []any{}
	backends := []any{}
	policies := []any{}
	if t != nil {
		seen := map[*EndpointStats]bool{}
		for _, bt := range t.binds {
			listeners := map[string]any{}
			for _, l := range bt.listeners {
				routes := map[string]any{}
				for _, rt := range l.routes {
					routes[rt.key] = dumpRoute(rt)
					for _, be := range rt.backends {
						if seen[be.stats] {
							continue
						}
						seen[be.stats] = true
						n, health, lat := be.stats.Snapshot()
						backends = append(backends, map[string]any{
							"name": be.name, "namespace": config.DefaultNamespace, "type": "Backend",
							"endpoints": []any{map[string]any{"address": be.addr, "health": health,
								"requests": n, "latencyMs": lat, "evictedFor": ""}},
						})
					}
				}
				hostname := l.hostname
				listeners[l.key] = map[string]any{
					"key": l.key, "gatewayName": bt.gateway, "gatewayNamespace": config.DefaultNamespace,
					"listenerName": l.name, "hostname": hostname, "protocol": "HTTP", "routes": routes,
				}
			}
			addr := dp.bindAddr(bt)
			binds = append(binds, map[string]any{
				"key": bt.gateway, "address": addr, "protocol": "http", "tunnelProtocol": "direct",
				"mode": "standard", "listeners": listeners,
			})
		}
		for _, p := range t.cfg.Policies {
			policies = append(policies, p)
		}
		sort.SliceStable(backends, func(i, j int) bool {
			return backends[i].(map[string]any)["name"].(string) < backends[j].(map[string]any)["name"].(string)
		})
	}
	return map[string]any{
		"workloads": []any{}, "services": []any{}, "binds": binds,
		"routes":   map[string]any{"httpMesh": map[string]any{}, "tcpMesh": map[string]any{}, "routeGroups": map[string]any{}},
		"policies": policies, "backends": backends, "models": []any{},
	}
}

func dumpRoute(rt *route) map[string]any {
	matches := []any{}
	for _, m := range rt.matches {
		var path map[string]any
		switch {
		case m.regex != nil:
			// Strip the anchors added at compile time.
			s := m.regex.String()
			path = map[string]any{"regex": s[len("^(?:") : len(s)-len(")$")]}
		case m.exact != "":
			path = map[string]any{"exact": m.exact}
		default:
			path = map[string]any{"pathPrefix": m.prefix}
		}
		dm := map[string]any{"path": path}
		if m.method != "" {
			dm["method"] = m.method
		}
		if len(m.headers) > 0 {
			hs := []any{}
			for _, h := range m.headers {
				v := map[string]any{}
				if h.exact != nil {
					v["exact"] = *h.exact
				} else if h.regex != nil {
					s := h.regex.String()
					v["regex"] = s[len("^(?:") : len(s)-len(")$")]
				}
				hs = append(hs, map[string]any{"name": h.name, "value": v})
			}
			dm["headers"] = hs
		}
		matches = append(matches, dm)
	}
	backends := []any{}
	for _, be := range rt.backends {
		backends = append(backends, map[string]any{"weight": be.weight, "backend": be.name})
	}
	inline := []any{}
	if rl := rt.effective["localRateLimit"]; rl != nil {
		inline = append(inline, map[string]any{"localRateLimit": rl})
	}
	hostnames := rt.hostnames
	if hostnames == nil {
		hostnames = []string{}
	}
	return map[string]any{
		"key": rt.key, "name": rt.name, "namespace": rt.namespace, "hostnames": hostnames,
		"matches": matches, "backends": backends, "inlinePolicies": inline,
	}
}
