package stepdefs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cucumber/godog"

	"github.com/gwdiag/gwdiag/steps/await"
	"github.com/gwdiag/gwdiag/steps/targets"
)

func registerGlobalSteps(sc *godog.ScenarioContext) {
	step(sc, `^a global rate-limit service$`, (*state).globalRateLimitService)
	step(sc, `^a global rate-limit service of the scenario's own$`, (*state).ownGlobalRateLimitService)
	step(sc, `^the route "([^"]*)" has a global (request|token) limit of (\d+) per (second|minute|hour|day)(?: keyed by header "([^"]*)")?$`, (*state).routeGlobalLimit)
	step(sc, `^the route "([^"]*)" lets requests through when the rate-limit service is down$`, (*state).routeFailsOpen)
	step(sc, `^the proxy runs as (\d+) replicas$`, (*state).proxyRunsAsReplicas)
	step(sc, `^the rate-limit service goes away$`, (*state).rateLimitServiceGoesAway)
	step(sc, `^the rate-limit service comes back$`, (*state).rateLimitServiceComesBack)
	step(sc, `^within (\d+) seconds the rate-limit service has counted (\d+) for the route "([^"]*)"$`, (*state).rateLimitServiceCounted)
	step(sc, `^the response header "([^"]*)" is the seconds until the rate-limit service's (minute|hour|day) window ends$`, (*state).headerIsWindowEnd)
}

// headerIsWindowEnd checks a header of the last response against the end
// of the rate-limit service's window of unit: the suite's service
// (github.com/envoyproxy/ratelimit) aligns its windows with the clock (a
// day's ends at midnight UTC) and answers the seconds left in it. The
// service answered between the request's sending and its head's arrival;
// a second either way is allowed for its rounding and the proxy's.
func (s *state) headerIsWindowEnd(ctx context.Context, name, unit string) error {
	r, err := s.lastResponse()
	if err != nil {
		return err
	}
	v := r.header.Get(name)
	got, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return fmt.Errorf("response header %s: got %q, want whole seconds", name, v)
	}
	u := int64(targets.GlobalLimit{Unit: unit}.UnitSeconds())
	return windowEndWithin(got, u, r.sent, r.at, name, unit)
}

// windowEndWithin checks got, seconds, against the end of a clock-aligned
// window of u seconds as seen from any time from sent to at.
func windowEndWithin(got, u int64, sent, at time.Time, name, unit string) error {
	left := func(t time.Time) int64 { return u - t.Unix()%u }
	lo, hi := left(at), left(sent)
	if lo > hi { // a window ended between the two: either is right
		lo, hi = 0, u
	}
	if got < lo-1 || got > hi+1 {
		return fmt.Errorf("response header %s: got %d, want the seconds until the service's %s window ends, %d (at %s)", name, got, unit, hi, sent.UTC().Format(time.TimeOnly))
	}
	return nil
}

// rateLimitServiceCounted waits until the scenario's own service's
// counters (in its Redis) for the route's descriptors add up to n: a
// response's tokens reach the service with their descriptor (the
// reference once sent the charge without it, its issue 3282, and tokens
// were never counted). A count still short at the deadline fails.
func (s *state) rateLimitServiceCounted(ctx context.Context, secs, n int, route string) error {
	if s.ownRLS == nil {
		return errors.New("only the counters of a rate-limit service of the scenario's own can be read")
	}
	match := "gwdiag_scenario_" + s.setup.RateLimitKey + "_gwdiag_route_" + route + "_"
	return await.Until(ctx, time.Duration(secs)*time.Second, 50*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		got, err := s.ownRLS.Counted(ctx, match)
		if err != nil {
			return false, "", err
		}
		return got == int64(n), fmt.Sprintf("the service counted %d for the route %q, want %d", got, route, n), nil
	})
}

func (s *state) globalRateLimitService(ctx context.Context) error {
	if s.cfg.RateLimit == nil {
		return errors.New("this run has no global rate-limit service")
	}
	addr, err := s.cfg.RateLimit.Shared(ctx)
	if err != nil {
		return err
	}
	return s.useRateLimitService(addr)
}

func (s *state) ownGlobalRateLimitService(ctx context.Context) error {
	if s.cfg.RateLimit == nil {
		return errors.New("this run has no global rate-limit service")
	}
	own, err := s.cfg.RateLimit.Own(ctx)
	if err != nil {
		return err
	}
	s.ownRLS = own
	return s.useRateLimitService(own.GRPCAddr())
}

func (s *state) routeGlobalLimit(ctx context.Context, route, kind string, n int, unit, header string) error {
	r, err := s.routeForLimits(route)
	if err != nil {
		return err
	}
	if s.setup.RateLimitService == "" {
		return errors.New("a global limit needs a global rate-limit service; declare one first")
	}
	g := targets.GlobalLimit{Kind: targets.LimitRequests, Amount: uint64(n), Unit: unit, KeyHeader: header}
	if kind == "token" {
		g.Kind = targets.LimitTokens
	}
	r.Global = append(r.Global, g)
	return nil
}

func (s *state) routeFailsOpen(ctx context.Context, route string) error {
	r, err := s.routeForLimits(route)
	if err != nil {
		return err
	}
	r.GlobalFailOpen = true
	return nil
}

func (s *state) proxyRunsAsReplicas(ctx context.Context, n int) error {
	if s.dep != nil {
		return errors.New("replicas declared after the proxy was configured")
	}
	if n < 1 || n > 8 {
		return fmt.Errorf("%d replicas: want 1 to 8", n)
	}
	s.replicas = n
	return nil
}

func (s *state) rateLimitServiceGoesAway(ctx context.Context) error {
	if s.ownRLS == nil {
		return errors.New("only a rate-limit service of the scenario's own can be stopped")
	}
	s.ownRLS.Kill()
	return nil
}

func (s *state) rateLimitServiceComesBack(ctx context.Context) error {
	if s.ownRLS == nil {
		return errors.New("only a rate-limit service of the scenario's own can be restarted")
	}
	return s.ownRLS.Restart(ctx)
}

// useRateLimitService points the scenario's global limits at addr, under
// a key of the scenario's own.
func (s *state) useRateLimitService(addr string) error {
	if s.dep != nil {
		return errors.New("rate-limit service declared after the proxy was configured")
	}
	var b [6]byte
	rand.Read(b[:])
	s.setup.RateLimitService, s.setup.RateLimitKey = addr, hex.EncodeToString(b[:])
	s.setup.RateLimitTimeout = s.cfg.RequestTimeout / 2
	return nil
}

// routeForLimits is a declared route that limits may still be added to.
func (s *state) routeForLimits(route string) (*targets.Route, error) {
	if s.dep != nil {
		return nil, fmt.Errorf("limit on %q declared after the proxy was configured", route)
	}
	r := s.setup.RouteNamed(route)
	if r == nil {
		return nil, fmt.Errorf("no route %q", route)
	}
	return r, nil
}
