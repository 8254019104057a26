package config

import (
	"encoding/json"
	"log/slog"
	"reflect"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/gwdiag/gwdiag/golden/trace/redact"
)

// File is a standalone config file as written, in any of the reference
// implementation's styles: binds (spec part 2.2), gateways with routes
// (what its current docs and its binary's default config use), and the llm
// shorthand. Parse decodes it and maps it onto Config (normalize.go).
// Top-level keys refproxy does not implement (frontendPolicies other than
// logging, workloads, services, backends, routeGroups, tcpRoutes, mcp, ui)
// are refused when they configure anything.
type File struct {
	Config           *Settings         `yaml:"config"`
	Binds            []Bind            `yaml:"binds"`
	FrontendPolicies *FrontendPolicies `yaml:"frontendPolicies"`
	Policies         []Policy          `yaml:"policies"`
	Gateways         Gateways          `yaml:"gateways"`
	Routes           []AttachedRoute   `yaml:"routes"`
	LLM              *LLM              `yaml:"llm"`
}

// Gateways are the gateways of the file, in its order.
type Gateways []NamedGateway

// NamedGateway is one entry of the gateways map.
type NamedGateway struct {
	Name string
	Gateway
}

func (g *Gateways) decodeYAML(d *decoder, n *yaml.Node, path string, segs []string) error {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return d.fail(n, path, "want a mapping of gateway names, got %s", kindName(n))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		ng := NamedGateway{Name: k.Value}
		if err := d.decode(n.Content[i+1], refValue(&ng.Gateway), join(path, k.Value), append(segs[:len(segs):len(segs)], k.Value)); err != nil {
			return err
		}
		*g = append(*g, ng)
	}
	return nil
}

// Gateway is one gateway: a port and its listeners (one, named after
// nothing, when none are given), with policies for all their routes. Only
// HTTP is implemented; protocol HTTPS, TCP or TLS and tls are refused.
type Gateway struct {
	Port            *uint16           `yaml:"port"`
	Protocol        string            `yaml:"protocol"`
	Listeners       []GatewayListener `yaml:"listeners"`
	GatewayPolicies `yaml:",inline"`
}

// GatewayListener is one listener of a gateway, named for references as
// <gateway>/<name> (default listener<i>).
type GatewayListener struct {
	Name            string `yaml:"name"`
	Hostname        string `yaml:"hostname"`
	Protocol        string `yaml:"protocol"`
	GatewayPolicies `yaml:",inline"`
}

// AttachedRoute is a top-level route, attached to gateways: <gateway>
// (every listener) or <gateway>/<listener>; default the gateway named
// default.
type AttachedRoute struct {
	Gateways GatewayRefs `yaml:"gateways"`
	Route    `yaml:",inline"`
}

// GatewayRefs is one gateway reference or a list of them.
type GatewayRefs []string

func (r *GatewayRefs) decodeYAML(d *decoder, n *yaml.Node, path string, segs []string) error {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		*r = GatewayRefs{n.Value}
		return nil
	}
	var s []string
	if err := d.decode(n, refValue(&s), path, segs); err != nil {
		return err
	}
	*r = s
	return nil
}

// LLM is the llm shorthand: models served on a port of their own (port,
// default 4000) or on gateways, under the OpenAI paths (/v1/chat/completions,
// /v1/models, ...). A request's model picks the model entry (exact name,
// or a name with one * at its start or end; the most specific wins).
// refproxy implements OpenAI-compatible providers (openai, and presets
// given a params.baseUrl); virtual models, tls and the other providers
// are refused.
type LLM struct {
	Gateways  GatewayRefs   `yaml:"gateways"`
	Port      *uint16       `yaml:"port"`
	Providers []LLMProvider `yaml:"providers"`
	Models    []LLMModel    `yaml:"models"`
	Policies  *LLMPolicies  `yaml:"policies"`
}

// LLMModel is one model entry of llm.models.
type LLMModel struct {
	// ID, when set, names the model's backend (llm:model:<id>).
	ID   string `yaml:"id"`
	Name string `yaml:"name"`
	// Visibility internal keeps the model from being requested directly.
	Visibility string          `yaml:"visibility"`
	Params     LLMParams       `yaml:"params"`
	Provider   LLMProviderKind `yaml:"provider"`
	// Matches, when set, add header conditions to the model name's.
	Matches []LLMRouteMatch `yaml:"matches"`
}

// LLMRouteMatch is a set of header conditions that must all hold.
type LLMRouteMatch struct {
	Headers []HeaderMatch `yaml:"headers"`
}

// LLMParams customise the request to the provider.
type LLMParams struct {
	// Model replaces the request's model.
	Model string `yaml:"model"`
	// APIKey is sent as a bearer token; $VAR and ${VAR} read the environment.
	APIKey Secret `yaml:"apiKey"`
	// BaseURL is the provider's endpoint and base path
	// (http://127.0.0.1:8001/v1); https is TLS.
	BaseURL      string `yaml:"baseUrl"`
	HostOverride string `yaml:"hostOverride"`
	PathOverride string `yaml:"pathOverride"`
	PathPrefix   string `yaml:"pathPrefix"`
	Tokenize     bool   `yaml:"tokenize"`
}

// Secret is a credential of the config (an API key, a token): an inline
// value; the reference's {file: path} form is refused. Its value is
// string(s). Wherever a config is shown, it reads "<redacted>", as the
// reference's serializer writes its own (ser_redact): printed with fmt (an
// error, a log line), logged by slog, marshalled to JSON (/config_dump,
// effectivePolicy) or YAML. An auth policy's keys, a backend's token: each
// secret field of the config is a Secret, so that none needs its own care.
type Secret string

// String is "<redacted>" (empty for an empty secret): fmt's %v, %s and %q
// show no secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redact.Marker
}

// GoString is String quoted: %#v shows no secret either.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// LogValue is String: slog shows no secret.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON writes String.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalYAML writes String.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

func (s *Secret) decodeYAML(d *decoder, n *yaml.Node, path string, segs []string) error {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.MappingNode {
		d.refuse(path+".file", "a secret read from a file")
		return nil
	}
	var v string
	if err := d.decode(n, refValue(&v), path, segs); err != nil {
		return err
	}
	*s = Secret(v)
	return nil
}

// LLMProvider is a named provider of llm.providers that models refer to.
type LLMProvider struct {
	Name     string          `yaml:"name"`
	Params   LLMParams       `yaml:"params"`
	Provider LLMProviderKind `yaml:"provider"`
}

// LLMProviderKind is a model's provider: a name (openAI, groq, ...), or a
// reference to an llm.providers entry. The custom form is refused.
type LLMProviderKind struct {
	Name      string
	Reference string
}

func (k *LLMProviderKind) decodeYAML(d *decoder, n *yaml.Node, path string, segs []string) error {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode {
		k.Name = n.Value
		return nil
	}
	var v struct {
		Reference string `yaml:"reference"`
	}
	if n.Kind == yaml.MappingNode && len(n.Content) == 2 && n.Content[0].Value == "custom" {
		d.refuse(path+".custom", "custom LLM provider formats")
		return nil
	}
	if err := d.decode(n, refValue(&v), path, segs); err != nil {
		return err
	}
	k.Reference = v.Reference
	return nil
}

// LLMPolicies are llm.policies: for every request, before a model is
// picked. refproxy implements localRateLimit, remoteRateLimit, cors,
// authorization, apiKey, basicAuth and jwtAuth.
type LLMPolicies struct {
	LocalRateLimit   []RateLimit      `yaml:"localRateLimit"`
	RemoteRateLimit  *RemoteRateLimit `yaml:"remoteRateLimit"`
	CORS             *CORS            `yaml:"cors"`
	Authorization    *Authorization   `yaml:"authorization"`
	APIKey           *APIKeyAuth      `yaml:"apiKey"`
	BasicAuth        *BasicAuth       `yaml:"basicAuth"`
	JWTAuth          *JWTAuth         `yaml:"jwtAuth"`
	RateLimitError   string           `yaml:"rateLimitError"`
	RateLimitHeaders []string         `yaml:"rateLimitHeaders"`
}

// LLMRouter is an llm route's models, in the order they are tried: most
// specific name first, then the file's order.
type LLMRouter struct {
	Models []RouterModel
}

// RouterModel is one model of an LLMRouter.
type RouterModel struct {
	// Pattern is the model name: exact, "*", "prefix*" or "*suffix".
	Pattern string
	// Internal models are not requested directly (only virtual models,
	// which refproxy does not implement, would reach them).
	Internal bool
	// Matches are alternative sets of header conditions; none means any.
	Matches [][]HeaderMatch
	// Backend is the model's provider (an AI backend).
	Backend Backend
}

// FrontendPolicies are the policies of every connection and request
// (frontendPolicies). accessLog (logging) and tracing (the per-policy
// form; config.tracing is served), which change no traffic, are accepted
// and ignored; the others are refused.
type FrontendPolicies struct{}

func (*FrontendPolicies) decodeField(d *decoder, key, val *yaml.Node, path string, _ []string) (bool, error) {
	switch key.Value {
	case "accessLog", "logging":
		d.ignore(path, "refproxy writes no access log")
	case "tracing":
		d.ignore(path, "the per-policy tracing form; refproxy exports spans with config.tracing (docs/otlp.md)")
	default:
		if !unset(val) {
			d.refuse(path, "")
		}
	}
	return true, nil
}

// refValue is the settable value behind a pointer.
func refValue(p any) reflect.Value { return reflect.ValueOf(p).Elem() }
