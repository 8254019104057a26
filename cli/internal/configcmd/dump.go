package configcmd

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gwdiag/gwdiag/golden/configdump"
)

// summary is what `gwdiag config all` shows: the routes, backends and
// policies the proxy has loaded, not the raw dump.
type summary struct {
	Routes   []routeSummaryRow
	Backends []backendSummary
	Policies []policySummary
}

// routeSummaryRow is one route with where it listens, what it matches, where
// it sends traffic and which policies it carries inline.
type routeSummaryRow struct {
	Name      string
	Namespace string
	Key       string
	Bind      string
	Listener  string
	Hostnames []string
	Matches   []string
	Backends  []string
	Policies  []string
}

// backendSummary is one backend (or Service) with its target and traffic.
type backendSummary struct {
	// Type is the backend variant (host, ai, mcp, ...) or "service".
	Type      string
	Name      string
	Namespace string
	Target    string
	Endpoints int
	Requests  uint64
}

// policySummary is one policy: its name, what it targets and its kinds
// (retry, timeout, health, localRateLimit, frontend http, ...).
type policySummary struct {
	Name   string
	Key    string
	Target string
	Kinds  []string
}

// summarize builds the summary of a dump. Every list is sorted, so the same
// dump gives the same summary whatever order its maps were read in.
func summarize(d *configdump.Dump) summary {
	s := summary{}
	seen := map[string]bool{}
	for _, b := range d.Binds {
		for _, lk := range sortedKeys(b.Listeners) {
			l := b.Listeners[lk]
			for _, rk := range sortedKeys(l.Routes) {
				rs := routeSummary(l.Routes[rk])
				rs.Bind, rs.Listener = b.Key, cmp.Or(l.ListenerName, l.Key)
				seen[rs.Key] = true
				s.Routes = append(s.Routes, rs)
			}
		}
	}
	// Routes that live outside binds (mesh routes, route groups).
	if d.Routes != nil {
		for _, group := range []map[string]map[string]configdump.Route{d.Routes.HTTPMesh, d.Routes.RouteGroups} {
			for _, gk := range sortedKeys(group) {
				for _, rk := range sortedKeys(group[gk]) {
					if rs := routeSummary(group[gk][rk]); !seen[rs.Key] {
						seen[rs.Key] = true
						s.Routes = append(s.Routes, rs)
					}
				}
			}
		}
	}
	requests := map[[3]string]struct {
		n         uint64
		endpoints int
	}{}
	for _, e := range d.Endpoints() {
		k := [3]string{e.Type, e.Namespace, e.Name}
		r := requests[k]
		r.n += e.Info.Requests()
		r.endpoints++
		requests[k] = r
	}
	for _, sv := range d.Services {
		r := requests[[3]string{configdump.TypeService, sv.Namespace, sv.Name}]
		s.Backends = append(s.Backends, backendSummary{Type: "service", Name: sv.Name, Namespace: sv.Namespace,
			Target: sv.Hostname, Endpoints: r.endpoints, Requests: r.n})
	}
	for _, b := range d.Backends {
		for _, variant := range sortedKeys(b.Backend) {
			spec := b.Backend[variant]
			r := requests[[3]string{configdump.TypeBackend, spec.Namespace, spec.Name}]
			s.Backends = append(s.Backends, backendSummary{Type: variant, Name: spec.Name, Namespace: spec.Namespace,
				Target: targetText(spec), Endpoints: r.endpoints, Requests: r.n})
		}
	}
	for _, p := range d.Policies {
		s.Policies = append(s.Policies, policySummary{Name: qualified(p.Name.Namespace, p.Name.Name), Key: p.Key,
			Target: policyTarget(p.Target), Kinds: policyKinds(p.Policy)})
	}
	slices.SortStableFunc(s.Routes, func(a, b routeSummaryRow) int {
		return cmp.Or(cmp.Compare(a.Bind, b.Bind), cmp.Compare(a.Listener, b.Listener), cmp.Compare(a.Key, b.Key))
	})
	slices.SortStableFunc(s.Backends, func(a, b backendSummary) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	slices.SortStableFunc(s.Policies, func(a, b policySummary) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Target, b.Target), cmp.Compare(a.Key, b.Key))
	})
	return s
}

func routeSummary(r configdump.Route) routeSummaryRow {
	rs := routeSummaryRow{Name: r.Name, Namespace: r.Namespace, Key: r.Key, Hostnames: r.Hostnames}
	for _, m := range r.Matches {
		rs.Matches = append(rs.Matches, matchText(m))
	}
	for _, b := range r.Backends {
		rs.Backends = append(rs.Backends, backendRef(b))
	}
	for _, p := range r.InlinePolicies {
		for k, v := range p {
			if v != nil {
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
		return compact(m)
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

func backendRef(b configdump.RouteBackend) string {
	switch {
	case b.Service != nil:
		name := b.Service.Name
		if nm, ok := name.(map[string]any); ok {
			name = qualified(str(nm["namespace"]), str(nm["hostname"]))
		}
		return fmt.Sprintf("%v:%d", name, b.Service.Port)
	case b.Backend != "":
		return b.Backend
	case b.InlineBackend != "":
		return b.InlineBackend
	case b.RouteGroup != "":
		return "routeGroup " + b.RouteGroup
	}
	return "invalid"
}

// targetText is a backend's target: host:port, or for an AI backend its
// number of providers.
func targetText(spec configdump.BackendSpec) string {
	switch t := spec.Target.(type) {
	case string:
		return t
	case nil:
		return ""
	}
	if n := len(spec.Providers()); n > 0 {
		return fmt.Sprintf("%d provider(s)", n)
	}
	return compact(spec.Target)
}

// policyTarget renders a policy target: "gateway ns/name", "gateway ns/name
// listener http", "route ns/name rule r", "backend service ns/host"; a shape
// it does not know stays as compact JSON (keys sorted) so nothing is hidden.
func policyTarget(t map[string]any) string {
	var parts []string
	for _, kind := range sortedKeys(t) {
		ref, _ := t[kind].(map[string]any)
		var text string
		switch {
		case kind == "gateway" && ref != nil:
			text = "gateway " + qualified(str(ref["gatewayNamespace"]), str(ref["gatewayName"]))
			if l := str(ref["listenerName"]); l != "" {
				text += " listener " + l
			}
		case kind == "route" && ref != nil:
			text = "route " + qualified(str(ref["namespace"]), str(ref["name"]))
			if r := str(ref["ruleName"]); r != "" {
				text += " rule " + r
			}
		case kind == "backend" && ref != nil && len(ref) == 1:
			for sub, v := range ref {
				if vm, ok := v.(map[string]any); ok && str(vm["hostname"]) != "" {
					text = "backend " + sub + " " + qualified(str(vm["namespace"]), str(vm["hostname"]))
				} else if ok && str(vm["name"]) != "" {
					text = "backend " + sub + " " + qualified(str(vm["namespace"]), str(vm["name"]))
				}
			}
		}
		if text == "" {
			text = kind + " " + compact(t[kind])
		}
		parts = append(parts, text)
	}
	return strings.Join(parts, ", ")
}

// policyKinds names each kind a policy holds: {traffic: {phase, retry}} is
// "retry", {frontend: {hTTP: ...}} "frontend http", {backend: {health}}
// "health". A kind set to null is not held.
func policyKinds(p map[string]any) []string {
	var kinds []string
	for _, section := range sortedKeys(p) {
		inner, ok := p[section].(map[string]any)
		if !ok || !policySections[section] {
			// Not sectioned: the key is the kind.
			if p[section] != nil {
				kinds = append(kinds, section)
			}
			continue
		}
		for _, k := range sortedKeys(inner) {
			if k == "phase" || inner[k] == nil {
				continue
			}
			name := kindName(k)
			if section == "frontend" {
				name = "frontend " + name
			}
			kinds = append(kinds, name)
		}
	}
	return kinds
}

// policySections are the reference's policy sections; a key of another
// name is a kind itself.
var policySections = map[string]bool{"traffic": true, "frontend": true, "backend": true}

// kindName undoes the camelCase of an acronym ("hTTP" is "http", "tCP"
// "tcp"); other names stay as written.
func kindName(k string) string {
	if len(k) > 1 && strings.ToUpper(k[1:]) == k[1:] {
		return strings.ToLower(k)
	}
	return k
}

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func sortedKeys[V any](m map[string]V) []string {
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

func compact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
