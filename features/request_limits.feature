@request-limits
Feature: Request limits, burst and rate-limit headers
  A local request limit admits base + burst requests in a window; the next
  gets 429 with the body "rate limit exceeded" and is not forwarded. On a 429
  the x-ratelimit-* headers tell the ceiling (base + burst), what is left and
  when the window resets; a route without a policy carries none of them.
  Headers on allowed responses, the 429's content type and a limit on a whole
  gateway of a standalone proxy are extended features.

  Background:
    Given an echo backend "httpbin"
    And a route "httpbin" with path prefix "/" to backend "httpbin"

  @spec-2.3 @spec-4 @spec-8
  Scenario: Burst adds to the base limit and refused requests are not forwarded
    Given the route "httpbin" has a request limit of 3 per minute with burst 3
    When I send 7 GET requests to "/get"
    Then the responses have statuses 200, 200, 200, 200, 200, 200, 429
    And the backend "httpbin" received 6 requests

  @spec-4 @spec-7
  Scenario: The 429 response carries the spec body and headers
    Given the route "httpbin" has a request limit of 2 per minute with burst 1
    When I send 4 GET requests to "/get"
    Then the responses have statuses 200, 200, 200, 429
    And the response status is 429
    And the response body is "rate limit exceeded"
    And the response header "x-ratelimit-limit" is "3"
    And the response header "x-ratelimit-remaining" is "0"
    And the response header "x-ratelimit-reset" is a number of seconds at most 60
    And the response has no header "x-<proxy>-ratelimited"
    And the backend "httpbin" received 3 requests

  @spec-3
  Scenario: The window resets with no manual action
    Given the route "httpbin" has a request limit of 1 per second
    When I send 2 GET requests to "/get"
    Then the responses have statuses 200, 429
    And within 3 seconds a GET request to "/get" succeeds

  @spec-7
  Scenario: No rate-limit headers without a policy
    When I send a GET request to "/get"
    Then the response status is 200
    And the response has no header "x-ratelimit-limit"
    And the response has no header "x-ratelimit-remaining"
    And the response has no header "x-ratelimit-reset"

  @extended @ratelimit-response-format
  Scenario: A 429 is plain text and its reset is whole seconds
    Given the route "httpbin" has a request limit of 2 per minute with burst 1
    When I send 4 GET requests to "/get"
    Then the response status is 429
    And the response header "content-type" starts with "text/plain"
    And the response header "x-ratelimit-reset" is a whole number of seconds at most 60

  @extended @gateway-rate-limit
  Scenario: A gateway-wide limit caps every route of the gateway together
    Given a route "alpha" with path prefix "/alpha" to backend "httpbin" on listener "shared"
    And a route "beta" with path prefix "/beta" to backend "httpbin" on listener "shared"
    And the gateway of listener "shared" has a request limit of 3 per minute
    When I send 2 GET requests to "/alpha" on listener "shared"
    And I send 2 GET requests to "/beta" on listener "shared"
    Then the responses have statuses 200, 200, 200, 429
    And the response body is "rate limit exceeded"
    When I send a GET request to "/get"
    Then the response status is 200
    And the backend "httpbin" received 4 requests

  @extended @ratelimit-headers-on-success
  Scenario: Allowed responses carry the rate-limit headers
    Given the route "httpbin" has a request limit of 3 per minute with burst 1
    When I send 2 GET requests to "/get"
    Then the responses have statuses 200, 200
    And response 1 has the rate-limit headers limit 4, remaining 3, reset 0 to 60 seconds
    And response 2 has the rate-limit headers limit 4, remaining 2, reset 0 to 60 seconds

  @extended @ratelimit-per-key
  Scenario: A keyed limit gives each client its own bucket, and requests without a key share one
    Given the route "httpbin" has a request limit of 2 per minute keyed by header "x-api-key"
    When I send 3 GET requests to "/get" with header "x-api-key" "alice"
    And I send 1 GET request to "/get" with header "x-api-key" "bob"
    And I send 3 GET requests to "/get"
    Then the responses have statuses 200, 200, 429, 200, 200, 200, 429
    And the backend "httpbin" received 5 requests

  @extended @ratelimit-per-key
  Scenario: Long keys that differ only in their last byte get buckets of their own
    Given the route "httpbin" has a request limit of 1 per minute keyed by header "x-api-key"
    When I send 2 GET requests to "/get" with header "x-api-key" "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkka"
    And I send 1 GET request to "/get" with header "x-api-key" "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkb"
    Then the responses have statuses 200, 429, 200

  @extended @ratelimit-denying-headers
  Scenario: A 429 carries the headers of the limit that refused it
    Given the route "httpbin" has a request limit of 10 per minute
    And the route "httpbin" has a request limit of 2 per hour
    When I send 3 GET requests to "/get"
    Then the responses have statuses 200, 200, 429
    And the response has the rate-limit headers limit 2, remaining 0, reset 61 to 3600 seconds

  @extended @ratelimit-retry-after
  Scenario: A 429 says when to retry in Retry-After, as x-ratelimit-reset does
    Given the route "httpbin" has a request limit of 1 per minute
    When I send 2 GET requests to "/get"
    Then the responses have statuses 200, 429
    And response 1 has no header "retry-after"
    And the response header "retry-after" is a whole number of seconds at most 60
    And the response header "retry-after" equals the response header "x-ratelimit-reset"
