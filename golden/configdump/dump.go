// Package configdump is the /config_dump document in the reference
// implementation's shapes (agentgateway): refproxy writes it, and the CLI
// and the suite read real dumps and refproxy's through it. The published
// schema (config_dump.schema.json) types binds and routes; it leaves
// backends, services and policies open, and this package gives them the
// shapes the real proxy writes (shared/real-world/agentgateway/README.md).
//
// It is a leaf: it imports nothing of refproxy, so a reader of dumps takes
// nothing else of the reference proxy.
package configdump

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"gopkg.in/yaml.v3"
)

// Dump is one /config_dump document. Parts that gwdiag only passes through
// (workloads, models) stay raw.
type Dump struct {
	Workloads []json.RawMessage `json:"workloads"`
	Services  []Service         `json:"services"`
	Binds     []Bind            `json:"binds"`
	Routes    *Routes           `json:"routes"`
	Policies  []Policy          `json:"policies"`
	Backends  []Backend         `json:"backends"`
	Models    []json.RawMessage `json:"models"`
}

// Bind is a listening address and its listeners, keyed by listener key.
type Bind struct {
	Key            string              `json:"key"`
	Address        string              `json:"address"`
	Protocol       string              `json:"protocol"`
	TunnelProtocol string              `json:"tunnelProtocol"`
	Mode           string              `json:"mode"`
	Listeners      map[string]Listener `json:"listeners"`
}

// Listener is one listener of a gateway; its routes are keyed by route key.
type Listener struct {
	Key              string `json:"key"`
	GatewayName      string `json:"gatewayName"`
	GatewayNamespace string `json:"gatewayNamespace"`
	ListenerName     string `json:"listenerName"`
	Hostname         string `json:"hostname"`
	// Protocol is "HTTP", "TCP", ... or an object such as {"HTTPS": {...}}.
	Protocol  any              `json:"protocol"`
	Routes    map[string]Route `json:"routes,omitempty"`
	TCPRoutes map[string]any   `json:"tcpRoutes,omitempty"`
}

// Routes is the top-level routes block: route groups keyed twice.
type Routes struct {
	HTTPMesh    map[string]map[string]Route `json:"httpMesh"`
	TCPMesh     map[string]map[string]any   `json:"tcpMesh"`
	RouteGroups map[string]map[string]Route `json:"routeGroups"`
}

// Route is one HTTP route.
type Route struct {
	Key       string   `json:"key"`
	Name      string   `json:"name"`
	Namespace string   `json:"namespace"`
	RuleName  *string  `json:"ruleName,omitempty"`
	Hostnames []string `json:"hostnames,omitempty"`
	// Matches are kept as JSON values: their fields vary by match kind.
	Matches  []any          `json:"matches,omitempty"`
	Backends []RouteBackend `json:"backends,omitempty"`
	// InlinePolicies are one-key objects: {"timeout": {...}}, {"retry": {...}}.
	InlinePolicies []map[string]any `json:"inlinePolicies,omitempty"`
}

// RouteBackend is a route's reference to a backend: exactly one of Service,
// Backend (a backend's "namespace/name"), InlineBackend or RouteGroup.
type RouteBackend struct {
	Weight        uint64      `json:"weight"`
	Service       *ServiceRef `json:"service,omitempty"`
	Backend       string      `json:"backend,omitempty"`
	InlineBackend string      `json:"inlineBackend,omitempty"`
	RouteGroup    string      `json:"routeGroup,omitempty"`
	// InlinePolicies are the backend's own policies for this route, one
	// kind per object: {"backendAuth": {...}}.
	InlinePolicies []map[string]any `json:"inlinePolicies,omitempty"`
}

// ServiceRef is a route's reference to a Service port. Name is a
// "namespace/hostname" string or a {namespace, hostname} object.
type ServiceRef struct {
	Name any    `json:"name"`
	Port uint64 `json:"port"`
}

// Service is a cluster Service with its endpoints and their statistics.
type Service struct {
	Name      string        `json:"name"`
	Namespace string        `json:"namespace"`
	Hostname  string        `json:"hostname"`
	Endpoints []EndpointSet `json:"endpoints"`
}

// EndpointSet holds endpoints in use (Active) and those taken out of
// rotation (Rejected, e.g. evicted), each keyed by a uid
// ("//Pod/default/echo-b") or a provider name.
type EndpointSet struct {
	Active   map[string]EndpointEntry `json:"active"`
	Rejected map[string]EndpointEntry `json:"rejected"`
}

// EndpointEntry is one endpoint: what it is (open: {workloadUid, port,
// status}, {name}, ...) and its statistics.
type EndpointEntry struct {
	Endpoint map[string]any `json:"endpoint,omitempty"`
	Info     Info           `json:"info"`
}

// Info is an endpoint's statistics. The real proxy writes services'
// statistics in snake_case and AI providers' in camelCase; a reader takes
// either (Latency, Requests).
type Info struct {
	// Health is the endpoint's health score, 0 to 1.
	Health float64 `json:"health"`
	// RequestLatency is the mean latency in seconds (snake_case form).
	RequestLatency *float64 `json:"request_latency,omitempty"`
	// TotalRequests is the number of requests (snake_case form).
	TotalRequests *uint64 `json:"total_requests,omitempty"`
	// RequestLatencyCamel and TotalRequestsCamel are the camelCase forms.
	RequestLatencyCamel *float64 `json:"requestLatency,omitempty"`
	TotalRequestsCamel  *uint64  `json:"totalRequests,omitempty"`
	// EvictedUntil is how long the endpoint stays evicted ("3.34s"), empty
	// when it is not.
	EvictedUntil string `json:"evictedUntil,omitempty"`
}

// Latency is the mean request latency in seconds, whichever form is set.
func (i Info) Latency() float64 { return eitherForm(i.RequestLatency, i.RequestLatencyCamel) }

// Requests is the number of requests, whichever form is set.
func (i Info) Requests() uint64 { return eitherForm(i.TotalRequests, i.TotalRequestsCamel) }

// eitherForm is the value of a field the dump writes in one of two forms:
// the first when set, else the second, else zero.
func eitherForm[T any](first, second *T) T {
	switch {
	case first != nil:
		return *first
	case second != nil:
		return *second
	}
	var zero T
	return zero
}

// Backend is one item of backends[]: {"backend": {<variant>: spec}}, the
// variant being host, ai, mcp, ...
type Backend struct {
	Backend map[string]BackendSpec `json:"backend"`
}

// BackendSpec is a backend of any variant.
type BackendSpec struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Target is a host:port string (host backends) or an object; AI
	// backends carry {"providers": [EndpointSet, ...]}.
	Target any `json:"target,omitempty"`
	// Endpoints is a refproxy extension: the statistics of a host backend's
	// endpoint in the services[] shape. The real proxy keeps none for host
	// backends; its readers (agctl) ignore the field.
	Endpoints []EndpointSet `json:"endpoints,omitempty"`
}

// Providers returns an AI backend's provider endpoint sets (none for a
// plain string target).
func (b BackendSpec) Providers() []EndpointSet {
	t, ok := b.Target.(map[string]any)
	if !ok {
		return nil
	}
	raw, err := json.Marshal(t["providers"])
	if err != nil {
		return nil
	}
	var out []EndpointSet
	if json.Unmarshal(raw, &out) != nil {
		return nil
	}
	return out
}

// Policy is one item of policies[].
type Policy struct {
	Key  string       `json:"key"`
	Name ResourceName `json:"name"`
	// Target is {<kind>: {...}}: gateway {gatewayName, gatewayNamespace,
	// listenerName}, route {name, namespace, ruleName}, backend {...}.
	Target map[string]any `json:"target"`
	// Policy is {<section>: {<kind>: spec, ...}}, the section being
	// traffic (with a phase), frontend or backend.
	Policy map[string]any `json:"policy"`
}

// ResourceName names the resource a policy came from.
type ResourceName struct {
	Kind      string `json:"kind,omitempty"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// Parse reads a dump written as JSON (what /config_dump answers) or YAML
// (what `config all -o yaml` writes). Errors say where the document is
// wrong: the line and column for syntax, the field for a wrong type.
func Parse(b []byte) (*Dump, error) {
	j, err := asJSON(b)
	if err != nil {
		return nil, err
	}
	var d Dump
	if err := json.Unmarshal(j, &d); err != nil {
		return nil, describe(j, err)
	}
	return &d, nil
}

// Generic reads a dump as plain JSON values, keeping every field (also
// those Dump does not name), for writing it out whole. It accepts what
// Parse accepts.
func Generic(b []byte) (map[string]any, error) {
	if _, err := Parse(b); err != nil {
		return nil, err
	}
	j, _ := asJSON(b)
	var v map[string]any
	dec := json.NewDecoder(bytes.NewReader(j))
	// Numbers as written: a re-serialised dump keeps them digit for digit.
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, describe(j, err)
	}
	return v, nil
}

// AsJSON returns the dump b as JSON: b itself, or YAML b (what `config all
// -o yaml` writes) re-encoded as JSON, so that both forms go through one
// decoder (and one redaction). It checks no more than that b is a JSON
// or YAML object: Parse says what is wrong with a dump.
func AsJSON(b []byte) ([]byte, error) { return asJSON(b) }

// asJSON is AsJSON.
func asJSON(b []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("empty document")
	}
	if trimmed[0] == '{' {
		return b, nil
	}
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("neither JSON nor YAML: %w", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("want an object (binds, backends, services, policies, ...), got %s", kindOf(v))
	}
	j, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("YAML with no JSON form: %w", err)
	}
	return j, nil
}

// jsonKind names what JSON a Go type is read from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number >= 0"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return t.String()
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "nothing"
	case []any:
		return "a list"
	case string:
		return "a string"
	}
	return fmt.Sprintf("%T", v)
}

// describe adds the line and column of a JSON error.
func describe(b []byte, err error) error {
	var off int64
	switch e := err.(type) {
	case *json.SyntaxError:
		off = e.Offset
	case *json.UnmarshalTypeError:
		off = e.Offset
		if e.Field != "" {
			err = fmt.Errorf("field %s: want %s, got a JSON %s", e.Field, jsonKind(e.Type), e.Value)
		}
	default:
		return err
	}
	// The offset is just past the byte in error (the end of a value of the
	// wrong type): report that byte's place.
	line, col := 1, 1
	for _, c := range b[:max(0, min(int(off)-1, len(b)))] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Errorf("line %d, column %d: %w", line, col, err)
}
