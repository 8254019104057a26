@token-overage
Feature: Token overage
  Tokens are counted after the response (spec part 7): the request that takes
  the budget over the limit succeeds, later requests get 429 until the window
  resets, then succeed again. A stream is counted from its final chunk's
  usage after it ends and is never cut. The spec does not say who asks a
  streaming backend for usage: core clients ask for it themselves; a proxy
  that adds the request for usage has an extended feature.

  Background:
    Given an LLM backend "openai"
    And a route "llm" with path prefix "/v1" to backend "openai"

  @spec-3 @spec-7.1 @spec-7.2
  Scenario: The request that crosses the budget succeeds, the next one is refused
    Given the route "llm" has a token limit of 100 per second
    When I send a chat completion using 60 tokens
    And I send a chat completion using 60 tokens
    And I send a chat completion using 10 tokens
    Then the responses have statuses 200, 200, 429
    And the backend "openai" received 2 requests
    And within 3 seconds a chat completion using 10 tokens succeeds

  @spec-7.2
  Scenario: Responses of 39 tokens against a budget of 100
    Given the route "llm" has a token limit of 100 per minute
    When I send 4 chat completions using 39 tokens each
    Then the responses have statuses 200, 200, 200, 429

  @spec-7.3
  Scenario: A streaming response is counted from its final chunk and never cut
    Given the route "llm" has a token limit of 100 per second
    When I send a streaming chat completion using 120 tokens that asks for usage
    Then the response status is 200
    And the stream was delivered whole with its usage chunk
    When I send a chat completion using 10 tokens
    Then the response status is 429
    And within 3 seconds a chat completion using 10 tokens succeeds

  @spec-7.3
  Scenario: A stream is counted only when it ends
    Given the route "llm" has a token limit of 100 per minute
    When I start a streaming chat completion using 120 tokens held before its end at "slow"
    And I send a chat completion using 10 tokens
    And I release the held stream "slow" on backend "openai"
    And I send a chat completion using 10 tokens
    Then the responses have statuses 200, 429
    And the held stream "slow" was delivered whole with its usage chunk

  @spec-7.4
  Scenario: Several limit entries are all enforced: the request limit
    Given the route "llm" has a request limit of 2 per minute
    And the route "llm" has a token limit of 1000 per minute
    When I send 3 chat completions using 10 tokens each
    Then the responses have statuses 200, 200, 429

  @spec-7.4
  Scenario: Several limit entries are all enforced: the token limit
    Given the route "llm" has a request limit of 10 per minute
    And the route "llm" has a token limit of 50 per minute
    When I send 3 chat completions using 60 tokens each
    Then the responses have statuses 200, 429, 429

  @extended @llm-stream-usage-injection
  Scenario: The proxy asks a streaming backend for usage when the client did not
    Given the route "llm" has a token limit of 100 per minute
    When I send a streaming chat completion using 120 tokens that does not ask for usage
    Then the response status is 200
    And the stream was delivered whole with its usage chunk
    When I send a chat completion using 10 tokens
    Then the response status is 429

  @extended @token-remaining-after-charge
  Scenario: A completion's rate-limit headers count its own tokens
    Given the route "llm" has a token limit of 1000 per minute
    When I send 3 chat completions using 39 tokens each
    Then the responses have statuses 200, 200, 200
    And the responses have header "x-ratelimit-remaining" values 961, 922, 883

  @extended @ratelimit-openai-error
  Scenario: An LLM route can refuse with OpenAI's JSON error
    Given the route "llm" has a request limit of 1 per minute
    And the route "llm" answers refusals with OpenAI's JSON error
    When I send 2 chat completions using 10 tokens each
    Then the responses have statuses 200, 429
    And the response body is an OpenAI error of type "rate_limit_error"

  @extended @ratelimit-openai-error
  Scenario: A global limit's 429 is OpenAI's JSON error too
    Given a global rate-limit service
    And the route "llm" has a global request limit of 1 per day
    And the route "llm" answers refusals with OpenAI's JSON error
    When I send 2 chat completions using 10 tokens each
    Then the responses have statuses 200, 429
    And the response body is an OpenAI error of type "rate_limit_error"
    And the response header "x-envoy-ratelimited" is "true"

  @extended @ratelimit-anthropic-error
  Scenario: An LLM route can refuse with Anthropic's JSON error
    Given the route "llm" has a request limit of 1 per minute
    And the route "llm" answers refusals with Anthropic's JSON error
    When I send 2 chat completions using 10 tokens each
    Then the responses have statuses 200, 429
    And the response body is an Anthropic error of type "rate_limit_error"

  @extended @ratelimit-denying-headers
  Scenario: A token limit that refuses gives the 429 its headers, not the request limit's
    Given the route "llm" has a request limit of 10 per minute
    And the route "llm" has a token limit of 100 per hour
    When I send 3 chat completions using 60 tokens each
    Then the responses have statuses 200, 200, 429
    And the response has the rate-limit headers limit 100, remaining 0, reset 61 to 3600 seconds

  @extended @ratelimit-per-key
  Scenario: A keyed token limit gives each client its own token budget
    Given the route "llm" has a token limit of 100 per minute keyed by header "x-api-key"
    When I send 3 chat completions using 60 tokens each with header "x-api-key" "alice"
    And I send 1 chat completion using 60 tokens with header "x-api-key" "bob"
    Then the responses have statuses 200, 200, 429, 200
    And the backend "openai" received 3 requests
