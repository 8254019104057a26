@extended
Feature: Rate-limit headers in the families their clients read
  Beyond the spec's x-ratelimit-*, the clients of an LLM gateway read other
  header families: the IETF draft's structured fields RateLimit-Policy and
  RateLimit (draft-ietf-httpapi-ratelimit-headers), OpenAI's
  x-ratelimit-{limit,remaining,reset}-{requests,tokens} (resets as durations
  such as "6m0s") and Anthropic's anthropic-ratelimit-{requests,tokens}-*
  (resets as RFC 3339 times). Neither the spec nor the reference implementation
  writes them: a proxy that does claims the family's feature. Each is read
  strictly, as a client parses it, and each kind of limit is described apart:
  a 429's fields say which limit refused, and a provider's own headers arrive
  intact, never made to look more permissive.

  Background:
    Given an LLM backend "openai"
    And a route "llm" with path prefix "/v1" to backend "openai"

  @ratelimit-ietf-headers
  Scenario: The IETF fields describe each kind of limit, and a 429's the limit that refused
    Given the route "llm" has a request limit of 3 per minute
    And the route "llm" has a token limit of 100 per hour
    And the route "llm" writes its rate-limit headers in the IETF format
    When I send 3 chat completions using 60 tokens each
    Then the responses have statuses 200, 200, 429
    And response 1 has the IETF request policy of 3 per 60 seconds with 2 remaining, reset 0 to 60 seconds
    And response 2 has the IETF request policy of 3 per 60 seconds with 1 remaining, reset 0 to 60 seconds
    And response 3 has the IETF request policy of 3 per 60 seconds with 1 remaining, reset 0 to 60 seconds
    And response 3 has the IETF token policy of 100 per 3600 seconds with 0 remaining, reset 3540 to 3600 seconds

  @ratelimit-ietf-headers
  Scenario: A provider's own IETF fields arrive beside the proxy's
    Given the route "llm" has a request limit of 3 per minute
    And the route "llm" writes its rate-limit headers in the IETF format
    When I send a chat completion using 10 tokens whose backend answers with the headers:
      | RateLimit-Policy | upstream;q=500;w=60 |
      | RateLimit        | upstream;r=499;t=7  |
    Then the response status is 200
    And response 1 has the IETF request policy of 500 per 60 seconds with 499 remaining, reset 7 to 7 seconds
    And response 1 has the IETF request policy of 3 per 60 seconds with 2 remaining, reset 0 to 60 seconds

  @ratelimit-openai-headers
  Scenario: OpenAI's headers describe each kind of limit, and a 429's the limit that refused
    Given the route "llm" has a request limit of 2 per minute
    And the route "llm" has a token limit of 100 per hour
    And the route "llm" writes its rate-limit headers in the OpenAI format
    When I send 3 chat completions using 10 tokens each
    Then the responses have statuses 200, 200, 429
    And response 1 has the OpenAI request headers limit 2, remaining 1, reset 0 to 60 seconds
    And response 3 has the OpenAI request headers limit 2, remaining 0, reset 0 to 60 seconds
    And response 3 has the OpenAI token headers limit 100, remaining 80, reset 3540 to 3600 seconds

  @ratelimit-openai-headers
  Scenario: A provider's stricter OpenAI headers are kept, its more permissive ones replaced
    Given the route "llm" has a request limit of 3 per minute
    And the route "llm" writes its rate-limit headers in the OpenAI format
    When I send a chat completion using 10 tokens whose backend answers with the headers:
      | x-ratelimit-limit-requests     | 500   |
      | x-ratelimit-remaining-requests | 1     |
      | x-ratelimit-reset-requests     | 120ms |
    And I send a chat completion using 10 tokens whose backend answers with the headers:
      | x-ratelimit-limit-requests     | 500   |
      | x-ratelimit-remaining-requests | 499   |
      | x-ratelimit-reset-requests     | 120ms |
    Then the responses have statuses 200, 200
    And response 1 has the OpenAI request headers limit 500, remaining 1, reset 0 to 1 seconds
    And response 2 has the OpenAI request headers limit 3, remaining 1, reset 0 to 60 seconds

  @ratelimit-anthropic-headers
  Scenario: Anthropic's headers describe each kind of limit, and a 429's the limit that refused
    Given the route "llm" has a request limit of 2 per minute
    And the route "llm" has a token limit of 100 per hour
    And the route "llm" writes its rate-limit headers in the Anthropic format
    When I send 3 chat completions using 10 tokens each
    Then the responses have statuses 200, 200, 429
    And response 1 has the Anthropic request headers limit 2, remaining 1, reset 0 to 60 seconds
    And response 3 has the Anthropic request headers limit 2, remaining 0, reset 0 to 60 seconds
    And response 3 has the Anthropic token headers limit 100, remaining 80, reset 3540 to 3600 seconds
