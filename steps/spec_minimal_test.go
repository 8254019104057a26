package steps

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/steps/specminimal"
	"github.com/gwdiag/gwdiag/steps/targets"
	"github.com/gwdiag/gwdiag/steps/targets/local"
)

// specMinimalTarget runs steps/specminimal, a proxy written from the spec
// alone, with the suite's mock backends.
type specMinimalTarget struct {
	// ignoreQuit is specminimal.Config.IgnoreQuit.
	ignoreQuit bool
}

func (specMinimalTarget) Name() string                { return "spec-minimal" }
func (specMinimalTarget) Start(context.Context) error { return nil }
func (specMinimalTarget) Stop(context.Context) error  { return nil }
func (specMinimalTarget) Capabilities() []string {
	return []string{targets.CapabilityStandalone, targets.CapabilityDataPlane}
}
func (specMinimalTarget) ServiceAddr() (string, bool) { return "127.0.0.1", true }
func (t specMinimalTarget) configFor(setup targets.Setup, m *local.Mocks) (specminimal.Config, error) {
	cfg := specminimal.Config{IgnoreQuit: t.ignoreQuit}
	for _, p := range setup.Policies {
		// The spec's standalone config has no policies of its own, so a
		// proxy written from it has no gateway-wide limits.
		return cfg, fmt.Errorf("policy %q on a %s: the spec-minimal proxy has only route limits", p.Name, p.TargetKind)
	}
	for _, l := range setup.Listeners {
		ml := specminimal.Listener{Name: l.Name}
		for _, r := range l.Routes {
			addr, err := m.Addr(r.Backend)
			if err != nil {
				return cfg, err
			}
			mr := specminimal.Route{Name: r.Name, PathPrefix: r.PathPrefix, Backend: addr}
			for _, lim := range r.Limits {
				mr.Limits = append(mr.Limits, specminimal.Limit{Tokens: lim.Kind == targets.LimitTokens, Amount: lim.Amount, Unit: lim.Unit, Burst: lim.Burst})
			}
			ml.Routes = append(ml.Routes, mr)
		}
		cfg.Listeners = append(cfg.Listeners, ml)
	}
	return cfg, nil
}

func (t specMinimalTarget) Configure(ctx context.Context, setup targets.Setup) (targets.Deployment, error) {
	mocks, err := local.StartMocks(setup.Backends)
	if err != nil {
		return nil, err
	}
	cfg, err := t.configFor(setup, mocks)
	if err != nil {
		mocks.Close()
		return nil, err
	}
	p, err := specminimal.Start(cfg)
	if err != nil {
		mocks.Close()
		return nil, err
	}
	d := &local.Deployment{Admin: p.AdminAddr(), Backends: mocks, Addrs: map[string]string{},
		StopProxy: func(context.Context) error { return p.Close() }}
	for _, l := range setup.Listeners {
		if d.Addrs[l.Name], err = p.ListenerAddr(l.Name); err != nil {
			d.Stop(ctx)
			return nil, err
		}
	}
	if err := local.WaitReady(ctx, d); err != nil {
		d.Stop(ctx)
		return nil, err
	}
	return d, nil
}

// TestSpecMinimalProxyPassesCore keeps the suite honest: a proxy written
// from the spec alone, doing the least it allows and differing from the
// reference wherever the spec leaves room, passes every core scenario, and
// every extended feature it lacks is reported unsupported (not failed). The
// day a core scenario asserts what the spec does not say, this fails.
func TestSpecMinimalProxyPassesCore(t *testing.T) {
	// Not parallel: in process, its CPU profile (the runtime's one profiler,
	// which it answers 503 while in use, as a proxy of its own process may)
	// would meet the other in-process runs'.
	checkSpecMinimal(t, Options{TargetImpl: specMinimalTarget{}})
}

// TestSpecMinimalAsProcess runs the same proxy as a user runs a third-party
// one: its binary started by the process target from the config the suite
// writes, through gwdiag's own engine.
func TestSpecMinimalAsProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the specminimal binary")
	}
	bin := builtBinary(t, "github.com/gwdiag/gwdiag/steps/specminimal/cmd/specminimal")
	checkSpecMinimal(t, Options{Target: "process", ProxyCommand: bin + " -f {config}"})
}

// checkSpecMinimal runs the suite with o against the spec-minimal proxy:
// every core scenario passes, and exactly the extended features it lacks
// are unsupported.
func checkSpecMinimal(t *testing.T, o Options) {
	t.Helper()
	var out strings.Builder
	o.Output, o.Implementation = &out, Implementation{Name: "spec-minimal"}
	// A proxy that redacts nothing: its traces show every credential the
	// requests carry, and none may reach what the suite writes.
	plantCredentials(t, &o)
	rep, err := Run(context.Background(), o)
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Profiles) != 1 || rep.Profiles[0].Name != ProfileStandalone {
		t.Fatalf("profiles: got %+v, want standalone", rep.Profiles)
	}
	p := rep.Profiles[0]
	if p.Core.Result != Passed || p.Core.Failed != 0 || p.Core.Skipped != 0 {
		t.Errorf("core: got %+v, want every core scenario passed", p.Core)
	}
	if rep.Failed() {
		for _, f := range rep.Features {
			for _, s := range f.Scenarios {
				if s.Result == Failed {
					t.Errorf("%s: %s failed at %q: %s", f.Name, s.Name, s.Step, s.Message)
				}
			}
		}
	}
	// What the spec-minimal proxy does differently from the reference, and
	// so must be reported unsupported: each is a reference-only behaviour.
	// (Its 404 for no route and 502 for a refused backend happen to satisfy
	// proxy-status-codes, and its 429 describing the limit that refused it
	// ratelimit-denying-headers.)
	wantUnsupported := []FeatureName{
		FeatureAdminErrorStatus, // 422, not 400
		FeatureConfigDumpLayout, // listeners at the top level
		FeatureGatewayRateLimit, // route limits only
		FeatureGlobalRateLimit,  // no remoteRateLimit
		FeatureGlobalDescriptorFailure,
		FeatureLLMStreamUsageInjection, // no stream_options injection
		FeatureRateLimitHeadersOnSuccess,
		FeatureRateLimitResponseFormat,   // application/octet-stream, decimal reset
		FeatureRateLimitPerKey,           // one bucket per limit: no keys
		FeatureRateLimitRetryAfter,       // no Retry-After
		FeatureTokenRemainingAfterCharge, // headers only on 429s
		FeatureRateLimitOpenAIError,      // the spec's text only
		FeatureRateLimitIETFHeaders,      // x-ratelimit-* only
		FeatureRateLimitAnthropicError,
		FeatureRateLimitShadow,
		FeatureOTLPExport, // no telemetry: the spec has none
		FeatureRateLimitOpenAIHeaders,
		FeatureRateLimitAnthropicHeaders,
		FeatureTraceCELExpression,
		FeatureTraceFollow, // one request per watcher
		FeatureTraceReadyComment,
		FeatureTraceSeverity,   // info everywhere
		FeatureTraceBodyErrors, // a body cut after the head is not reported
		FeatureTraceStreamHeaders,
		FeatureTraceWatcherFIFO,              // one global slot
		FeatureTraceExplainsOutcome,          // no reasons: the spec names no field for them
		FeatureTraceRedactsCredentials,       // shows every header as it came
		FeatureTraceRedactsAPIKeysAndCookies, // and every cookie and key
	}
	got := slices.Clone(p.Extended.UnsupportedFeatures)
	slices.Sort(got)
	slices.Sort(wantUnsupported)
	if !slices.Equal(got, wantUnsupported) {
		t.Errorf("unsupported extended features:\n got  %v\n want %v\n(supported: %v)", got, wantUnsupported, p.Extended.SupportedFeatures)
	}
}

// TestSpecMinimalClaimsFail: claiming an extended feature the proxy lacks
// turns "unsupported" into a failure, which fails the run.
func TestSpecMinimalClaimsFail(t *testing.T) {
	t.Parallel()
	rep, err := Run(context.Background(), Options{TargetImpl: specMinimalTarget{}, Output: &strings.Builder{},
		Tags: "@trace-order", SupportedFeatures: []FeatureName{FeatureTraceSeverity},
		Timeouts: Timeouts{Trace: Duration(2 * time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	got := rep.Scenario("Severity says how each step went")
	if len(got) != 1 || got[0].Result != Failed || !strings.Contains(got[0].Message, `severity: got "info", want "warn"`) {
		t.Errorf("claimed trace-severity on a proxy that says info everywhere: got %+v, want a failure naming the severity", got)
	}
	if !rep.Failed() || rep.Profiles[0].Extended.Result != Failed || !slices.Contains(rep.Profiles[0].Extended.FailedFeatures, FeatureTraceSeverity) {
		t.Errorf("report: got %+v, want the run failed with trace-severity among the failed features", rep.Profiles)
	}
}
