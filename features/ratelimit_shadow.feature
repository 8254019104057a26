@extended @ratelimit-shadow
Feature: Shadow limits
  An operator rolls a limit out without enforcing it: in shadow mode it is
  evaluated and counted like any limit, never refuses, and the trace says which
  requests it would have refused, naming the entry (Envoy's local rate limit
  has such a mode; the Gateway API's rate-limiting proposal discusses it). Its
  rate-limit headers are written only when asked. Neither the spec nor the
  reference has it: refproxy's config writes it `shadow: true` (and
  `shadowHeaders: true`) on a localRateLimit entry.

  Background:
    Given an echo backend "httpbin"
    And a route "httpbin" with path prefix "/" to backend "httpbin"

  Scenario: A shadow limit never refuses, and the trace names the requests it would have refused
    Given the route "httpbin" has a request limit of 2 per minute in shadow mode
    When I send 3 GET requests to "/get"
    And I trace a GET request to "/get"
    Then the responses have statuses 200, 200, 200, 200
    And the traced response status is 200
    And the backend "httpbin" received 4 requests
    And the trace says localRateLimit let the request through, its shadow requests entry of 2 per minute having nothing left

  Scenario: A shadow limit is counted, and shows its count in the headers when asked
    Given the route "httpbin" has a request limit of 2 per minute in shadow mode that writes its headers
    When I send 3 GET requests to "/get"
    Then the responses have statuses 200, 200, 200
    And response 1 has the rate-limit headers limit 2, remaining 1, reset 0 to 60 seconds
    And response 3 has the rate-limit headers limit 2, remaining 0, reset 0 to 60 seconds
    And response 3 has no header "retry-after"

  Scenario: A shadow limit beside an enforced one leaves the refusing to it
    Given the route "httpbin" has a request limit of 1 per minute in shadow mode
    And the route "httpbin" has a request limit of 3 per minute
    When I send 4 GET requests to "/get"
    Then the responses have statuses 200, 200, 200, 429
    And response 2 has the rate-limit headers limit 3, remaining 1, reset 0 to 60 seconds
