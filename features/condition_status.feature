@condition-status
Feature: Condition status
  In a cluster, the Gateway API resources and the rate-limit policy report
  their state as conditions (spec parts 2.3, 2.4 and 3). These scenarios are
  the cluster profile: targets that run a standalone proxy skip them. The
  spec names the condition types only; the reasons the reference controller
  gives are an extended feature.

  Background:
    Given an echo backend "httpbin"
    And a route "httpbin" with path prefix "/" to backend "httpbin"

  @spec-2.4 @spec-3
  Scenario: Gateway and HTTPRoute report healthy conditions
    When the configuration is applied
    Then the Gateway has condition "Accepted" with status "True"
    And the Gateway has condition "Programmed" with status "True"
    And the HTTPRoute "httpbin" has condition "Accepted" with status "True"
    And the HTTPRoute "httpbin" has condition "ResolvedRefs" with status "True"

  @spec-2.3 @spec-3
  Scenario: A valid policy is accepted and attached
    Given the route "httpbin" has a request limit of 3 per second with burst 3
    When the configuration is applied
    Then the policy of route "httpbin" has condition "Accepted" with status "True"
    And the policy of route "httpbin" has condition "Attached" with status "True"

  @spec-2.3 @spec-3
  Scenario: A policy targeting a missing route is not attached
    Given a rate-limit policy "orphan" targets the HTTPRoute "missing"
    When the configuration is applied
    Then the policy "orphan" has condition "Attached" with status "False"

  @spec-2.3 @spec-3 @spec-8.2
  Scenario: A policy on the Gateway is accepted and attached
    Given the gateway of listener "default" has a request limit of 10 per minute
    When the configuration is applied
    Then the policy "gateway-default" has condition "Accepted" with status "True"
    And the policy "gateway-default" has condition "Attached" with status "True"

  @extended @policy-condition-reasons
  Scenario: Policy conditions give the reference controller's reasons
    Given the route "httpbin" has a request limit of 3 per second with burst 3
    And a rate-limit policy "orphan" targets the HTTPRoute "missing"
    When the configuration is applied
    Then the policy of route "httpbin" has condition "Accepted" with status "True" and reason "Valid"
    And the policy of route "httpbin" has condition "Attached" with status "True" and reason "Attached"
    And the policy "orphan" has condition "Attached" with status "False" and reason "Pending"
