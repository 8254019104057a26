@extended @global-descriptor-failure
Feature: A global limit whose descriptor cannot be evaluated
  A global limit's descriptor is built from the request by expressions; one
  can fail (a limit keyed by a header the request lacks). The service is then
  not asked about that limit, and the failure mode decides as when the service
  is down: fail-closed refuses, fail-open lets the request through. The
  reference lets such a request through even when failing closed (its issue
  3523, open), so that a client escapes a keyed limit by leaving out its key;
  a proxy that fixes it claims this feature. The 500 is the reference's answer
  when its service is down.

  Background:
    Given an echo backend "echo"
    And a route "echo" with path prefix "/get" to backend "echo"

  Scenario: A descriptor that cannot be evaluated refuses the request when the limit fails closed
    Given a global rate-limit service
    And the route "echo" has a global request limit of 2 per day keyed by header "x-api-key"
    When I send 1 GET request to "/get" with header "x-api-key" "alice"
    And I send 2 GET requests to "/get"
    Then the responses have statuses 200, 500, 500
    And the backend "echo" received 1 request

  Scenario: A descriptor that cannot be evaluated lets the request through when the limit fails open
    Given a global rate-limit service
    And the route "echo" has a global request limit of 1 per day keyed by header "x-api-key"
    And the route "echo" lets requests through when the rate-limit service is down
    When I send 2 GET requests to "/get" with header "x-api-key" "alice"
    And I send 2 GET requests to "/get"
    Then the responses have statuses 200, 429, 200, 200
    And the backend "echo" received 3 requests
