package configcmd

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Endpoint is one backend endpoint with its traffic stats, as /config_dump
// carries it (docs/ARCHITECTURE.md, "/config_dump backends with endpoint stats").
type Endpoint struct {
	Address    string  `json:"address"`
	Health     float64 `json:"health"`
	Requests   int64   `json:"requests"`
	LatencyMs  float64 `json:"latencyMs"`
	EvictedFor string  `json:"evictedFor"`
}

// Backend is one item of /config_dump backends[].
type Backend struct {
	Name      string     `json:"name"`
	Namespace string     `json:"namespace"`
	Type      string     `json:"type"`
	Endpoints []Endpoint `json:"endpoints"`
}

// Summary is what `gwdiag config all` shows: the routes, backends and
// policies the proxy has loaded, not the raw dump.
type Summary struct {
	Routes   []RouteSummary   `json:"routes" yaml:"routes"`
	Backends []BackendSummary `json:"backends" yaml:"backends"`
	Policies []PolicySummary  `json:"policies" yaml:"policies"`
}

// RouteSummary is one route with where it listens, what it matches, where
// it sends traffic and which policies it carries inline.
type RouteSummary struct {
	Name      string   `json:"name" yaml:"name"`
	Namespace string   `json:"namespace,omitempty" yaml:"namespace,omitempty"`
	Key       string   `json:"key,omitempty" yaml:"key,omitempty"`
	Bind      string   `json:"bind,omitempty" yaml:"bind,omitempty"`
	Listener  string   `json:"listener,omitempty" yaml:"listener,omitempty"`
	Hostnames []string `json:"hostnames,omitempty" yaml:"hostnames,omitempty"`
	Matches   []string `json:"matches,omitempty" yaml:"matches,omitempty"`
	Backends  []string `json:"backends,omitempty" yaml:"backends,omitempty"`
	Policies  []string `json:"policies,omitempty" yaml:"policies,omitempty"`
}

// BackendSummary is one backend with its endpoint count and traffic.
type BackendSummary struct {
	Name      string `json:"name" yaml:"name"`
	Namespace string `json:"namespace,omitempty" yaml:"namespace,omitempty"`
	Type      string `json:"type,omitempty" yaml:"type,omitempty"`
	Endpoints int    `json:"endpoints" yaml:"endpoints"`
	Requests  int64  `json:"requests" yaml:"requests"`
}

// PolicySummary is one policy: its name, what it targets and its kinds
// (localRateLimit, cors, ...).
type PolicySummary struct {
	Name   string   `json:"name" yaml:"name"`
	Target string   `json:"target,omitempty" yaml:"target,omitempty"`
	Kinds  []string `json:"kinds,omitempty" yaml:"kinds,omitempty"`
}

// dump is the part of /config_dump the summary reads. The reference schema
// leaves most of it open, so routes and policies are read loosely.
type dump struct {
	Binds    []map[string]any `json:"binds"`
	Routes   any              `json:"routes"`
	Policies []any            `json:"policies"`
	Backends []Backend        `json:"backends"`
}

// ParseDump decodes a /config_dump document.
func ParseDump(b []byte) (*dump, error) {
	var d dump
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("not a config dump: %w", err)
	}
	return &d, nil
}

// Summarize builds the summary of a dump.
func Summarize(d *dump) Summary {
	s := Summary{Routes: []RouteSummary{}, Backends: []BackendSummary{}, Policies: []PolicySummary{}}
	for _, b := range d.Binds {
		bind := str(b["key"])
		if bind == "" {
			bind = str(b["address"])
		}
		if bind == "" {
			if p, ok := b["port"].(float64); ok {
				bind = fmt.Sprintf("%d", int(p))
			}
		}
		for _, l := range items(b["listeners"]) {
			lm, _ := l.(map[string]any)
			lname := first(str(lm["listenerName"]), str(lm["name"]), str(lm["key"]))
			for _, r := range items(lm["routes"]) {
				if rm, ok := r.(map[string]any); ok {
					rs := routeSummary(rm)
					rs.Bind, rs.Listener = bind, lname
					s.Routes = append(s.Routes, rs)
				}
			}
		}
	}
	// Dumps that list routes at the top level as well as under binds: add
	// those not already seen.
	seen := map[string]bool{}
	for _, r := range s.Routes {
		seen[r.Key+"|"+r.Name] = true
	}
	for _, r := range topRoutes(d.Routes) {
		rs := routeSummary(r)
		if !seen[rs.Key+"|"+rs.Name] {
			s.Routes = append(s.Routes, rs)
		}
	}
	for _, b := range d.Backends {
		bs := BackendSummary{Name: b.Name, Namespace: b.Namespace, Type: b.Type, Endpoints: len(b.Endpoints)}
		for _, e := range b.Endpoints {
			bs.Requests += e.Requests
		}
		s.Backends = append(s.Backends, bs)
	}
	for _, p := range d.Policies {
		pm, ok := p.(map[string]any)
		if !ok {
			continue
		}
		ps := PolicySummary{Name: first(resourceName(pm["name"]), str(pm["key"])), Target: targetName(pm["target"])}
		src := pm
		if inner, ok := pm["policy"].(map[string]any); ok {
			src = inner
		}
		for k, v := range src {
			if v == nil || k == "name" || k == "key" || k == "target" || k == "policy" {
				continue
			}
			ps.Kinds = append(ps.Kinds, k)
		}
		sort.Strings(ps.Kinds)
		s.Policies = append(s.Policies, ps)
	}
	// Dumps build these lists from maps: sort them so output is stable.
	sort.SliceStable(s.Backends, func(i, j int) bool {
		a, b := s.Backends[i], s.Backends[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	sort.SliceStable(s.Policies, func(i, j int) bool { return s.Policies[i].Name < s.Policies[j].Name })
	return s
}

func routeSummary(r map[string]any) RouteSummary {
	rs := RouteSummary{
		Name:      first(str(r["name"]), str(r["routeName"])),
		Namespace: str(r["namespace"]),
		Key:       str(r["key"]),
	}
	for _, h := range items(r["hostnames"]) {
		rs.Hostnames = append(rs.Hostnames, str(h))
	}
	for _, m := range items(r["matches"]) {
		rs.Matches = append(rs.Matches, matchText(m))
	}
	for _, b := range items(r["backends"]) {
		rs.Backends = append(rs.Backends, backendRef(b))
	}
	if p, ok := r["policies"].(map[string]any); ok {
		for k, v := range p {
			if v != nil {
				rs.Policies = append(rs.Policies, k)
			}
		}
	}
	for _, p := range items(r["inlinePolicies"]) {
		if pm, ok := p.(map[string]any); ok {
			for k := range pm {
				rs.Policies = append(rs.Policies, k)
			}
		}
	}
	sort.Strings(rs.Policies)
	return rs
}

func matchText(m any) string {
	mm, ok := m.(map[string]any)
	if !ok {
		return fmt.Sprint(m)
	}
	var parts []string
	if p, ok := mm["path"].(map[string]any); ok {
		for k, v := range p {
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	for _, k := range []string{"method", "headers", "query"} {
		if v, ok := mm[k]; ok && v != nil {
			parts = append(parts, k+"="+compact(v))
		}
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "any"
	}
	return strings.Join(parts, " ")
}

func backendRef(b any) string {
	bm, ok := b.(map[string]any)
	if !ok {
		return fmt.Sprint(b)
	}
	for _, k := range []string{"host", "backend", "inlineBackend", "name"} {
		if s := str(bm[k]); s != "" {
			return s
		}
	}
	if svc, ok := bm["service"].(map[string]any); ok {
		name := svc["name"]
		if nm, ok := name.(map[string]any); ok {
			name = str(nm["namespace"]) + "/" + str(nm["hostname"])
		}
		return fmt.Sprintf("%v:%v", name, svc["port"])
	}
	if ai, ok := bm["ai"].(map[string]any); ok {
		return "ai/" + str(ai["name"])
	}
	return compact(bm)
}

func topRoutes(v any) []map[string]any {
	var out []map[string]any
	switch t := v.(type) {
	case []any:
		for _, r := range t {
			if rm, ok := r.(map[string]any); ok {
				out = append(out, rm)
			}
		}
	case map[string]any:
		// The reference dump groups routes (httpMesh, routeGroups) by key.
		keys := sortedKeys(t)
		for _, k := range keys {
			group, ok := t[k].(map[string]any)
			if !ok {
				continue
			}
			for _, gk := range sortedKeys(group) {
				inner, ok := group[gk].(map[string]any)
				if !ok {
					continue
				}
				for _, rk := range sortedKeys(inner) {
					if rm, ok := inner[rk].(map[string]any); ok {
						out = append(out, rm)
					}
				}
			}
		}
	}
	return out
}

// items returns the elements of a JSON array, or the values of a JSON object
// in key order (the reference dump keys listeners and routes by name).
func items(v any) []any {
	switch t := v.(type) {
	case []any:
		return t
	case map[string]any:
		out := make([]any, 0, len(t))
		for _, k := range sortedKeys(t) {
			out = append(out, t[k])
		}
		return out
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func str(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case float64:
		return fmt.Sprintf("%v", t)
	}
	return ""
}

func first(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// resourceName renders a name given as a string or as the reference
// implementation's {name, namespace} object as namespace/name.
func resourceName(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return str(v)
	}
	if ns := str(m["namespace"]); ns != "" {
		return ns + "/" + str(m["name"])
	}
	return str(m["name"])
}

// targetName renders a policy target ({gateway: {gatewayName, gatewayNamespace}},
// {route: {name, namespace}}, ...) as "kind namespace/name"; shapes it does not
// know stay as compact JSON so nothing is hidden.
func targetName(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case map[string]any:
		if len(t) != 1 {
			return compact(t)
		}
		for kind, ref := range t {
			rm, ok := ref.(map[string]any)
			if !ok {
				return kind + " " + str(ref)
			}
			var ns, name string
			for k, v := range rm {
				switch {
				case strings.HasSuffix(strings.ToLower(k), "namespace"):
					ns = str(v)
				case strings.HasSuffix(strings.ToLower(k), "name"):
					name = str(v)
				}
			}
			if name == "" {
				return kind + " " + compact(rm)
			}
			if ns != "" {
				name = ns + "/" + name
			}
			return kind + " " + name
		}
	}
	return ""
}

func compact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
