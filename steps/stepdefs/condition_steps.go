package stepdefs

import (
	"context"

	"github.com/cucumber/godog"
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
