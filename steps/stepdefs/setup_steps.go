package stepdefs

import (
	"context"
	"fmt"
	"time"

	"github.com/cucumber/godog"

	"github.com/gwdiag/gwdiag/steps/targets"
)

func registerSetupSteps(sc *godog.ScenarioContext) {
	step(sc, `^an echo backend "([^"]*)"$`, addBackend(targets.BackendEcho))
	step(sc, `^an LLM backend "([^"]*)"$`, addBackend(targets.BackendLLM))
	step(sc, `^a route "([^"]*)" with path prefix "([^"]*)" to backend "([^"]*)"$`, (*state).routeToBackend)
	step(sc, `^a route "([^"]*)" with path prefix "([^"]*)" to backend "([^"]*)" on listener "([^"]*)"$`, (*state).routeOnListener)
	step(sc, `^a route "([^"]*)" with path prefix "([^"]*)" to an unreachable backend on listener "([^"]*)"$`, (*state).unreachableRouteOnListener)
	step(sc, `^the route "([^"]*)" has a (request|token) limit of (\d+) per (second|minute|hour)$`, (*state).routeHasLimitPer)
	step(sc, `^the route "([^"]*)" has a (request|token) limit of (\d+) per (second|minute|hour) with burst (\d+)$`, (*state).routeHasLimitPerWithBurst)
	step(sc, `^the route "([^"]*)" has a (request|token) limit of (\d+) per (second|minute|hour) keyed by header "([^"]*)"$`, (*state).routeHasLimitPerKeyed)
	step(sc, `^the route "([^"]*)" has a (request|token) limit of (\d+) per (second|minute|hour) in shadow mode( that writes its headers)?$`, (*state).routeHasShadowLimit)
	step(sc, `^the route "([^"]*)" answers refusals with OpenAI's JSON error$`, (*state).routeRefusesAsOpenAI)
	step(sc, `^the route "([^"]*)" answers refusals with Anthropic's JSON error$`, (*state).routeRefusesAsAnthropic)
	step(sc, `^the route "([^"]*)" writes its rate-limit headers in the (x-ratelimit|IETF|OpenAI|Anthropic) format$`, (*state).routeWritesHeaderFamily)
	step(sc, `^the gateway of listener "([^"]*)" has a request limit of (\d+) per (second|minute|hour)$`, (*state).gatewayListenerHasRequestLimitPer)
	step(sc, `^a rate-limit policy "([^"]*)" targets the HTTPRoute "([^"]*)"$`, (*state).rateLimitPolicyTargetsHttproute)
	step(sc, `^the configuration is applied$`, (*state).configurationIsApplied)
}

func (s *state) routeToBackend(ctx context.Context, name, prefix, backend string) error {
	return addRoute(ctx, targets.DefaultListener, name, prefix, backend)
}

func (s *state) routeOnListener(ctx context.Context, name, prefix, backend, listener string) error {
	return addRoute(ctx, listener, name, prefix, backend)
}

func (s *state) unreachableRouteOnListener(ctx context.Context, name, prefix, listener string) error {
	backend := name + "-unreachable"
	s.setup.Backends = append(s.setup.Backends, targets.Backend{Name: backend, Kind: targets.BackendUnreachable})
	return addRoute(ctx, listener, name, prefix, backend)
}

func (s *state) routeHasLimitPer(ctx context.Context, route, kind string, n int, unit string) error {
	return addLimit(ctx, route, kind, n, unit, 0)
}

func (s *state) routeHasLimitPerWithBurst(ctx context.Context, route, kind string, n int, unit string, burst int) error {
	return addLimit(ctx, route, kind, n, unit, burst)
}

func (s *state) routeHasLimitPerKeyed(ctx context.Context, route, kind string, n int, unit, header string) error {
	if err := addLimit(ctx, route, kind, n, unit, 0); err != nil {
		return err
	}
	r := s.setup.RouteNamed(route)
	r.Limits[len(r.Limits)-1].KeyHeader = header
	return nil
}

// routeHasShadowLimit adds a limit that is counted but never refuses
// (refproxy's shadow), writing its headers when asked.
func (s *state) routeHasShadowLimit(ctx context.Context, route, kind string, n int, unit, headers string) error {
	if err := addLimit(ctx, route, kind, n, unit, 0); err != nil {
		return err
	}
	r := s.setup.RouteNamed(route)
	l := &r.Limits[len(r.Limits)-1]
	l.Shadow, l.ShadowHeaders = true, headers != ""
	return nil
}

func (s *state) routeRefusesAsOpenAI(ctx context.Context, route string) error {
	return s.routeRefusesAs(route, "openai")
}

func (s *state) routeRefusesAsAnthropic(ctx context.Context, route string) error {
	return s.routeRefusesAs(route, "anthropic")
}

// routeRefusesAs sets the shape of the route's 429 bodies (refproxy's
// rateLimitError).
func (s *state) routeRefusesAs(route, shape string) error {
	if s.dep != nil {
		return fmt.Errorf("error format of %q declared after the proxy was configured", route)
	}
	r := s.setup.RouteNamed(route)
	if r == nil {
		return fmt.Errorf("no route %q", route)
	}
	r.RateLimitError = shape
	return nil
}

// routeWritesHeaderFamily adds a header family (refproxy's
// rateLimitHeaders names) to the route's rate-limit headers.
func (s *state) routeWritesHeaderFamily(ctx context.Context, route, family string) error {
	if s.dep != nil {
		return fmt.Errorf("rate-limit header family of %q declared after the proxy was configured", route)
	}
	r := s.setup.RouteNamed(route)
	if r == nil {
		return fmt.Errorf("no route %q", route)
	}
	name, ok := headerFamilies[family]
	if !ok {
		return fmt.Errorf("unknown rate-limit header family %q", family)
	}
	r.RateLimitHeaders = append(r.RateLimitHeaders, name)
	return nil
}

// headerFamilies maps the families a feature names to the config's.
var headerFamilies = map[string]string{
	"x-ratelimit": "xRateLimit", "IETF": "ietf", "OpenAI": "openai", "Anthropic": "anthropic",
}

func (s *state) gatewayListenerHasRequestLimitPer(ctx context.Context, listener string, n int, unit string) error {
	if s.dep != nil {
		return fmt.Errorf("gateway limit on %q declared after the proxy was configured", listener)
	}
	if !s.setup.HasListener(listener) {
		return fmt.Errorf("no listener %q", listener)
	}
	l := targets.Limit{Kind: targets.LimitRequests, Amount: uint64(n), Unit: unitOf(unit)}
	s.setup.Policies = append(s.setup.Policies, targets.Policy{Name: "gateway-" + listener, TargetKind: "Gateway", TargetName: listener, Limits: []targets.Limit{l}})
	return nil
}

func (s *state) rateLimitPolicyTargetsHttproute(ctx context.Context, name, route string) error {
	s.setup.Policies = append(s.setup.Policies, targets.Policy{Name: name, TargetKind: "HTTPRoute", TargetName: route,
		Limits: []targets.Limit{{Kind: targets.LimitRequests, Amount: 1, Unit: time.Second}}})
	return nil
}

func (s *state) configurationIsApplied(ctx context.Context) error {
	_, err := s.deployment(ctx)
	return err
}

func addBackend(kind targets.BackendKind) func(ctx context.Context, name string) error {
	return func(ctx context.Context, name string) error {
		s := getState(ctx)
		if s.setup.BackendNamed(name) != nil {
			return fmt.Errorf("backend %q declared twice", name)
		}
		s.setup.Backends = append(s.setup.Backends, targets.Backend{Name: name, Kind: kind})
		return nil
	}
}

func addLimit(ctx context.Context, route, kind string, n int, unit string, burst int) error {
	s := getState(ctx)
	if s.dep != nil {
		return fmt.Errorf("limit on %q declared after the proxy was configured", route)
	}
	r := s.setup.RouteNamed(route)
	if r == nil {
		return fmt.Errorf("no route %q", route)
	}
	l := targets.Limit{Kind: targets.LimitRequests, Amount: uint64(n), Burst: uint64(burst)}
	if kind == "token" {
		l.Kind = targets.LimitTokens
	}
	l.Unit = unitOf(unit)
	r.Limits = append(r.Limits, l)
	return nil
}
