package stepdefs

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/explain"
	"github.com/gwdiag/gwdiag/steps/targets"
)

// registerExplainSteps: the reasons a trace gives for its outcome
// (features/trace_explains_outcome.feature), one named step each.
func registerExplainSteps(sc *godog.ScenarioContext) {
	step(sc, `^a route "([^"]*)" with path prefix "([^"]*)" and method "([^"]*)" to backend "([^"]*)" on listener "([^"]*)"$`, (*state).routeWithMethod)
	step(sc, `^a route "([^"]*)" with path prefix "([^"]*)" and header "([^"]*)" "([^"]*)" to backend "([^"]*)" on listener "([^"]*)"$`, (*state).routeWithHeader)
	step(sc, `^I trace a GET request to "([^"]*)" with header "([^"]*)" "([^"]*)" on listener "([^"]*)"$`, (*state).traceWithHeader)
	step(sc, `^I trace a chat completion using (\d+) tokens$`, (*state).traceChat)
	step(sc, `^the trace says route "([^"]*)" was selected$`, (*state).routeSelected)
	step(sc, `^the trace says route "([^"]*)" did not match on "([^"]*)", wanting '([^']*)' and getting '([^']*)'$`, (*state).routeNotMatched)
	step(sc, `^the trace says localRateLimit refused the request with its (requests|tokens) entry of (\d+) per (second|minute|hour), nothing left$`, (*state).localLimitRefused)
	step(sc, `^the trace says localRateLimit let the request through, its shadow (requests|tokens) entry of (\d+) per (second|minute|hour) having nothing left$`, (*state).shadowLimitWouldRefuse)
	step(sc, `^the trace gives "([^"]*)" as the cause of status (\d+)$`, (*state).causeOf)
	step(sc, `^the explanation of the trace reads '([^']*)'$`, (*state).explanationReads)
}

// The steps are methods of the scenario's state; step passes them the
// state of the context godog calls them with.

func (s *state) routeWithMethod(ctx context.Context, name, prefix, method, backend, listener string) error {
	if err := addRoute(ctx, listener, name, prefix, backend); err != nil {
		return err
	}
	s.setup.RouteNamed(name).Method = method
	return nil
}

func (s *state) routeWithHeader(ctx context.Context, name, prefix, header, value, backend, listener string) error {
	if err := addRoute(ctx, listener, name, prefix, backend); err != nil {
		return err
	}
	s.setup.RouteNamed(name).Header = &targets.HeaderMatch{Name: header, Value: value}
	return nil
}

func (s *state) traceWithHeader(ctx context.Context, reqTarget, name, value, listener string) error {
	w, err := s.watch(ctx, "")
	if err != nil {
		return err
	}
	h := http.Header{}
	h.Set(name, value)
	if _, err := s.send(ctx, listener, http.MethodGet, reqTarget, h, nil); err != nil {
		return err
	}
	return s.finish(w)
}

func (s *state) traceChat(ctx context.Context, n int) error {
	w, err := s.watch(ctx, "")
	if err != nil {
		return err
	}
	if _, err := s.chat(ctx, n, noStream); err != nil {
		return err
	}
	return s.finish(w)
}

// routeReason is the reason routeSelection gives for the route named name.
func (s *state) routeReason(name string) (map[string]any, error) {
	e, err := s.event(string(trace.RouteSelection))
	if err != nil {
		return nil, err
	}
	reasons, ok := e.Message["reasons"].([]any)
	if !ok {
		return nil, fmt.Errorf("routeSelection gives no reasons (message: %v)", e.Message)
	}
	var keys []string
	for _, r := range reasons {
		m, _ := r.(map[string]any)
		key, _ := m["route"].(string)
		if routeNamed(key, name) {
			return m, nil
		}
		keys = append(keys, key)
	}
	return nil, fmt.Errorf("routeSelection gives no reason for route %q; it names %q", name, keys)
}

// routeNamed tells whether a route key is the route's: standalone keys
// end in /<name>, cluster keys read <ns>/<name>.<rule><match>.http.
func routeNamed(key, name string) bool {
	return strings.HasSuffix(key, "/"+name) || strings.Contains(key, "/"+name+".")
}

func (s *state) routeSelected(_ context.Context, name string) error {
	r, err := s.routeReason(name)
	if err != nil {
		return err
	}
	if r["result"] != "selected" {
		return fmt.Errorf("route %q: result %v (%v), want selected", name, r["result"], r["reason"])
	}
	return nil
}

func (s *state) routeNotMatched(_ context.Context, name, condition, want, got string) error {
	r, err := s.routeReason(name)
	if err != nil {
		return err
	}
	switch {
	case r["result"] != "noMatch":
		return fmt.Errorf("route %q: result %v, want noMatch", name, r["result"])
	case r["condition"] != condition:
		return fmt.Errorf("route %q did not match on %v (%v), want %s", name, r["condition"], r["reason"], condition)
	case r["want"] != want || r["got"] != got:
		return fmt.Errorf("route %q: wanting %v and getting %v, want %s and %s", name, r["want"], r["got"], want, got)
	}
	return nil
}

// policyEvent is the last `policy` event of kind.
func (s *state) policyEvent(kind string) (map[string]any, error) {
	t, err := s.currentTrace()
	if err != nil {
		return nil, err
	}
	var found map[string]any
	for _, e := range t.Events {
		if e.Type() == trace.PolicyResultType && e.Message["kind"] == kind {
			found = e.Message
		}
	}
	if found == nil {
		return nil, fmt.Errorf("the trace has no policy event of kind %s; got %s", kind, names(t.Events))
	}
	return found, nil
}

func (s *state) localLimitRefused(_ context.Context, kind string, n int, unit string) error {
	return s.localLimitEntry("refused", "refused", kind, n, unit)
}

// shadowLimitWouldRefuse: the request was allowed, and the shadow entry
// is marked as one that would have refused it (refproxy's shadow mode;
// docs/rate-limits.md).
func (s *state) shadowLimitWouldRefuse(_ context.Context, kind string, n int, unit string) error {
	return s.localLimitEntry("allowed", "wouldRefuse", kind, n, unit)
}

// localLimitEntry: the localRateLimit policy event has the decision, and
// an entry marked mark (refused, wouldRefuse) of kind, n per unit, with
// nothing left.
func (s *state) localLimitEntry(decision, mark, kind string, n int, unit string) error {
	p, err := s.policyEvent("localRateLimit")
	if err != nil {
		return err
	}
	var pr trace.PolicyResult
	trace.DecodeReason(p, &pr)
	res := pr.Result
	if res.Type != "apply" || res.Decision != decision {
		return fmt.Errorf("localRateLimit result %v, want apply and decision %s", p["result"], decision)
	}
	seconds := int(unitOf(unit) / time.Second)
	for _, e := range res.Entries {
		if marked := e.Refused && mark == "refused" || e.WouldRefuse && mark == "wouldRefuse"; !marked {
			continue
		}
		interval, _ := time.ParseDuration(e.FillInterval)
		switch {
		case e.Type != kind || e.TokensPerFill != uint64(n) || interval != time.Duration(seconds)*time.Second:
			return fmt.Errorf("the entry marked %s is %s %d per %s, want %s %d per %s", mark, e.Type, e.TokensPerFill, e.FillInterval, kind, n, unit)
		case e.Remaining != nil && *e.Remaining != 0:
			return fmt.Errorf("the entry marked %s has %d remaining, want nothing left", mark, *e.Remaining)
		}
		return nil
	}
	return fmt.Errorf("no localRateLimit entry is marked %s: %v", mark, trace.Object(p["result"])["entries"])
}

func (s *state) causeOf(_ context.Context, kind string, status int) error {
	e, err := s.event(string(trace.RequestFinished))
	if err != nil {
		return err
	}
	cause, _ := e.Message["cause"].(map[string]any)
	st, _ := e.Message["status"].(float64)
	switch {
	case cause == nil:
		return fmt.Errorf("requestFinished gives no cause (status %v)", e.Message["status"])
	case cause["kind"] != kind:
		return fmt.Errorf("requestFinished.cause.kind %v (%v), want %s", cause["kind"], cause["reason"], kind)
	case int(st) != status:
		return fmt.Errorf("requestFinished.status %v, want %d", e.Message["status"], status)
	}
	return nil
}

func (s *state) explanationReads(_ context.Context, text string) error {
	t, err := s.currentTrace()
	if err != nil {
		return err
	}
	v := explain.Events(t.Events)
	if !strings.Contains(v.Line, text) {
		return fmt.Errorf("explanation %q lacks %q", v.Line, text)
	}
	return nil
}
