@extended @trace-explains-outcome
Feature: The trace explains the outcome
  Spec part 6: "The trace tells why a request matched or did not match a
  route, why a policy applied or not, and why an unexpected status was
  returned." The spec names no field for these reasons, so the core scenarios
  of trace-order hold a proxy only to what its events carry (no backend call
  for a 404 or a 429, the limit in effectivePolicy, the transport error in
  backendCallResult). The reasons themselves are checked here, in the
  reference's newer event shapes as refproxy carries them (docs/admin.md):
  routeSelection.reasons (per route: selected, or the first condition that
  failed, wanted and got), a `policy` event per policy kind (result apply
  with the local[] entry that refused, or skip with why), and
  requestFinished.cause for a status the backend did not give.

  Background:
    Given an echo backend "httpbin"
    And a route "httpbin" with path prefix "/" to backend "httpbin"

  Scenario: The selected route says it matched
    When I trace a GET request to "/get"
    Then the trace says route "httpbin" was selected

  Scenario: A route not matched by its path says what it wanted
    Given a route "only-api" with path prefix "/api" to backend "httpbin" on listener "narrow"
    When I trace a GET request to "/nowhere" on listener "narrow"
    Then the traced response status is 404
    And the trace says route "only-api" did not match on "path", wanting 'prefix "/api"' and getting '/nowhere'
    And the trace gives "noRoute" as the cause of status 404
    And the explanation of the trace reads 'path "/nowhere" does not match prefix "/api"'

  Scenario: A route not matched by its method says which method it wanted
    Given a route "submit" with path prefix "/submit" and method "POST" to backend "httpbin" on listener "narrow"
    When I trace a GET request to "/submit" on listener "narrow"
    Then the traced response status is 404
    And the trace says route "submit" did not match on "method", wanting 'POST' and getting 'GET'
    And the explanation of the trace reads 'method is GET, the route wants POST'

  Scenario: A route not matched by a header says which value it wanted
    Given a route "tenant" with path prefix "/t" and header "x-tenant" "blue" to backend "httpbin" on listener "narrow"
    When I trace a GET request to "/t" with header "x-tenant" "red" on listener "narrow"
    Then the traced response status is 404
    And the trace says route "tenant" did not match on "header", wanting 'exact "blue"' and getting 'red'

  Scenario: A 429 names the limit entry that refused it
    Given the route "httpbin" has a request limit of 1 per minute
    When I send a GET request to "/get"
    And I trace a GET request to "/get"
    Then the traced response status is 429
    And the trace says localRateLimit refused the request with its requests entry of 1 per minute, nothing left
    And the trace gives "rateLimit" as the cause of status 429
    And the explanation of the trace reads 'localRateLimit[0] (1 request per minute) exhausted'

  Scenario: A token limit names its entry once a response took its budget
    Given an LLM backend "openai"
    And a route "llm" with path prefix "/v1" to backend "openai"
    And the route "llm" has a token limit of 50 per minute
    When I send a chat completion using 60 tokens
    And I trace a chat completion using 10 tokens
    Then the traced response status is 429
    And the trace says localRateLimit refused the request with its tokens entry of 50 per minute, nothing left

  Scenario: A backend that cannot be reached is the cause of the 503
    Given a route "down" with path prefix "/" to an unreachable backend on listener "broken"
    When I trace a GET request to "/down" on listener "broken"
    Then the trace gives "backendUnreachable" as the cause of status 503

  Scenario: A body the backend cuts short is the cause of the 502
    When I trace a GET request to "/cut/1000", whatever comes back
    Then the trace gives "backendBody" as the cause of status 502
