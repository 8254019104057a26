package steps

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/gwdiag/gwdiag/steps/targets"
	"github.com/gwdiag/gwdiag/steps/targets/local"
)

// ConformanceProfileName names a profile: a set of features for one way of
// running a proxy.
type ConformanceProfileName string

// The profiles. A target runs the profiles it can host (Target.Capabilities);
// Options.Profiles narrows them.
const (
	// ProfileStandalone is a proxy run on its own from a config file, with
	// its admin server and data plane reachable (inprocess, process, container).
	ProfileStandalone ConformanceProfileName = "standalone"
	// ProfileCluster is a proxy managed through Gateway API resources.
	ProfileCluster ConformanceProfileName = "cluster"
)

// ConformanceProfile is the features of one profile. Core features are what
// the specification requires: every scenario of one asserts only what a
// sentence of the spec says (features/README.md names the sentence), so a
// proxy written from the spec alone passes them. Extended features are
// behaviour of the reference implementation the spec leaves open; a proxy
// that lacks one is reported as not supporting it unless it claims it.
type ConformanceProfile struct {
	Name             ConformanceProfileName
	Description      string
	CoreFeatures     []FeatureName
	ExtendedFeatures []FeatureName
}

// Profiles are every profile of the suite, in report order.
var Profiles = []ConformanceProfile{
	{
		Name:        ProfileStandalone,
		Description: "a proxy run from a config file: trace stream, admin endpoints, local and global rate limits",
		CoreFeatures: []FeatureName{
			FeatureTraceOrder, FeatureTokenOverage, FeatureRequestLimits, FeatureAdmin, FeatureForwardCompat,
		},
		ExtendedFeatures: []FeatureName{
			FeatureTraceSeverity, FeatureTraceBodyErrors, FeatureTraceStreamHeaders, FeatureTraceReadyComment, FeatureTraceCELExpression,
			FeatureTraceWatcherFIFO, FeatureProxyStatusCodes, FeatureRateLimitHeadersOnSuccess,
			FeatureRateLimitResponseFormat, FeatureGatewayRateLimit, FeatureLLMStreamUsageInjection,
			FeatureConfigDumpLayout, FeatureAdminErrorStatus, FeatureGlobalRateLimit, FeatureTraceFollow,
			FeatureTraceExplainsOutcome, FeatureRateLimitPerKey, FeatureRateLimitDenyingHeaders,
			FeatureRateLimitRetryAfter, FeatureTokenRemainingAfterCharge, FeatureRateLimitOpenAIError,
			FeatureTraceRedactsCredentials, FeatureTraceRedactsAPIKeysAndCookies,
			FeatureRateLimitIETFHeaders, FeatureRateLimitOpenAIHeaders, FeatureRateLimitAnthropicHeaders,
			FeatureGlobalDescriptorFailure, FeatureRateLimitAnthropicError, FeatureRateLimitShadow,
			FeatureOTLPExport,
		},
	},
	{
		Name: ProfileCluster,
		Description: "a proxy managed through Gateway API resources: condition status (Programmed only once a proxy pod is ready), " +
			"and through port-forwards to its pods the trace stream, naming the pod, and local rate limits (keyed ones too)",
		CoreFeatures:     []FeatureName{FeatureConditionStatus, FeatureTraceOrder, FeatureRequestLimits, FeatureTokenOverage, FeatureProxyPods},
		ExtendedFeatures: []FeatureName{FeaturePolicyConditionReasons, FeatureRateLimitPerKey},
	},
}

// profileCapability is the target capability a profile needs.
var profileCapability = map[ConformanceProfileName]string{
	ProfileStandalone: targets.CapabilityStandalone,
	ProfileCluster:    targets.CapabilityCluster,
}

// featureNeeds is what a feature needs of a target beyond its profile's
// capability. A target that lacks it still covers the profile, and the
// feature's scenarios are skipped with the reason (a cluster target that
// manages Gateway API resources only runs the condition scenarios).
var featureNeeds = map[FeatureName]string{
	FeatureTraceOrder:    targets.CapabilityDataPlane,
	FeatureRequestLimits: targets.CapabilityDataPlane,
	FeatureTokenOverage:  targets.CapabilityDataPlane,
	FeatureProxyPods:     targets.CapabilityDataPlane,
	// Keyed limits are judged by the traffic they let through.
	FeatureRateLimitPerKey: targets.CapabilityDataPlane,
}

// capabilityMeaning says what a capability is, for skip reasons.
var capabilityMeaning = map[string]string{
	targets.CapabilityDataPlane: "a proxy that serves the scenario's traffic; on a cluster: --cluster local-node, or cluster.dataPlane on a cluster whose proxy runs in pods",
}

// profileOf returns the first profile a feature belongs to and whether it
// is extended there (a feature is core or extended in every profile alike:
// TestEveryCoreScenarioRestsOnTheSpec).
func profileOf(f FeatureName) (p ConformanceProfile, extended, ok bool) {
	ps := profilesOf(f)
	if len(ps) == 0 {
		return ConformanceProfile{}, false, false
	}
	return ps[0], slices.Contains(ps[0].ExtendedFeatures, f), true
}

// profilesOf returns every profile a feature belongs to, in report order.
func profilesOf(f FeatureName) []ConformanceProfile {
	var out []ConformanceProfile
	for _, p := range Profiles {
		if slices.Contains(p.CoreFeatures, f) || slices.Contains(p.ExtendedFeatures, f) {
			out = append(out, p)
		}
	}
	return out
}

// profileIn is the profile a scenario of feature f is reported under in a
// run covering profiles: the first of them f belongs to. ok is false when
// f belongs to none of them.
func profileIn(f FeatureName, profiles []ConformanceProfileName) (ConformanceProfileName, bool) {
	for _, p := range profilesOf(f) {
		if slices.Contains(profiles, p.Name) {
			return p.Name, true
		}
	}
	return "", false
}

// ExtendedFeatures lists every extended feature of every profile, once.
func ExtendedFeatures() []FeatureName {
	var out []FeatureName
	for _, p := range Profiles {
		for _, f := range p.ExtendedFeatures {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// Validate checks the options before a run: the target's name and what it
// needs, and the feature and profile names (a claimed or exempt feature that
// no profile has is a typo the user should hear about). Its errors are the
// user's to fix on the command line or in the options file.
func (o Options) Validate() error {
	if err := o.checkPositive(); err != nil {
		return err
	}
	switch o.Target {
	case "", "inprocess":
	case "cluster":
		if o.TargetImpl == nil {
			if err := o.Cluster.Validate(); err != nil {
				return err
			}
		}
	case "process":
		if o.ProxyCommand == "" && o.TargetImpl == nil {
			return errors.New("--target process needs --proxy-cmd (proxyCommand), e.g. --proxy-cmd 'refproxy -f {config}'")
		}
	case "container":
		if o.TargetImpl == nil {
			if err := o.Container.Validate(); err != nil {
				return err
			}
		}
	default:
		if o.TargetImpl == nil {
			return fmt.Errorf("unknown target %q: want inprocess, process, container or cluster", o.Target)
		}
	}
	if err := o.ConfigStyle.Validate(); err != nil {
		return err
	}
	if o.ConfigStyle != "" && o.ConfigStyle != local.StyleBinds && o.Target != "process" && o.Target != "container" {
		return fmt.Errorf("--config-style %s: the %s target writes no config file; the process and container targets do", o.ConfigStyle, cmp.Or(o.Target, "inprocess"))
	}
	switch o.OTLPProtocol {
	case "", "grpc", "http":
	default:
		return fmt.Errorf("--otlp-protocol %q: want grpc or http", o.OTLPProtocol)
	}
	if o.RateLimitService != "" {
		if _, port, err := net.SplitHostPort(o.RateLimitService); err != nil || port == "" {
			return fmt.Errorf("--ratelimit-service %q: want the gRPC host:port of an Envoy-compatible rate-limit service", o.RateLimitService)
		}
	}
	return o.validateFeatures()
}

func (o Options) validateFeatures() error {
	check := func(what string, names []FeatureName, extendedOnly bool) error {
		for _, n := range names {
			_, ext, ok := profileOf(n)
			switch {
			case !ok:
				return fmt.Errorf("%s: unknown feature %q; known features: %s", what, n, knownFeatures())
			case extendedOnly && !ext:
				return fmt.Errorf("%s: %q is a core feature, which every conformant proxy supports; claim extended features only", what, n)
			}
		}
		return nil
	}
	if err := checkTags(o.Tags); err != nil {
		return err
	}
	if err := check("supportedFeatures", o.SupportedFeatures, true); err != nil {
		return err
	}
	if err := check("exemptFeatures", o.ExemptFeatures, false); err != nil {
		return err
	}
	for _, p := range o.Profiles {
		if _, ok := profileCapability[p]; !ok {
			return fmt.Errorf("profiles: unknown profile %q; known profiles: %s, %s", p, ProfileStandalone, ProfileCluster)
		}
	}
	return nil
}

// checkTags refuses a tag expression godog would read as something else:
// godog joins tags with "&&" (and), "," (or) and "~" (not), with no
// brackets, so Cucumber's "@a or @b" or "@a || @b" would name one tag that
// no scenario has, and the run would quietly run nothing.
func checkTags(expr string) error {
	if expr == "" {
		return nil
	}
	syntax := "tags join with && (and), a comma (or) and ~ (not), without brackets, e.g. '@request-limits,@token-overage && ~@extended'"
	for _, clause := range tagClauses(expr) {
		for _, term := range clause {
			name := strings.TrimPrefix(term, "~")
			if len(name) < 2 || name[0] != '@' || strings.Count(name, "@") != 1 || strings.ContainsAny(name, " \t()|!&") {
				return fmt.Errorf("tags %q: %q is not a tag; %s", expr, term, syntax)
			}
		}
	}
	return nil
}

// tagClauses splits a godog tag expression as godog does: clauses joined
// by "&&", each of terms joined by ",", trimmed ("~@x" negates).
func tagClauses(expr string) [][]string {
	var out [][]string
	for _, and := range strings.Split(expr, "&&") {
		var terms []string
		for _, term := range strings.Split(and, ",") {
			terms = append(terms, strings.TrimSpace(term))
		}
		out = append(out, terms)
	}
	return out
}

func knownFeatures() string {
	var n []string
	for _, f := range allFeatures() {
		n = append(n, string(f))
	}
	return strings.Join(n, ", ")
}

// allFeatures is every feature of every profile, once, in profile order.
func allFeatures() []FeatureName {
	var out []FeatureName
	for _, p := range Profiles {
		for _, f := range slices.Concat(p.CoreFeatures, p.ExtendedFeatures) {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// profilesFor is the profiles a run covers: every profile the target can
// host, or those of them asked for.
func (o Options) profilesFor(t targets.Target) []ConformanceProfileName {
	var out []ConformanceProfileName
	for _, p := range Profiles {
		if slices.Contains(t.Capabilities(), profileCapability[p.Name]) && (len(o.Profiles) == 0 || slices.Contains(o.Profiles, p.Name)) {
			out = append(out, p.Name)
		}
	}
	return out
}
