package steps

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"

	"sigs.k8s.io/yaml"

	"github.com/gwdiag/gwdiag/golden/duration"
	"github.com/gwdiag/gwdiag/golden/termtext"
	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/steps/stepdefs"
	"github.com/gwdiag/gwdiag/steps/targets"
	"github.com/gwdiag/gwdiag/steps/targets/cluster"
	"github.com/gwdiag/gwdiag/steps/targets/container"
	"github.com/gwdiag/gwdiag/steps/targets/local"
)

// FeatureName names a group of scenarios; it is the scenarios' tag without
// the @ (trace-order, token-overage, ...).
type FeatureName string

// Core features: every conformant proxy passes them.
const (
	FeatureTraceOrder      FeatureName = "trace-order"
	FeatureTokenOverage    FeatureName = "token-overage"
	FeatureRequestLimits   FeatureName = "request-limits"
	FeatureAdmin           FeatureName = "admin"
	FeatureConditionStatus FeatureName = "condition-status"
	FeatureForwardCompat   FeatureName = "forward-compat"
	// FeatureProxyPods: what a proxy in a cluster's pods shows of them: the
	// Gateway Programmed only once one is Ready, their identity as env in
	// every trace snapshot.
	FeatureProxyPods FeatureName = "proxy-pods"
)

// Extended features: behaviour of the reference implementation that the
// spec leaves open. A proxy lacking one is reported as not supporting it,
// unless Options.SupportedFeatures (or AllFeatures) claims it.
const (
	// FeatureTraceSeverity: severity success/info/warn/error as the
	// reference sets it (the spec shows only info).
	FeatureTraceSeverity FeatureName = "trace-severity"
	// FeatureTraceBodyErrors: a backend body cut short after the response
	// began is reported in backendCallResult or requestFinished, severity
	// error.
	FeatureTraceBodyErrors FeatureName = "trace-body-errors"
	// FeatureTraceStreamHeaders: Cache-Control: no-cache on the trace stream.
	FeatureTraceStreamHeaders FeatureName = "trace-stream-headers"
	// FeatureTraceReadyComment: the stream opens with ": ready".
	FeatureTraceReadyComment FeatureName = "trace-ready-comment"
	// FeatureTraceCELExpression: ?expression=<CEL> picks the traced request.
	FeatureTraceCELExpression FeatureName = "trace-cel-expression"
	// FeatureTraceWatcherFIFO: several watchers served first in, first out.
	FeatureTraceWatcherFIFO FeatureName = "trace-watcher-fifo"
	// FeatureProxyStatusCodes: 404 for no matching route, 5xx for a
	// backend transport error.
	FeatureProxyStatusCodes FeatureName = "proxy-status-codes"
	// FeatureRateLimitHeadersOnSuccess: x-ratelimit-* on allowed responses.
	FeatureRateLimitHeadersOnSuccess FeatureName = "ratelimit-headers-on-success"
	// FeatureRateLimitResponseFormat: a 429 is text/plain and
	// x-ratelimit-reset is whole seconds.
	FeatureRateLimitResponseFormat FeatureName = "ratelimit-response-format"
	// FeatureGatewayRateLimit: a standalone limit on a whole gateway (bind).
	FeatureGatewayRateLimit FeatureName = "gateway-rate-limit"
	// FeatureRateLimitPerKey: a limit with a key (the reference's
	// localRateLimit[].key) keeps a bucket per key; requests without one
	// share a bucket.
	FeatureRateLimitPerKey FeatureName = "ratelimit-per-key"
	// FeatureRateLimitDenyingHeaders: with several limits, a 429's
	// x-ratelimit-* headers describe the limit that refused it.
	FeatureRateLimitDenyingHeaders FeatureName = "ratelimit-denying-headers"
	// FeatureRateLimitRetryAfter: a 429 carries Retry-After, in seconds,
	// equal to x-ratelimit-reset.
	FeatureRateLimitRetryAfter FeatureName = "ratelimit-retry-after"
	// FeatureTokenRemainingAfterCharge: a non-streamed completion's
	// x-ratelimit-remaining includes its own token charge.
	FeatureTokenRemainingAfterCharge FeatureName = "token-remaining-after-charge"
	// FeatureRateLimitOpenAIError: an LLM route can answer its 429s with
	// OpenAI's JSON error ({"error": {"message", "type":
	// "rate_limit_error", "code"}}).
	FeatureRateLimitOpenAIError FeatureName = "ratelimit-openai-error"
	// FeatureRateLimitAnthropicError: an LLM route can answer its 429s
	// with Anthropic's JSON error ({"type": "error", "error": {"type":
	// "rate_limit_error", "message"}}).
	FeatureRateLimitAnthropicError FeatureName = "ratelimit-anthropic-error"
	// FeatureRateLimitShadow: a limit in shadow mode is counted and never
	// refuses; the trace names the requests it would have refused, and its
	// headers are written only when asked.
	FeatureRateLimitShadow FeatureName = "ratelimit-shadow"
	// FeatureOTLPExport: the proxy exports OpenTelemetry spans of a request
	// (config.tracing) that agree with its /debug/trace, and carries a
	// client's trace on to its backend (traceparent).
	FeatureOTLPExport FeatureName = "otlp-export"
	// FeatureRateLimitIETFHeaders: the route's limits described in the
	// IETF draft's RateLimit-Policy and RateLimit structured fields, a
	// backend's own kept beside them.
	FeatureRateLimitIETFHeaders FeatureName = "ratelimit-ietf-headers"
	// FeatureRateLimitOpenAIHeaders: OpenAI's
	// x-ratelimit-{limit,remaining,reset}-{requests,tokens}, a backend's
	// stricter ones kept.
	FeatureRateLimitOpenAIHeaders FeatureName = "ratelimit-openai-headers"
	// FeatureRateLimitAnthropicHeaders: Anthropic's
	// anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}.
	FeatureRateLimitAnthropicHeaders FeatureName = "ratelimit-anthropic-headers"
	// FeatureTraceRedactsCredentials: no trace event shows the value of a
	// request's authorization or proxy-authorization, nor of a header the
	// config's sensitiveHeaders names, as the reference marks them
	// sensitive; the header stays, and the traffic is untouched.
	FeatureTraceRedactsCredentials FeatureName = "trace-redacts-credentials"
	// FeatureTraceRedactsAPIKeysAndCookies: what gwdiag's reference proxy
	// redacts beyond the reference: cookies, a backend's set-cookie, the
	// API-key headers of LLM clients (x-api-key, api-key, x-goog-api-key)
	// and the key the proxy sends an LLM provider.
	FeatureTraceRedactsAPIKeysAndCookies FeatureName = "trace-redacts-api-keys-and-cookies"
	// FeatureLLMStreamUsageInjection: the proxy asks a streaming LLM backend
	// for usage (stream_options.include_usage) when the client did not.
	FeatureLLMStreamUsageInjection FeatureName = "llm-stream-usage-injection"
	// FeatureConfigDumpLayout: /config_dump with the categories at the top
	// level and listeners nested under binds.
	FeatureConfigDumpLayout FeatureName = "config-dump-layout"
	// FeatureAdminErrorStatus: the admin server refuses a bad log filter or
	// profile duration with 400.
	FeatureAdminErrorStatus FeatureName = "admin-error-status"
	// FeaturePolicyConditionReasons: the reasons Valid, Attached and
	// Pending on policy conditions.
	FeaturePolicyConditionReasons FeatureName = "policy-condition-reasons"
	// FeatureGlobalRateLimit: request and token limits kept by an
	// Envoy-compatible rate-limit service and shared across replicas
	// (remoteRateLimit), with the service's x-envoy-ratelimited on its 429s
	// and the configured behaviour when it is gone.
	FeatureGlobalRateLimit FeatureName = "global-rate-limit"
	// FeatureGlobalDescriptorFailure: a global limit whose descriptor
	// cannot be evaluated for a request refuses it under fail-closed and
	// lets it through under fail-open (the reference lets it through under
	// both: its issue 3523).
	FeatureGlobalDescriptorFailure FeatureName = "global-descriptor-failure"
	// FeatureTraceFollow: /debug/trace?follow=true&max=N&duration=D traces
	// many requests on one stream, each event with its requestId, bounded
	// by the proxy.
	FeatureTraceFollow FeatureName = "trace-follow"
	// FeatureTraceExplainsOutcome: the trace says why each route did or
	// did not match, what each policy did, and the cause of a status the
	// backend did not give (routeSelection.reasons, policy events,
	// requestFinished.cause; docs/admin.md).
	FeatureTraceExplainsOutcome FeatureName = "trace-explains-outcome"
)

// Duration is a time.Duration written as "1.5s" in YAML and JSON: the one
// duration type of the project (refproxy's config has it too).
type Duration = duration.Duration

// Timeouts bounds every wait of the suite.
type Timeouts struct {
	// Request bounds one HTTP request to the proxy. Default 10s.
	Request Duration `json:"request"`
	// Trace bounds how long a trace may take to complete after its request.
	// Max value for a conformant implementation: 5 seconds (the default).
	Trace Duration `json:"trace"`
	// ReadyGrace is how long the suite waits for the ": ready" comment of a
	// new trace stream before it takes the watcher as registered (older
	// proxies send no such comment). Default 300ms.
	ReadyGrace Duration `json:"readyGrace"`
}

// Implementation describes the proxy under test in the report.
type Implementation struct {
	Name    string `json:"name" yaml:"name"`
	Version string `json:"version,omitempty" yaml:"version,omitempty"`
	URL     string `json:"url,omitempty" yaml:"url,omitempty"`
}

// Options is every knob of a conformance run. It loads from YAML
// (LoadOptions); command-line flags override only the fields they set.
type Options struct {
	// Target is how the proxy is run: inprocess, process, container or
	// cluster.
	Target string `json:"target"`
	// ProxyCommand is the process target's command template, e.g.
	// "refproxy -f {config}".
	ProxyCommand string `json:"proxyCommand,omitempty"`
	// ConfigStyle is how the process and container targets lay out the
	// standalone config they write: binds (the default; spec part 2.2) or
	// gateways (gateways and top-level routes, as the reference's current
	// docs write it).
	ConfigStyle local.ConfigStyle `json:"configStyle,omitempty"`
	// Container configures the container target (steps/targets/container).
	Container container.Options `json:"container"`
	// Cluster configures the cluster target (steps/targets/cluster).
	Cluster        cluster.Options `json:"cluster"`
	Implementation Implementation  `json:"implementation"`
	// Profiles are the profiles to run; empty runs every profile the
	// target can host (profiles.go).
	Profiles []ConformanceProfileName `json:"profiles,omitempty"`
	// SupportedFeatures are extended features the proxy claims: failing
	// them is a failure, not "unsupported".
	SupportedFeatures []FeatureName `json:"supportedFeatures,omitempty"`
	// AllFeatures claims every extended feature.
	AllFeatures bool `json:"allFeatures,omitempty"`
	// ExemptFeatures are not run at all and reported as skipped.
	ExemptFeatures []FeatureName `json:"exemptFeatures,omitempty"`
	// SkipScenarios are scenario names not to run.
	SkipScenarios []string `json:"skipScenarios,omitempty"`
	// RunScenario, when set, runs only the scenario of that name.
	RunScenario string `json:"runScenario,omitempty"`
	// RunExample, with RunScenario, runs only the example of a Scenario
	// Outline whose Examples row is at that line of its feature file.
	RunExample int `json:"runExample,omitempty"`
	// Tags is a godog tag expression ("&&" and, "," or, "~" not; checkTags),
	// e.g. "@admin && ~@extended".
	Tags string `json:"tags,omitempty"`
	// FailFast stops the run at the first failing scenario: none starts
	// after it, and the rest are reported not run.
	FailFast bool `json:"failFast,omitempty"`
	// Report, JUnit and CucumberJSON are output paths; empty writes none.
	Report string `json:"report,omitempty"`
	// ReportDir, when set, receives the report named the submission way
	// (<channel>-<version>-<mode>-report.yaml) and a README.md.
	ReportDir    string `json:"reportDir,omitempty"`
	JUnit        string `json:"junit,omitempty"`
	CucumberJSON string `json:"cucumberJSON,omitempty"`
	// Baseline, when set, is a ConformanceBaseline file: the scenarios it
	// lists that fail are expected failures, which do not fail the run;
	// one that passes fails it as a stale baseline.
	Baseline string `json:"baseline,omitempty"`
	// Repeat runs every scenario this many times (0 and 1: once); one that
	// passes only sometimes is flaky, which fails the run.
	Repeat int `json:"repeat,omitempty"`
	// BundleDir, when set, receives a failure bundle per failed scenario
	// (steps/bundle): <dir>/<feature>/<scenario>/.
	BundleDir string `json:"bundleDir,omitempty"`
	// CommandLine is the command that ran the suite, for the bundles (set
	// by the CLI).
	CommandLine string `json:"-"`
	// OTLPProtocol is how the proxy is told to send its spans to the
	// suite's collector (feature otlp-export): grpc (the default, the
	// reference's) or http (OTLP/HTTP, protobuf).
	OTLPProtocol string `json:"otlpProtocol,omitempty"`
	// RateLimitService is the gRPC host:port of an Envoy-compatible
	// rate-limit service for the global-rate-limit scenarios, reachable by
	// the proxy; its configuration must have the domain
	// gwdiag-conformance. Empty: the suite runs github.com/envoyproxy/ratelimit
	// on redis-server on loopback itself (targets whose proxy reaches the
	// suite's loopback: inprocess, process).
	RateLimitService string `json:"rateLimitService,omitempty"`
	// Concurrency is how many scenarios run at once. Default 4.
	Concurrency int      `json:"concurrency,omitempty"`
	Timeouts    Timeouts `json:"timeouts"`
	// Limits bound everything the suite reads from the proxy (trace
	// frames, events and bytes per trace, admin and data-plane bodies,
	// header blocks): a scenario whose proxy goes past one fails with what
	// was exceeded, and the run goes on. Zero fields: sse.DefaultLimits.
	Limits sse.Limits `json:"limits"`

	// Features overrides the embedded features (tests).
	Features fs.FS `json:"-"`
	// TargetImpl overrides Target with a ready-made implementation (tests).
	TargetImpl targets.Target `json:"-"`
	// Output receives the progress view; nil means os.Stdout.
	Output io.Writer `json:"-"`
	// Producer is gwdiag's version and revision, for the report (the CLI
	// sets them).
	Producer Producer `json:"-"`
	// OnTrace, when set, receives every trace a scenario takes, with the
	// scenario's name (golden traces are recorded through it). It may be
	// called from several scenarios at once.
	OnTrace func(scenario string, events []trace.Event) `json:"-"`
	// PlantCredentials (tests) sends a credential made for the run in
	// every credential header of every request a step makes; everything
	// the run writes is scrubbed of it as of any credential the run
	// knows, and Run fails if its progress view or a file it wrote holds
	// one (planted.go).
	PlantCredentials bool `json:"-"`
	// Secrets, when set, is the run's (tests: to know its prefix); nil
	// makes one.
	Secrets *stepdefs.Secrets `json:"-"`
}

// LoadOptions reads options from a YAML file.
func LoadOptions(path string) (Options, error) {
	var o Options
	b, err := os.ReadFile(path)
	if err != nil {
		return o, err
	}
	if err := yaml.UnmarshalStrict(b, &o); err != nil {
		return o, fmt.Errorf("%s: %w", path, err)
	}
	return o, nil
}

// withDefaults fills the zero fields.
func (o Options) withDefaults() Options {
	o.applyDefaults() // OptionRegistry's defaults
	if o.Output == nil {
		o.Output = os.Stdout
	}
	// The progress quotes what the proxy sent: shown, never obeyed.
	o.Output = termtext.NewWriter(o.Output)
	if o.Implementation.Name == "" {
		o.Implementation.Name = "unnamed"
	}
	return o
}

// claims reports whether the proxy claims the extended feature f.
func (o *Options) claims(f FeatureName) bool {
	return o.AllFeatures || slices.Contains(o.SupportedFeatures, f)
}
