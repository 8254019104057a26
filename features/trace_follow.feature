@extended @trace-follow
Feature: Trace follow mode
  The spec traces one request per watcher (part 6). The reference's newest
  version adds follow mode: one stream traces many requests, every event
  carrying its requestId. The suite asks for it the way gwdiag's reference
  proxy serves it, bounded on the proxy side:
  /debug/trace?follow=true&max=N&duration=D. A followed request the client
  sent no x-request-id for gets one, and its response carries it.

  Background:
    Given an echo backend "httpbin"
    And a route "echo" with path prefix "/" to backend "httpbin"

  Scenario: N requests give N whole traces in order, under distinct request ids
    When I follow the traces of at most 3 requests
    And I send 3 GET requests to "/get"
    Then the followed stream ends after 3 traces
    And each followed trace is one whole request that follows the spec
    And the followed traces have distinct request ids, each the x-request-id of its response, in order

  Scenario: The stream ends after max traces and later requests are not traced
    When I follow the traces of at most 2 requests
    And I send 4 GET requests to "/get"
    Then the followed stream ends after 2 traces
    And the backend "httpbin" received 4 requests
    And the response has no header "x-request-id"

  Scenario: The stream ends at its duration
    When I follow the traces of at most 10 requests for 1 second
    Then the followed stream ends within 5 seconds with 0 traces

  Scenario: Requests sent at once are kept apart by their request ids
    When I follow the traces of at most 8 requests
    And I send 8 GET requests to "/get" at once
    Then the followed stream ends after 8 traces
    And each followed trace is one whole request that follows the spec
