package stepdefs

import (
	"context"
	"fmt"

	"github.com/cucumber/godog"

	"github.com/gwdiag/gwdiag/steps/targets"
)

func registerConditionSteps(sc *godog.ScenarioContext) {
	step(sc, `^the Gateway has condition "([^"]*)" with status "([^"]*)"$`, (*state).gatewayCondition)
	step(sc, `^the HTTPRoute "([^"]*)" has condition "([^"]*)" with status "([^"]*)"$`, (*state).httpRouteCondition)
	step(sc, `^the policy of route "([^"]*)" has condition "([^"]*)" with status "([^"]*)"$`, (*state).routePolicyCondition)
	step(sc, `^the policy "([^"]*)" has condition "([^"]*)" with status "([^"]*)"$`, (*state).policyCondition)
	step(sc, `^the policy of route "([^"]*)" has condition "([^"]*)" with status "([^"]*)" and reason "([^"]*)"$`, (*state).routePolicyConditionWithReason)
	step(sc, `^the policy "([^"]*)" has condition "([^"]*)" with status "([^"]*)" and reason "([^"]*)"$`, (*state).policyConditionWithReason)
}

func (s *state) gatewayCondition(ctx context.Context, typ, status string) error {
	return s.condition(ctx, "Gateway", "", typ, status, "")
}

func (s *state) httpRouteCondition(ctx context.Context, name, typ, status string) error {
	return s.condition(ctx, "HTTPRoute", name, typ, status, "")
}

func (s *state) routePolicyCondition(ctx context.Context, route, typ, status string) error {
	return s.condition(ctx, "Policy", route, typ, status, "")
}

func (s *state) policyCondition(ctx context.Context, name, typ, status string) error {
	return s.condition(ctx, "Policy", name, typ, status, "")
}

func (s *state) routePolicyConditionWithReason(ctx context.Context, route, typ, status, reason string) error {
	return s.condition(ctx, "Policy", route, typ, status, reason)
}

func (s *state) policyConditionWithReason(ctx context.Context, name, typ, status, reason string) error {
	return s.condition(ctx, "Policy", name, typ, status, reason)
}

func (s *state) condition(ctx context.Context, kind, name, typ, status, reason string) error {
	d, err := s.deployment(ctx)
	if err != nil {
		return err
	}
	cr, ok := d.(targets.ConditionReader)
	if !ok {
		return fmt.Errorf("the %s target has no resource conditions; condition scenarios need a cluster target", s.cfg.Target.Name())
	}
	conds, err := cr.Conditions(ctx, kind, name)
	if err != nil {
		return err
	}
	what := kind
	if name != "" {
		what += " " + name
	}
	for _, c := range conds {
		if c.Type != typ {
			continue
		}
		if c.Status != status || (reason != "" && c.Reason != reason) {
			return fmt.Errorf("%s condition %s: got status %q reason %q (%s), want status %q reason %q", what, typ, c.Status, c.Reason, c.Message, status, reason)
		}
		return nil
	}
	return fmt.Errorf("%s has no %s condition; got %+v", what, typ, conds)
}
