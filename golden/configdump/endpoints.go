package configdump

import (
	"cmp"
	"slices"
	"strings"
)

// Endpoint types of EndpointStat.
const (
	TypeService = "Service"
	TypeBackend = "Backend"
)

// EndpointStat is one endpoint with its statistics, wherever the dump keeps
// them: services[].endpoints[] (TypeService), an AI backend's
// target.providers[] or refproxy's host backend endpoints[] (TypeBackend).
type EndpointStat struct {
	Type      string
	Name      string
	Namespace string
	// Endpoint names the endpoint: the last part of its uid
	// ("//Pod/default/echo-b" gives "echo-b"), a provider's name, or
	// host:port.
	Endpoint string
	Info     Info
}

// Endpoints lists every endpoint of d with statistics, sorted by type,
// namespace, name and endpoint (agctl's order). A host backend of the real
// proxy, whose target is a plain string, has none.
func (d *Dump) Endpoints() []EndpointStat {
	var out []EndpointStat
	add := func(typ, name, ns string, sets []EndpointSet) {
		for _, set := range sets {
			for _, m := range []map[string]EndpointEntry{set.Active, set.Rejected} {
				for uid, e := range m {
					out = append(out, EndpointStat{Type: typ, Name: name, Namespace: ns, Endpoint: endpointName(uid), Info: e.Info})
				}
			}
		}
	}
	for _, s := range d.Services {
		add(TypeService, s.Name, s.Namespace, s.Endpoints)
	}
	for _, b := range d.Backends {
		for _, spec := range b.Backend {
			add(TypeBackend, spec.Name, spec.Namespace, spec.Providers())
			add(TypeBackend, spec.Name, spec.Namespace, spec.Endpoints)
		}
	}
	slices.SortFunc(out, func(a, b EndpointStat) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Namespace, b.Namespace),
			cmp.Compare(a.Name, b.Name), cmp.Compare(a.Endpoint, b.Endpoint),
			cmp.Compare(a.Info.Requests(), b.Info.Requests()))
	})
	return out
}

// endpointName is the last part of a workload uid; other keys (a provider
// name, host:port) stay whole.
func endpointName(uid string) string {
	if i := strings.LastIndexByte(uid, '/'); i >= 0 && i < len(uid)-1 {
		return uid[i+1:]
	}
	return uid
}
