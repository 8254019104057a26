@extended @trace-redacts-api-keys-and-cookies
Feature: Traces never show API keys and cookies
  Beyond what the reference redacts (trace-redacts-credentials), gwdiag's
  reference proxy keeps every credential an LLM gateway sees out of its
  traces: the session cookies a client sends and a backend sets, the
  API-key headers LLM clients send (Anthropic's x-api-key, Azure OpenAI's
  api-key, Google's x-goog-api-key), and the key the proxy itself sends an
  LLM provider, which its config dump does not show either (the
  reference's config serializer redacts the keys a config holds). The
  header stays in the snapshot; the traffic is untouched.

  Scenario: Cookies and API-key headers never appear in a trace
    Given an echo backend "httpbin"
    And a route "echo" with path prefix "/" to backend "httpbin"
    And the requests carry credentials in "Cookie", "X-Api-Key", "Api-Key" and "X-Goog-Api-Key"
    When I trace a GET request to "/headers"
    Then the response status is 200
    And no trace event holds a credential the requests carried
    And the "initial request" request snapshot shows the header "cookie" without its credential
    And the "initial request" request snapshot shows the header "x-api-key" without its credential
    And the "initial request" request snapshot shows the header "api-key" without its credential
    And the "initial request" request snapshot shows the header "x-goog-api-key" without its credential
    And the response echoes the credentials as sent

  Scenario: A backend's Set-Cookie never appears in a trace, and the client still gets it
    Given an echo backend "httpbin"
    And a route "echo" with path prefix "/" to backend "httpbin"
    And the backend answers with a cookie
    When I trace a GET request to "/get"
    Then the response status is 200
    And no trace event holds a credential the requests carried
    And the "final response" response snapshot shows the header "set-cookie" without its credential
    And the client received the cookie as the backend set it

  Scenario: The API key the proxy sends an LLM provider never appears in a trace
    Given an LLM backend "openai" called with an API key of its own
    And a route "chat" with path prefix "/" to backend "openai"
    When I trace a chat completion using 30 tokens
    Then the response status is 200
    And no trace event holds a credential the requests carried
    And the LLM backend received its API key

  Scenario: The API key the proxy sends an LLM provider never appears in its config dump
    Given an LLM backend "openai" called with an API key of its own
    And a route "chat" with path prefix "/" to backend "openai"
    When I call the admin path "/config_dump"
    Then the admin response is successful
    And the config dump mentions the route "chat"
    And the config dump holds no credential the scenario planted
