// Package target is what the conformance suite knows of a proxy under
// test: the Target interface through which it is run and configured, the
// Deployment of one scenario, and the target-neutral Setup a scenario asks
// for. Each way of running a proxy is a package below this one
// (inprocess, process, container, cluster); local holds what the targets running a
// proxy on this machine share. It imports nothing of the suite.
package targets

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A Target runs the proxy under test. Features and steps only see this
// interface, so new ways of running a proxy (a container, a cluster) are new
// implementations, never new steps.
//
// The suite calls Start once, Configure once per scenario (each scenario gets
// a fresh configuration, so that rate-limit windows start when it starts),
// and Stop once at the end.
type Target interface {
	// Name identifies the target in reports ("inprocess", "process", ...).
	Name() string
	// Start prepares what all scenarios share (a cluster, a build, ...).
	Start(ctx context.Context) error
	// Configure starts the backends and routes of setup and returns when the
	// proxy serves them. The deployment is stopped at the end of the scenario.
	Configure(ctx context.Context, setup Setup) (Deployment, error)
	// Stop releases what Start took.
	Stop(ctx context.Context) error
	// Capabilities says which tagged groups of scenarios the target can run
	// (for example "cluster"); scenarios needing others are skipped.
	Capabilities() []string
}

// A Deployment is the proxy of one scenario, serving one Setup.
type Deployment interface {
	// ListenerAddr is the host:port where the named listener takes traffic.
	ListenerAddr(listener string) (string, error)
	// AdminAddr is the host:port of the admin server.
	AdminAddr() string
	// BackendAddr is the host:port the proxy calls for the named backend,
	// as it should appear in backendCallStart.target.
	BackendAddr(backend string) (string, error)
	// BackendRequests is how many requests the named backend received,
	// counted by the backend itself.
	BackendRequests(ctx context.Context, backend string) (int64, error)
	// ReleaseHeld lets the named LLM backend finish the streams it holds
	// under key (the x-mock-hold headers of steps/mock).
	ReleaseHeld(ctx context.Context, backend, key string) error
	// Stop stops the proxy and the backends; it is safe to call twice and
	// after the proxy stopped on its own (quitquitquit).
	Stop(ctx context.Context) error
}

// A LogKeeper is a deployment that keeps what the proxy wrote to its
// output (a process's stdout and stderr, a container's logs), so that the
// report of a failing scenario can show it. ProxyLogs is valid after Stop.
type LogKeeper interface {
	// ProxyLogs returns the end of the proxy's output, at most
	// MaxProxyLogs bytes.
	ProxyLogs() string
}

// A ConfigKeeper is a deployment that keeps the config the suite wrote for
// its proxy, so that the bundle of a failing scenario can hold it.
type ConfigKeeper interface {
	// ProxyConfig returns the config's file name and its bytes.
	ProxyConfig() (name string, body []byte)
}

// An EvidenceKeeper is a deployment with more to show of a failure than a
// config file: a cluster's resources as they are now, with their status,
// and its pods' logs. Evidence is called before the deployment stops;
// it returns files by name (relative, slash-separated).
type EvidenceKeeper interface {
	Evidence(ctx context.Context) (map[string][]byte, error)
}

// ConfigureError is a Configure that failed with the evidence of why,
// taken before the target cleaned up (a cluster's resources whose status
// never came): the failure bundle holds it.
type ConfigureError struct {
	Err      error
	Evidence map[string][]byte
}

func (e *ConfigureError) Error() string { return e.Err.Error() }
func (e *ConfigureError) Unwrap() error { return e.Err }

// A leftBehind is a target whose resources can outlive gwdiag when it exits
// without its clean-up (a second Ctrl-C): processes in their own process
// group, containers, networks, a local node's changes to the machine.
type leftBehind interface {
	// LeftBehind says, one line each, what may stay now and how to
	// remove it. It must not block: gwdiag is exiting.
	LeftBehind() []string
}

// LeftoversOf is what t may leave behind if gwdiag exits now; nothing for
// a target that keeps nothing outside gwdiag (the in-process proxy and
// mocks die with it).
func LeftoversOf(t Target) []string {
	if lb, ok := t.(leftBehind); ok {
		return lb.LeftBehind()
	}
	return nil
}

// MaxProxyLogs bounds the proxy output a report keeps per scenario.
const MaxProxyLogs = 8 << 10

// TailLogs returns the last complete lines of logs that fit in
// MaxProxyLogs bytes.
func TailLogs(logs string) string { return TailLogsWithin(logs, MaxProxyLogs) }

// TailLogsWithin returns the last complete lines of logs that fit in max
// bytes (each of several replicas gets its share of MaxProxyLogs).
func TailLogsWithin(logs string, max int) string {
	if len(logs) <= max {
		return logs
	}
	logs = logs[len(logs)-max:]
	if i := strings.IndexByte(logs, '\n'); i >= 0 {
		logs = logs[i+1:]
	}
	return logs
}

// ConditionReader is implemented by deployments on targets that manage the
// proxy through Gateway API resources (capability "cluster").
type ConditionReader interface {
	// Conditions returns the status conditions of a resource; kind is
	// "Gateway", "HTTPRoute" or "Policy", and for "Policy" name is the
	// policy's name (the policy of a route is named after the route).
	Conditions(ctx context.Context, kind, name string) ([]Condition, error)
}

// Condition is one status condition of a Gateway API or policy resource.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Setup is what one scenario asks of the proxy: backends, listeners with
// routes, and rate-limit policies, in target-neutral terms.
type Setup struct {
	Backends  []Backend
	Listeners []Listener
	// Policies are policies that target something other than a configured
	// route (cluster targets only: a policy on a missing route).
	Policies []Policy
	// RateLimitService is the gRPC host:port of the global rate-limit
	// service (envoy.service.ratelimit.v3) that routes with Global limits
	// use; the suite runs it, or the user names one.
	RateLimitService string
	// RateLimitKey is unique to the scenario: its descriptors carry it, so
	// that scenarios sharing a service never share a budget.
	RateLimitKey string
	// RateLimitTimeout, when set, bounds each call of the proxy to the
	// service (the reference's policies.http.requestTimeout of
	// remoteRateLimit; standalone targets). The suite gives it half its
	// own bound on a request: a loaded machine's slow service is waited
	// for, and the proxy still answers before the suite gives up.
	RateLimitTimeout time.Duration
	// SensitiveHeaders are request headers the proxy is told to redact
	// from its traces, besides its own (the reference's
	// config.sensitiveHeaders; standalone targets).
	SensitiveHeaders []string
	// OTLPEndpoint, when set, is the suite's OTLP collector (gRPC,
	// http://host:port): the proxy is told to export a span tree of
	// every request to it (the reference's config.tracing with
	// randomSampling true; standalone targets).
	OTLPEndpoint string
	// OTLPProtocol is how: grpc (empty) or http.
	OTLPProtocol string
}

// RateLimitDomain is the domain of every global limit the suite configures;
// a rate-limit service the user names must know it (its descriptors may be
// empty: each descriptor carries its limit as an override).
const RateLimitDomain = "gwdiag-conformance"

// GlobalLimit is one limit kept by the global rate-limit service: a
// budget shared by every replica that asks the same service.
type GlobalLimit struct {
	Kind   LimitKind
	Amount uint64
	// Unit is second, minute, hour or day. The service's windows are
	// fixed and aligned to the clock, so scenarios use days: a scenario
	// never straddles a reset.
	Unit string
	// KeyHeader, when set, gives each value of this request header its
	// own budget: the limit's descriptor carries the header's value as an
	// entry of its own (a request without the header cannot make the
	// descriptor: the reference skips it, refproxy lets the failure mode
	// decide; feature global-descriptor-failure).
	KeyHeader string
}

// UnitSeconds is the limit's window in seconds.
func (g GlobalLimit) UnitSeconds() int {
	return map[string]int{"second": 1, "minute": 60, "hour": 3600, "day": 86400}[g.Unit]
}

// BackendKind is the kind of mock backend a route sends to.
type BackendKind string

// Mock backend kinds.
const (
	// BackendEcho is an httpbin-like echo that counts requests.
	BackendEcho BackendKind = "echo"
	// BackendLLM is an OpenAI-compatible chat completions mock whose usage
	// is set per request by headers.
	BackendLLM BackendKind = "llm"
	// BackendUnreachable is an address nothing listens on.
	BackendUnreachable BackendKind = "unreachable"
)

// Backend is one mock backend.
type Backend struct {
	Name string
	Kind BackendKind
	// APIKey, for an LLM backend, is the key the proxy sends the provider
	// as "Authorization: Bearer <key>" (the reference's backendAuth key;
	// standalone targets).
	APIKey string
}

// Listener is one port of the proxy with its routes.
type Listener struct {
	Name   string
	Routes []Route
}

// Route sends requests whose path starts with PathPrefix (and, when set,
// whose method is Method and which carry Header) to Backend.
type Route struct {
	Name       string
	PathPrefix string
	// Method, when set, is the only method the route takes.
	Method string
	// Header, when set, is a header the request must carry, exactly.
	Header  *HeaderMatch
	Backend string
	Limits  []Limit
	// RateLimitError is the body of the route's 429s: "" (the spec's
	// text), "openai" or "anthropic" (that provider's JSON error).
	RateLimitError string
	// RateLimitHeaders are the header families of the route's rate-limit
	// headers (refproxy's rateLimitHeaders: xRateLimit, ietf, openai,
	// anthropic); nil: the proxy's default, x-ratelimit-*.
	RateLimitHeaders []string
	// Global are limits kept by Setup.RateLimitService.
	Global []GlobalLimit
	// GlobalFailOpen lets requests through when the service cannot
	// answer; otherwise they are refused (the reference's default).
	GlobalFailOpen bool
}

// HeaderMatch is a header a route requires, with its exact value.
type HeaderMatch struct {
	Name, Value string
}

// LimitKind is what a limit counts.
type LimitKind string

// Limit kinds, as the policy resource names them.
const (
	LimitRequests LimitKind = "requests"
	LimitTokens   LimitKind = "tokens"
)

// Limit is one spec.traffic.rateLimit.local[] entry of the policy resource.
type Limit struct {
	Kind   LimitKind
	Amount uint64
	Unit   time.Duration // time.Second, time.Minute or time.Hour
	Burst  uint64
	// KeyHeader, when set, keys the limit by this request header: a
	// bucket per value, requests without the header sharing one (the
	// reference's key: request.headers["<name>"]).
	KeyHeader string
	// Shadow counts the limit without refusing (refproxy's shadow), and
	// ShadowHeaders writes its headers; standalone targets only.
	Shadow, ShadowHeaders bool
}

// KeyExpr is the reference's key of a limit keyed by a header: the CEL
// expression of the header's value ("" for a limit without a key). The
// standalone config and the cluster's policy resource carry it alike.
func (l Limit) KeyExpr() string {
	if l.KeyHeader == "" {
		return ""
	}
	return HeaderCEL(l.KeyHeader)
}

// HeaderCEL is the CEL expression of a request header's value, as the
// reference's keys and descriptors read it (names lower-case).
func HeaderCEL(name string) string {
	return "request.headers[" + strconv.Quote(strings.ToLower(name)) + "]"
}

// UnitName is the policy resource's name of the limit's unit (Seconds,
// Minutes, Hours), or its duration when it is none of them.
func (l Limit) UnitName() string {
	switch l.Unit {
	case time.Second:
		return "Seconds"
	case time.Minute:
		return "Minutes"
	case time.Hour:
		return "Hours"
	}
	return l.Unit.String()
}

// Policy is a rate-limit policy resource on its own.
type Policy struct {
	Name       string
	TargetKind string // HTTPRoute or Gateway
	// TargetName is the route's name, or for a Gateway target the listener
	// whose gateway it caps (standalone: that listener's bind; in a
	// cluster: the scenario's Gateway, section the listener).
	TargetName string
	Limits     []Limit
}

// DefaultListener is the listener of routes declared without one.
const DefaultListener = "default"

// ListenerNamed returns the named listener, adding it when missing.
func (s *Setup) ListenerNamed(name string) *Listener {
	for i := range s.Listeners {
		if s.Listeners[i].Name == name {
			return &s.Listeners[i]
		}
	}
	s.Listeners = append(s.Listeners, Listener{Name: name})
	return &s.Listeners[len(s.Listeners)-1]
}

// HasListener reports whether a listener of that name is declared.
func (s *Setup) HasListener(name string) bool {
	for _, l := range s.Listeners {
		if l.Name == name {
			return true
		}
	}
	return false
}

// RouteNamed returns the named route of any listener, or nil.
func (s *Setup) RouteNamed(name string) *Route {
	for i := range s.Listeners {
		for j := range s.Listeners[i].Routes {
			if s.Listeners[i].Routes[j].Name == name {
				return &s.Listeners[i].Routes[j]
			}
		}
	}
	return nil
}

// BackendNamed returns the named backend, or nil.
// ReadsHeader reports whether a route or limit of s reads the request
// header name (any case): a header match, a limit's key, a global limit's
// client descriptor. A step adding headers of its own leaves these alone.
func (s *Setup) ReadsHeader(name string) bool {
	for _, l := range s.Listeners {
		for _, r := range l.Routes {
			if r.Header != nil && strings.EqualFold(r.Header.Name, name) {
				return true
			}
			for _, lim := range r.Limits {
				if strings.EqualFold(lim.KeyHeader, name) {
					return true
				}
			}
			for _, g := range r.Global {
				if strings.EqualFold(g.KeyHeader, name) {
					return true
				}
			}
		}
	}
	for _, p := range s.Policies {
		for _, lim := range p.Limits {
			if strings.EqualFold(lim.KeyHeader, name) {
				return true
			}
		}
	}
	return false
}

func (s *Setup) BackendNamed(name string) *Backend {
	for i := range s.Backends {
		if s.Backends[i].Name == name {
			return &s.Backends[i]
		}
	}
	return nil
}

// Target capabilities (Target.Capabilities): the profiles a target can host.
const (
	// CapabilityStandalone: the target runs a proxy from a standalone config
	// and reaches its listeners and admin server.
	CapabilityStandalone = "standalone"
	// CapabilityCluster: the target manages the proxy through Gateway API
	// resources and reads their conditions.
	CapabilityCluster = "cluster"
	// CapabilityDataPlane: the target's deployments serve traffic: their
	// listeners, admin server and mock backends are reachable
	// (ListenerAddr, AdminAddr, BackendRequests, ReleaseHeld). Every
	// standalone target has it; a cluster target has it when its Gateways'
	// proxies run in pods it reaches (the local node, or cluster.dataPlane).
	CapabilityDataPlane = "data-plane"
)

// A ServiceHost is a target whose proxy can reach services the suite runs
// on this machine (the global rate-limit service).
type ServiceHost interface {
	// ServiceAddr is the address on this machine that services for the
	// proxy listen on, and the proxy reaches: 127.0.0.1 for a proxy on
	// this machine, the gateway of the container target's network. ok is
	// false when there is none (a remote Docker daemon).
	ServiceAddr() (addr string, ok bool)
}

// Named returns what m holds for name: one of a scenario's listeners,
// backends or mock backends by its name in the feature. what says which,
// in the error a step reports when the scenario has none of that name.
func Named[V any](m map[string]V, what, name string) (V, error) {
	v, ok := m[name]
	if !ok {
		where := "this scenario"
		if what == "listener" {
			where = "this scenario's configuration"
		}
		return v, fmt.Errorf("no %s %q in %s", what, name, where)
	}
	return v, nil
}
