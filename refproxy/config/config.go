// Package config is the standalone config file of the reference proxy: the
// YAML format of the reference implementation (REFERENCE.md, spec part 2.2),
// its types, and a strict loader whose errors name file, line and field.
package config

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/gwdiag/gwdiag/golden/duration"
	"github.com/gwdiag/gwdiag/golden/routing"
	"github.com/gwdiag/gwdiag/refproxy/celexpr"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit/remote"
)

// DefaultAdminAddr is the admin server address when the config sets none.
const DefaultAdminAddr = "127.0.0.1:15000"

// DefaultNamespace is the namespace of standalone listeners, routes and backends.
const DefaultNamespace = "default"

// Config is the runtime model of a standalone config: binds, their
// listeners and routes, and top-level policies. Parse maps every style of
// the reference implementation's file (binds:, gateways: with routes:,
// llm:) onto it; the data plane serves nothing else. The exceptions to the
// reference's schema are a route's key and a backend's serviceOf, which
// only controller-made configs set.
type Config struct {
	// Config holds process settings (config.adminAddr, ...).
	Config *Settings `yaml:"config" json:"config,omitempty"`
	// Binds are the ports the proxy listens on, in order.
	Binds []Bind `yaml:"binds" json:"binds,omitempty"`
	// Policies attach policies to gateways or routes by name.
	Policies []Policy `yaml:"policies" json:"policies,omitempty"`

	// Source is the file name the config came from; empty when built in code.
	Source string `yaml:"-" json:"-"`
	// SourceSum is the SHA-256 of the bytes the config was parsed from
	// (zero when built in code): a proxy that watches its file compares
	// the file with what it runs, never with a later read of the file.
	SourceSum [32]byte `yaml:"-" json:"-"`
	// Ignored are the settings of the file that refproxy accepts and does
	// not act on (they change no traffic: config.tracing, ...), in the
	// order of the file. The proxy logs each once.
	Ignored []Ignored `yaml:"-" json:"-"`
}

// Ignored is a setting accepted and not acted on, and why.
type Ignored struct {
	// Pos is "file:line"; Path the field path, such as config.tracing.
	Pos, Path string
	Why       string
}

func (ig Ignored) String() string {
	return ig.Pos + ": " + ig.Path + ": accepted and ignored (" + ig.Why + ")"
}

// Settings is the top-level `config:` block. Of the reference's settings
// refproxy acts on adminAddr, readinessAddr (the refproxy command),
// logging.filter and logging.level, and sensitiveHeaders; it refuses
// the ones that would change what it serves (xdsAddress, localXdsPath,
// customFunctions) and accepts the rest as Ignored (settings.go).
type Settings struct {
	// AdminAddr is the admin server's host:port (default 127.0.0.1:15000).
	AdminAddr string `yaml:"adminAddr" json:"adminAddr,omitempty"`
	// ReadinessAddr is where the refproxy command answers GET
	// /healthz/ready, unless its --readiness-addr says otherwise; "off" or
	// empty: nowhere.
	ReadinessAddr string `yaml:"readinessAddr" json:"readinessAddr,omitempty"`
	// Logging sets the log filter at start-up, unless the command's
	// --log-level says otherwise.
	Logging *Logging `yaml:"logging" json:"logging,omitempty"`
	// SensitiveHeaders are headers whose values traces redact in addition
	// to refproxy's own (redact.Defaults: authorization, cookie,
	// x-api-key, ...), as the reference's schema says of it ("additional
	// request headers whose values should be redacted from trace and
	// debug output"). They stay redacted when refproxy shows credentials
	// in clear (--trace-credentials-in-clear), which this list does not
	// turn on or off.
	SensitiveHeaders []string `yaml:"sensitiveHeaders" json:"sensitiveHeaders,omitempty"`
	// Tracing is OpenTelemetry export (tracing.go).
	Tracing *Tracing `yaml:"tracing" json:"tracing,omitempty"`
}

// Logging is config.logging: the filter (env_logger syntax) or level, and
// the format. Fields, the access-log database and json output are ignored.
type Logging struct {
	Filter string   `yaml:"filter" json:"filter,omitempty"`
	Level  LogLevel `yaml:"level" json:"level,omitempty"`
	Format string   `yaml:"format" json:"format,omitempty"`
}

// LogLevel is a level or filter, or a list of them (joined with commas).
type LogLevel []string

// LogFilter is the log filter the settings ask for ("" when none):
// logging.filter, else logging.level.
func (c *Config) LogFilter() string {
	if c == nil || c.Config == nil || c.Config.Logging == nil {
		return ""
	}
	if l := c.Config.Logging; l.Filter != "" {
		return l.Filter
	}
	return strings.Join(c.Config.Logging.Level, ",")
}

// ReadinessAddress is config.readinessAddr, "" when unset or "off".
func (c *Config) ReadinessAddress() string {
	if c == nil || c.Config == nil || c.Config.ReadinessAddr == "off" {
		return ""
	}
	return c.Config.ReadinessAddr
}

// Bind is one listening port.
type Bind struct {
	// Port is the TCP port; 0 picks a free one (for tests and embedding).
	Port      uint16     `yaml:"port" json:"port,omitempty"`
	Listeners []Listener `yaml:"listeners" json:"listeners,omitempty"`
	// TunnelProtocol and Mode take only their defaults (direct, standard):
	// refproxy implements no tunnels and no internal binds.
	TunnelProtocol string `yaml:"tunnelProtocol" json:"tunnelProtocol,omitempty"`
	Mode           string `yaml:"mode" json:"mode,omitempty"`
}

// Listener groups routes on a bind; Hostname (optionally a *.wildcard)
// restricts which Host headers it serves.
type Listener struct {
	Name      string  `yaml:"name" json:"name,omitempty"`
	Namespace string  `yaml:"namespace" json:"namespace,omitempty"`
	Hostname  string  `yaml:"hostname" json:"hostname,omitempty"`
	Protocol  string  `yaml:"protocol" json:"protocol,omitempty"`
	Routes    []Route `yaml:"routes" json:"routes,omitempty"`
	// Policies apply to every route of the listener, before the route's
	// own (a gateway's policies in the gateways style).
	Policies *GatewayPolicies `yaml:"policies" json:"policies,omitempty"`
}

// Route is one HTTP route: it matches when any of Matches matches (all of
// them default to a "/" prefix) and any of Hostnames matches the Host.
type Route struct {
	// Key, when set, is the route's identifier in traces in place of the
	// standalone form. The reference controller sets the cluster form,
	// "namespace/route.<rule><match>.http" (a refproxy extension).
	Key       string    `yaml:"key" json:"key,omitempty"`
	Name      string    `yaml:"name" json:"name,omitempty"`
	Namespace string    `yaml:"namespace" json:"namespace,omitempty"`
	RuleName  string    `yaml:"ruleName" json:"ruleName,omitempty"`
	Hostnames []string  `yaml:"hostnames" json:"hostnames,omitempty"`
	Matches   []Match   `yaml:"matches" json:"matches,omitempty"`
	Policies  *Policies `yaml:"policies" json:"policies,omitempty"`
	Backends  []Backend `yaml:"backends" json:"backends,omitempty"`
	// LLM, set only by the llm: style, makes the route an LLM router:
	// the request's model picks one of its models' backends (Backends is
	// then empty).
	LLM *LLMRouter `yaml:"-" json:"-"`
}

// Match is one route match; every set condition must hold. The config,
// the data plane and the dump share routing's type.
type Match = routing.MatchSpec

// PathMatch holds exactly one of Exact, PathPrefix or Regex.
type PathMatch = routing.PathSpec

// HeaderMatch matches one request header (or, in Match.Query, one query
// parameter) by exact value or regex.
type HeaderMatch = routing.ValueSpec

// StringMatch holds exactly one of Exact or Regex.
type StringMatch = routing.StringSpec

// Policies is the policy block of a route or of a top-level policy (the
// reference's FilterOrPolicy). Of the reference's policies refproxy
// implements localRateLimit (both forms), remoteRateLimit,
// requestHeaderModifier, responseHeaderModifier, directResponse, cors,
// authorization, apiKey, basicAuth, jwtAuth and backendAuth (key,
// credentials, passthrough); it refuses the others (policies.go, auth.go).
type Policies struct {
	// LocalRateLimit are limits that all apply.
	LocalRateLimit []RateLimit `yaml:"localRateLimit" json:"localRateLimit,omitempty"`
	// LocalRateLimitConditional is the other form of localRateLimit,
	// {conditional: [...]}: the first entry whose condition holds applies,
	// an entry without one being the fallback.
	LocalRateLimitConditional []ConditionalRateLimit `yaml:"-" json:"-"`
	RemoteRateLimit           *RemoteRateLimit       `yaml:"remoteRateLimit" json:"remoteRateLimit,omitempty"`
	RequestHeaderModifier     *HeaderModifier        `yaml:"requestHeaderModifier" json:"requestHeaderModifier,omitempty"`
	ResponseHeaderModifier    *HeaderModifier        `yaml:"responseHeaderModifier" json:"responseHeaderModifier,omitempty"`
	DirectResponse            *DirectResponse        `yaml:"directResponse" json:"directResponse,omitempty"`
	CORS                      *CORS                  `yaml:"cors" json:"cors,omitempty"`
	Authorization             *Authorization         `yaml:"authorization" json:"authorization,omitempty"`
	// APIKey, BasicAuth and JWTAuth authenticate the request (auth.go);
	// BackendAuth sends credentials to every backend of the route that
	// has none of its own.
	APIKey      *APIKeyAuth  `yaml:"apiKey" json:"apiKey,omitempty"`
	BasicAuth   *BasicAuth   `yaml:"basicAuth" json:"basicAuth,omitempty"`
	JWTAuth     *JWTAuth     `yaml:"jwtAuth" json:"jwtAuth,omitempty"`
	BackendAuth *BackendAuth `yaml:"backendAuth" json:"backendAuth,omitempty"`
	// RateLimitError is the body of the route's 429s: "text" (the
	// default: the spec's "rate limit exceeded"), "openai", the JSON
	// error OpenAI clients parse ({"error": {"message", "type":
	// "rate_limit_error", "code"}}), or "anthropic", Anthropic's ({"type":
	// "error", "error": {"type": "rate_limit_error", "message"}}), for LLM
	// routes. A refproxy extension.
	RateLimitError string `yaml:"rateLimitError,omitempty" json:"rateLimitError,omitempty"`
	// RateLimitHeaders are the header families of the route's rate-limit
	// headers: xRateLimit (the default: the spec's x-ratelimit-*), ietf
	// (RateLimit-Policy and RateLimit), openai, anthropic. A refproxy
	// extension; the most specific policy's list wins.
	RateLimitHeaders []string `yaml:"rateLimitHeaders,omitempty" json:"rateLimitHeaders,omitempty"`
}

// RateLimitError values.
const (
	RateLimitErrorText   = "text"
	RateLimitErrorOpenAI = "openai"
	// RateLimitErrorAnthropic is Anthropic's error shape: {"type":
	// "error", "error": {"type": "rate_limit_error", "message"}}.
	RateLimitErrorAnthropic = "anthropic"
)

// RemoteRateLimit is a global limit: counters kept by an Envoy-compatible
// rate-limit service (envoy.service.ratelimit.v3) and shared by every
// replica that asks it. Of the reference's three ways to name the service,
// refproxy takes host.
type RemoteRateLimit struct {
	// Host is the service's host:port (gRPC, plaintext).
	Host   string `yaml:"host" json:"host,omitempty"`
	Domain string `yaml:"domain" json:"domain,omitempty"`
	// Descriptors are sent with every request that they apply to.
	Descriptors []RateLimitDescriptor `yaml:"descriptors" json:"descriptors,omitempty"`
	// FailureMode is failClosed (the default: 500 when the service cannot
	// answer) or failOpen (the request goes on).
	FailureMode string `yaml:"failureMode" json:"failureMode,omitempty"`
	// Policies of the connection to the service; refproxy reads
	// http.requestTimeout, the bound on each call (default 1s).
	Policies *ServicePolicies `yaml:"policies" json:"policies,omitempty"`
}

// RateLimitDescriptor is one descriptor: entries whose values are CEL
// expressions over the request (request.*, source.address).
type RateLimitDescriptor struct {
	Entries []DescriptorEntry `yaml:"entries" json:"entries,omitempty"`
	// Type is "requests" (the default when empty) or "tokens".
	Type string `yaml:"type" json:"type,omitempty"`
	// LimitOverride is a CEL expression for the limit the service applies
	// instead of its own configuration, e.g.
	// '{"unit": "minute", "requestsPerUnit": 100}'.
	LimitOverride string `yaml:"limitOverride" json:"limitOverride,omitempty"`
}

// DescriptorEntry is a key, and a CEL expression for its value.
type DescriptorEntry struct {
	Key   string `yaml:"key" json:"key,omitempty"`
	Value string `yaml:"value" json:"value,omitempty"`
}

// ServicePolicies are the connection policies of a service.
type ServicePolicies struct {
	HTTP *HTTPPolicy `yaml:"http" json:"http,omitempty"`
}

// HTTPPolicy is the http block of backend policies.
type HTTPPolicy struct {
	RequestTimeout *Duration `yaml:"requestTimeout" json:"requestTimeout,omitempty"`
}

// Remote converts the policy to the remote limiter's.
func (r *RemoteRateLimit) Remote() remote.Policy {
	mode, _ := remote.ParseFailureMode(r.FailureMode)
	p := remote.Policy{Addr: r.Host, Domain: r.Domain, FailureMode: mode}
	if r.Policies != nil && r.Policies.HTTP != nil && r.Policies.HTTP.RequestTimeout != nil {
		p.Timeout = time.Duration(*r.Policies.HTTP.RequestTimeout)
	}
	for _, d := range r.Descriptors {
		rd := remote.Descriptor{Tokens: d.Type == string(ratelimit.Tokens), LimitOverride: d.LimitOverride}
		for _, e := range d.Entries {
			rd.Entries = append(rd.Entries, remote.Entry{Key: e.Key, Value: e.Value})
		}
		p.Descriptors = append(p.Descriptors, rd)
	}
	return p
}

// RateLimit is one token bucket (REFERENCE.md "Local rate limit").
type RateLimit struct {
	MaxTokens     uint64   `yaml:"maxTokens" json:"maxTokens,omitempty"`
	TokensPerFill uint64   `yaml:"tokensPerFill" json:"tokensPerFill,omitempty"`
	FillInterval  Duration `yaml:"fillInterval" json:"fillInterval,omitempty"`
	// Type is "requests" (the default when empty) or "tokens".
	Type string `yaml:"type" json:"type,omitempty"`
	// Key is a CEL expression over the request (as conditions see it)
	// giving each key its own bucket; requests without a key (an empty
	// string, or an expression that fails) share one bucket. "" is one
	// bucket for every request.
	Key string `yaml:"key" json:"key,omitempty"`
	// Shadow evaluates and counts the limit without ever refusing: a
	// request it has nothing left for goes through, and its trace says
	// the entry would have refused it. ShadowHeaders writes the entry's
	// state in the rate-limit headers too. Refproxy extensions (Envoy's
	// local rate limit has the same shadow mode).
	Shadow        bool `yaml:"shadow" json:"shadow,omitempty"`
	ShadowHeaders bool `yaml:"shadowHeaders" json:"shadowHeaders,omitempty"`
}

// Spec converts the entry to the rate limiter's bucket spec.
func (r RateLimit) Spec() ratelimit.Spec {
	k := ratelimit.Requests
	if r.Type == string(ratelimit.Tokens) {
		k = ratelimit.Tokens
	}
	return ratelimit.Spec{MaxTokens: r.MaxTokens, TokensPerFill: r.TokensPerFill, FillInterval: time.Duration(r.FillInterval), Type: k,
		Shadow: r.Shadow, ShadowHeaders: r.ShadowHeaders}
}

// Backend is one route backend: exactly one of Host or AI. The
// reference's other kinds (service, backend, mcp, aws, dynamic, ...) are
// refused.
type Backend struct {
	// Host is host:port of a plain HTTP upstream.
	Host string `yaml:"host" json:"host,omitempty"`
	// AI is an LLM provider backend.
	AI *AIBackend `yaml:"ai" json:"ai,omitempty"`
	// Weight is the share of traffic (default 1).
	Weight *uint32 `yaml:"weight" json:"weight,omitempty"`
	// ServiceOf names the Kubernetes Service port a host backend is an
	// endpoint of. Only the reference controller sets it (a refproxy
	// extension, like a route's key): /config_dump then lists the endpoint
	// under services[], as the reference does in a cluster.
	ServiceOf *ServiceOf `yaml:"serviceOf" json:"serviceOf,omitempty"`
	// Policies are the backend's own: backendAuth; the others
	// (backendTLS, ...) are refused, each by name.
	Policies *BackendPolicies `yaml:"policies" json:"-"`
}

// ServiceOf is a Service port: the Service's name and namespace, and the port.
type ServiceOf struct {
	Name      string `yaml:"name" json:"name,omitempty"`
	Namespace string `yaml:"namespace" json:"namespace,omitempty"`
	Port      uint16 `yaml:"port" json:"port,omitempty"`
}

// Hostname is the Service's cluster DNS name.
func (s ServiceOf) Hostname() string {
	return s.Name + "." + s.Namespace + ".svc.cluster.local"
}

// AIBackend is an LLM backend; HostOverride sends its traffic to host:port
// instead of the provider's public endpoint.
type AIBackend struct {
	Name         string     `yaml:"name" json:"name,omitempty"`
	Provider     AIProvider `yaml:"provider" json:"provider,omitempty"`
	HostOverride string     `yaml:"hostOverride" json:"hostOverride,omitempty"`
	// PathOverride replaces the request's path; PathPrefix replaces the
	// provider's base path (/v1) in it.
	PathOverride string `yaml:"pathOverride" json:"pathOverride,omitempty"`
	PathPrefix   string `yaml:"pathPrefix" json:"pathPrefix,omitempty"`
	// Tokenize (counting input tokens before the request) is refused when true.
	Tokenize bool `yaml:"tokenize" json:"tokenize,omitempty"`

	// TLS, set by an llm model's https baseUrl, makes HostOverride an HTTPS
	// endpoint (without HostOverride the provider's own is HTTPS anyway).
	TLS bool `yaml:"-" json:"-"`
	// APIKey, from an llm model's params.apiKey, is sent as
	// "Authorization: Bearer <key>".
	APIKey Secret `yaml:"-" json:"-"`
}

// AIProvider names the provider; only openAI is implemented.
type AIProvider struct {
	OpenAI *OpenAIProvider `yaml:"openAI" json:"openAI,omitempty"`
}

// OpenAIProvider is the openAI provider block.
type OpenAIProvider struct {
	Model *string `yaml:"model" json:"model,omitempty"`
}

// Policy is a top-level policy attached to a gateway or a route.
type Policy struct {
	Name   ResourceName `yaml:"name" json:"name,omitempty"`
	Target PolicyTarget `yaml:"target" json:"target,omitempty"`
	// Phase is "route" (default) or "gateway".
	Phase  string   `yaml:"phase" json:"phase,omitempty"`
	Policy Policies `yaml:"policy" json:"policy,omitempty"`
}

// ResourceName is a namespaced name.
type ResourceName struct {
	Name      string `yaml:"name" json:"name,omitempty"`
	Namespace string `yaml:"namespace" json:"namespace,omitempty"`
}

// PolicyTarget holds exactly one of Gateway or Route.
type PolicyTarget struct {
	Gateway *GatewayTarget `yaml:"gateway" json:"gateway,omitempty"`
	Route   *RouteTarget   `yaml:"route" json:"route,omitempty"`
}

// GatewayTarget selects the listeners of a gateway. A standalone bind is the
// gateway "bind/<port>" in namespace "default".
type GatewayTarget struct {
	GatewayName      string  `yaml:"gatewayName" json:"gatewayName,omitempty"`
	GatewayNamespace string  `yaml:"gatewayNamespace" json:"gatewayNamespace,omitempty"`
	ListenerName     *string `yaml:"listenerName" json:"listenerName,omitempty"`
	Port             *uint16 `yaml:"port" json:"port,omitempty"`
}

// RouteTarget selects a route by namespace and name.
type RouteTarget struct {
	Name      string  `yaml:"name" json:"name,omitempty"`
	Namespace string  `yaml:"namespace" json:"namespace,omitempty"`
	RuleName  *string `yaml:"ruleName" json:"ruleName,omitempty"`
	Kind      *string `yaml:"kind" json:"kind,omitempty"`
}

// Duration is a Go duration string such as "1s" or "60s", as every file
// of the project writes one (golden/duration).
type Duration = duration.Duration

// AdminAddress returns config.adminAddr or the default.
func (c *Config) AdminAddress() string {
	if c != nil && c.Config != nil && c.Config.AdminAddr != "" {
		return c.Config.AdminAddr
	}
	return DefaultAdminAddr
}

// GatewayName is the standalone gateway name of a bind ("bind/3000").
func (b Bind) GatewayName() string { return "bind/" + strconv.Itoa(int(b.Port)) }

// ListenerName is the listener's name, or "listener<i>" when unnamed.
func (l Listener) ListenerName(i int) string {
	if l.Name != "" {
		return l.Name
	}
	return "listener" + strconv.Itoa(i)
}

// RouteName is the route's name, or "route<i>" when unnamed.
func (r Route) RouteName(i int) string {
	if r.Name != "" {
		return r.Name
	}
	return "route" + strconv.Itoa(i)
}

func nsOr(ns string) string {
	if ns == "" {
		return DefaultNamespace
	}
	return ns
}

// ListenerKey is the listener's key, the prefix of its route keys:
// "default/default/bind/3000/listener0".
func ListenerKey(b Bind, l Listener, li int) string {
	return nsOr(l.Namespace) + "/" + DefaultNamespace + "/" + b.GatewayName() + "/" + l.ListenerName(li)
}

// RouteKey is the route identifier of trace events: the route's Key when
// set, else the standalone form as the reference implementation writes it,
// "default/default/bind/3000/listener0/default/httpbin".
func RouteKey(b Bind, l Listener, li int, r Route, ri int) string {
	if r.Key != "" {
		return r.Key
	}
	return ListenerKey(b, l, li) + "/" + nsOr(r.Namespace) + "/" + r.RouteName(ri)
}

// Address is where the backend sends traffic (host:port).
func (b Backend) Address() string {
	if b.AI != nil {
		if b.AI.HostOverride != "" {
			return b.AI.HostOverride
		}
		return "api.openai.com:443"
	}
	return b.Host
}

// Name is the backend's name in traces and the config dump.
func (b Backend) Name() string {
	if b.AI != nil {
		return b.AI.Name
	}
	return b.Host
}

// Validate checks a config built in code the way Parse checks a file; errors
// name the field path (there is no line).
func (c *Config) Validate() error {
	src := c.Source
	if src == "" {
		src = "config"
	}
	return c.validate(func(path string) (string, string) { return src, path })
}

// checkAddr checks a host:port: the port a number from minPort to 65535,
// and the host present when needHost. Dialling "127.0.0.1:99999" would fail
// only at the first request; the config names it at load.
func checkAddr(addr string, minPort int, needHost bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port: %v", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < minPort || n > 65535 || strings.TrimLeft(port, "0123456789") != "" {
		return fmt.Errorf("port %q is not a number from %d to 65535", port, minPort)
	}
	if needHost && host == "" {
		return fmt.Errorf("missing host before %q", addr)
	}
	return nil
}

// validate checks what the types cannot: one-of fields, regexes, addresses,
// CEL expressions. loc returns the source position of a field path of the
// runtime model, and the path of the file's field it came from.
func (c *Config) validate(loc func(path string) (pos, file string)) error {
	fail := func(path, format string, args ...any) error {
		pos, file := loc(path)
		return &Error{Pos: pos, Path: file, Msg: fmt.Sprintf(format, args...)}
	}
	if c.Config != nil && c.Config.AdminAddr != "" {
		// Port 0 lets the kernel choose (tests, embedding); an empty host
		// binds every interface, which Start refuses unless allowed.
		if err := checkAddr(c.Config.AdminAddr, 0, false); err != nil {
			return fail("config.adminAddr", "%v", err)
		}
	}
	ports := map[uint16]bool{}
	routeNames := map[string]bool{}
	for bi, b := range c.Binds {
		bp := fmt.Sprintf("binds[%d]", bi)
		if b.Port != 0 && ports[b.Port] {
			return fail(bp+".port", "port %d is bound twice", b.Port)
		}
		ports[b.Port] = true
		if b.Listeners == nil {
			return fail(bp, "missing required field listeners")
		}
		for li, l := range b.Listeners {
			lp := fmt.Sprintf("%s.listeners[%d]", bp, li)
			switch l.Protocol {
			case "", "HTTP":
			default:
				return fail(lp+".protocol", "protocol %s is not supported by refproxy (only HTTP)", l.Protocol)
			}
			if p := l.Policies; p != nil {
				if err := p.CORS.check(); err != nil {
					return fail(lp+".policies.cors", "%v", err)
				}
				if err := checkAuthz(p.Authorization, lp+".policies.authorization", fail); err != nil {
					return err
				}
				if err := checkAuthPolicies(p.APIKey, p.BasicAuth, p.JWTAuth, lp+".policies", fail); err != nil {
					return err
				}
			}
			for ri, r := range l.Routes {
				rp := fmt.Sprintf("%s.routes[%d]", lp, ri)
				routeNames[nsOr(r.Namespace)+"/"+r.RouteName(ri)] = true
				for mi, m := range r.Matches {
					mp := fmt.Sprintf("%s.matches[%d]", rp, mi)
					if m.Path != nil {
						if err := m.Path.Check(); err != nil {
							return fail(mp+".path", "%v", err)
						}
					}
					for hi, h := range m.Headers {
						hp := fmt.Sprintf("%s.headers[%d]", mp, hi)
						if h.Name == "" {
							return fail(hp+".name", "header name is empty")
						}
						if err := h.Value.Check(); err != nil {
							return fail(hp+".value", "%v", err)
						}
					}
					for qi, q := range m.Query {
						qp := fmt.Sprintf("%s.query[%d]", mp, qi)
						if q.Name == "" {
							return fail(qp+".name", "query parameter name is empty")
						}
						if err := q.Value.Check(); err != nil {
							return fail(qp+".value", "%v", err)
						}
					}
				}
				if err := checkAllPolicies(r.Policies, rp+".policies", fail); err != nil {
					return err
				}
				for bki, bk := range r.Backends {
					bkp := fmt.Sprintf("%s.backends[%d]", rp, bki)
					if bk.Policies != nil {
						if err := checkBackendAuth(bk.Policies.BackendAuth, bkp+".policies.backendAuth", fail); err != nil {
							return err
						}
					}
					switch {
					case bk.Host != "" && bk.AI != nil:
						return fail(bkp, "set exactly one of host or ai")
					case bk.AI != nil && bk.ServiceOf != nil:
						return fail(bkp+".serviceOf", "only a host backend is an endpoint of a Service")
					case bk.AI != nil:
						if bk.AI.Name == "" {
							return fail(bkp+".ai.name", "missing required field name")
						}
						if bk.AI.Provider.OpenAI == nil {
							return fail(bkp+".ai.provider", "missing provider (refproxy implements openAI)")
						}
						if bk.AI.HostOverride != "" {
							if err := checkAddr(bk.AI.HostOverride, 1, true); err != nil {
								return fail(bkp+".ai.hostOverride", "%v", err)
							}
						}
					case bk.Host != "":
						if err := checkAddr(bk.Host, 1, true); err != nil {
							return fail(bkp+".host", "%v", err)
						}
						if so := bk.ServiceOf; so != nil && (so.Name == "" || so.Namespace == "") {
							return fail(bkp+".serviceOf", "want name and namespace")
						}
					default:
						return fail(bkp, "set one of host or ai")
					}
				}
			}
		}
	}
	for pi, p := range c.Policies {
		pp := fmt.Sprintf("policies[%d]", pi)
		if p.Name.Name == "" || p.Name.Namespace == "" {
			return fail(pp+".name", "want name and namespace")
		}
		switch p.Phase {
		case "", "route", "gateway":
		default:
			return fail(pp+".phase", "unknown phase %q (want route or gateway)", p.Phase)
		}
		t := p.Target
		switch {
		case (t.Gateway == nil) == (t.Route == nil):
			return fail(pp+".target", "set exactly one of gateway or route")
		case t.Gateway != nil:
			if t.Gateway.GatewayName == "" || t.Gateway.GatewayNamespace == "" {
				return fail(pp+".target.gateway", "want gatewayName and gatewayNamespace")
			}
		case t.Route != nil:
			if t.Route.Name == "" || t.Route.Namespace == "" {
				return fail(pp+".target.route", "want name and namespace")
			}
		}
		if err := checkAllPolicies(&p.Policy, pp+".policy", fail); err != nil {
			return err
		}
	}
	return nil
}

// checkAllPolicies validates a policy block: limits, then the rest.
func checkAllPolicies(p *Policies, path string, fail func(string, string, ...any) error) error {
	if p == nil {
		return nil
	}
	if err := checkLimits(p.LocalRateLimit, path+".localRateLimit", fail); err != nil {
		return err
	}
	for i, c := range p.LocalRateLimitConditional {
		if err := checkLimit(c.RateLimit, fmt.Sprintf("%s.localRateLimit.conditional[%d]", path, i), fail); err != nil {
			return err
		}
	}
	if err := checkRemote(p.RemoteRateLimit, path+".remoteRateLimit", fail); err != nil {
		return err
	}
	return checkPolicies(p, path, fail)
}

func checkRemote(r *RemoteRateLimit, path string, fail func(string, string, ...any) error) error {
	if r == nil {
		return nil
	}
	switch {
	case r.Host == "":
		return fail(path+".host", "missing required field host (host:port of the rate-limit service)")
	case r.Domain == "":
		return fail(path+".domain", "missing required field domain")
	case len(r.Descriptors) == 0:
		return fail(path+".descriptors", "want at least one descriptor")
	}
	if err := checkAddr(r.Host, 1, true); err != nil {
		return fail(path+".host", "%v", err)
	}
	if _, err := remote.ParseFailureMode(r.FailureMode); err != nil {
		return fail(path+".failureMode", "%v", err)
	}
	if r.Policies != nil && r.Policies.HTTP != nil && r.Policies.HTTP.RequestTimeout != nil && *r.Policies.HTTP.RequestTimeout <= 0 {
		return fail(path+".policies.http.requestTimeout", "want a positive duration")
	}
	for i, d := range r.Descriptors {
		dp := fmt.Sprintf("%s.descriptors[%d]", path, i)
		switch d.Type {
		case "", "requests", "tokens":
		default:
			return fail(dp+".type", "unknown type %q (want requests or tokens)", d.Type)
		}
		if len(d.Entries) == 0 {
			return fail(dp+".entries", "want at least one entry")
		}
		if d.LimitOverride != "" {
			if _, err := remote.CompileOverride(d.LimitOverride); err != nil {
				return fail(dp+".limitOverride", "CEL: %v", err)
			}
		}
		for j, e := range d.Entries {
			ep := fmt.Sprintf("%s.entries[%d]", dp, j)
			if e.Key == "" {
				return fail(ep+".key", "missing required field key")
			}
			if _, err := remote.Compile(e.Value); err != nil {
				return fail(ep+".value", "CEL: %v", err)
			}
		}
	}
	return nil
}

func checkLimits(ls []RateLimit, path string, fail func(string, string, ...any) error) error {
	for i, l := range ls {
		if err := checkLimit(l, fmt.Sprintf("%s[%d]", path, i), fail); err != nil {
			return err
		}
	}
	return nil
}

func checkLimit(l RateLimit, p string, fail func(string, string, ...any) error) error {
	switch l.Type {
	case "", "requests", "tokens":
	default:
		return fail(p+".type", "unknown type %q (want requests or tokens)", l.Type)
	}
	if l.FillInterval <= 0 {
		return fail(p+".fillInterval", "missing or non-positive fillInterval")
	}
	if l.Key != "" {
		if _, err := celexpr.CompileRequest(l.Key, celexpr.Scalar); err != nil {
			return fail(p+".key", "CEL: %v", err)
		}
	}
	if l.ShadowHeaders && !l.Shadow {
		return fail(p+".shadowHeaders", "only with shadow: true (a limit that refuses always writes its headers)")
	}
	if err := l.Spec().Validate(); err != nil {
		var fe *ratelimit.FieldError
		if errors.As(err, &fe) {
			return fail(p+"."+fe.Field, "%s", fe.Msg)
		}
		return fail(p, "%v", err)
	}
	return nil
}
