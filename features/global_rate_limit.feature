@extended @global-rate-limit
Feature: Global rate limits
  Limits can be global (spec parts 1.5 and 8.3): an external rate-limit
  service keeps the counters and shares them across replicas; it is
  configured with descriptors. The suite runs an Envoy-compatible service
  (github.com/envoyproxy/ratelimit on Redis) unless --ratelimit-service names
  one, and configures the proxy in the reference's format: remoteRateLimit
  with one descriptor per limit, keyed by the scenario, carrying its limit as
  a limitOverride; a limit keyed by a client header adds the header's value
  to its descriptor, so the service counts each client on its own. With several replicas, the requests of a scenario go to
  each replica in turn, and a backend's count is the sum over them. The
  window form of x-ratelimit-limit, the failure behaviour and 500 are the
  reference's; the spec does not fix them.

  Background:
    Given an echo backend "echo"
    And a route "echo" with path prefix "/get" to backend "echo"
    And an LLM backend "openai"
    And a route "llm" with path prefix "/v1" to backend "openai"

  Scenario: Two replicas share one global request budget
    Given a global rate-limit service
    And the route "echo" has a global request limit of 5 per day
    And the proxy runs as 2 replicas
    When I send 8 GET requests to "/get"
    Then the responses have statuses 200, 200, 200, 200, 200, 429, 429, 429
    And the backend "echo" received 5 requests

  Scenario: Two replicas share one global token budget
    Given a global rate-limit service
    And the route "llm" has a global token limit of 100 per day
    And the proxy runs as 2 replicas
    When I send 5 chat completions using 39 tokens each
    Then the responses have statuses 200, 200, 200, 429, 429
    And the backend "openai" received 3 requests

  Scenario: A response's tokens reach the service with their descriptor, a stream's after its last chunk
    Given a global rate-limit service of the scenario's own
    And the route "llm" has a global token limit of 1000 per day
    When I send a chat completion using 39 tokens
    Then within 5 seconds the rate-limit service has counted 39 for the route "llm"
    When I send a streaming chat completion using 60 tokens that asks for usage
    Then the stream was delivered whole with its usage chunk
    And within 5 seconds the rate-limit service has counted 99 for the route "llm"

  Scenario: A global limit keyed by a client header gives each client its own budget
    Given a global rate-limit service
    And the route "echo" has a global request limit of 2 per day keyed by header "x-api-key"
    And the proxy runs as 2 replicas
    When I send 3 GET requests to "/get" with header "x-api-key" "alice"
    And I send 3 GET requests to "/get" with header "x-api-key" "bob"
    Then the responses have statuses 200, 200, 429, 200, 200, 429
    And the backend "echo" received 4 requests

  Scenario: A global 429 carries the windowed limit and the service's mark
    Given a global rate-limit service
    And the route "echo" has a global request limit of 2 per day
    When I send 3 GET requests to "/get"
    Then the responses have statuses 200, 200, 429
    And the response body is "rate limit exceeded"
    And the response header "x-ratelimit-limit" is "2, 2;w=86400"
    And the response header "x-ratelimit-remaining" is "0"
    And the response header "x-ratelimit-reset" is the seconds until the rate-limit service's day window ends
    And the response header "Retry-After" is the seconds until the rate-limit service's day window ends
    And the response header "x-envoy-ratelimited" is "true"

  Scenario: Where several global limits refuse, the 429 tells the latest reset
    # The service counts both limits in windows aligned with the clock. The
    # third request is refused by the day's limit, and by the second's too
    # unless a second ended between the requests; it passes only when every
    # limit that refused it has reset: the reference's Retry-After for a
    # remote denial is the longest reset of the descriptors that denied
    # (its PR 3386), and the 429's headers describe that one. (A second's
    # window, not an hour's: an hour's ends with the day's in the last hour
    # of each day, and a proxy that gave the shorter would pass then.)
    Given a global rate-limit service
    And the route "echo" has a global request limit of 2 per second
    And the route "echo" has a global request limit of 2 per day
    When I send 3 GET requests to "/get"
    Then the responses have statuses 200, 200, 429
    And the response header "Retry-After" is the seconds until the rate-limit service's day window ends
    And the response header "x-ratelimit-reset" is the seconds until the rate-limit service's day window ends
    And the response header "x-ratelimit-limit" is "2, 2;w=1, 2;w=86400"
    And the backend "echo" received 2 requests

  Scenario: An admitted request and a local 429 carry no x-envoy-ratelimited
    Given a global rate-limit service
    And the route "echo" has a global request limit of 5 per day
    And the route "echo" has a request limit of 1 per minute
    When I send a GET request to "/get"
    Then the response status is 200
    And the response has no header "x-envoy-ratelimited"
    When I send a GET request to "/get"
    Then the response status is 429
    And the response has no header "x-envoy-ratelimited"

  Scenario: Without its service, a global limit refuses requests, and recovers
    Given a global rate-limit service of the scenario's own
    And the route "echo" has a global request limit of 2 per day
    When I send a GET request to "/get"
    And the rate-limit service goes away
    And I send a GET request to "/get"
    Then the responses have statuses 200, 500
    And the backend "echo" received 1 request
    When the rate-limit service comes back
    Then within 10 seconds a GET request to "/get" succeeds
    When I send a GET request to "/get"
    Then the response status is 429

  Scenario: Without its service, a fail-open global limit lets requests through
    Given a global rate-limit service of the scenario's own
    And the route "echo" has a global request limit of 1 per day
    And the route "echo" lets requests through when the rate-limit service is down
    When the rate-limit service goes away
    And I send 3 GET requests to "/get"
    Then the responses have statuses 200, 200, 200
    And the backend "echo" received 3 requests
