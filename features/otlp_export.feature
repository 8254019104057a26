@extended @otlp-export
Feature: The proxy's OpenTelemetry spans agree with its trace
  Operators of a proxy in production look at its requests in an OpenTelemetry
  backend; the debug trace is the other record of the same request, and
  nobody compares the two. The spec is silent on telemetry. The reference
  exports one span per request when its config sets config.tracing (its
  tracker asks for child spans per stage, 3060); refproxy exports the tree
  docs/otlp.md describes: the request span, the route selection, one span per
  policy that ran, one client span per backend call, and a traceparent to the
  backend naming its call span. The suite runs a collector of its own, tells
  the proxy to export every request to it (config.tracing, randomSampling
  true), and holds the spans it receives to the request's /debug/trace.

  Background:
    Given an echo backend "httpbin"
    And a route "httpbin" with path prefix "/" to backend "httpbin"
    And the proxy exports OpenTelemetry spans of every request to the suite's collector

  Scenario: A forwarded request's spans agree with its trace
    When I trace a GET request to "/get"
    Then the collector receives the traced request's spans
    And the spans agree with the trace on route, status and backend target
    And the spans nest in the request's span, in the trace's order

  Scenario: A refused request's span names the limit that refused it
    Given the route "httpbin" has a request limit of 1 per minute
    When I send a GET request to "/get"
    And I trace a GET request to "/get"
    Then the traced response status is 429
    And the collector receives the traced request's spans
    And the spans agree with the trace on route, status and backend target
    And the spans nest in the request's span, in the trace's order
    And the request's span names the limit entry that refused it, as the trace does

  Scenario: A client's trace goes on through the proxy to the backend
    When I trace a GET request to "/headers" in the client's trace "0af7651916cd43dd8448eb211c80319c" from span "b7ad6b7169203331"
    Then the collector receives the traced request's spans
    And the request's span continues the client's trace "0af7651916cd43dd8448eb211c80319c" from span "b7ad6b7169203331"
    And the backend received a traceparent naming the backend call's span

  Scenario: A chat completion's span carries the tokens its trace charged
    Given an LLM backend "openai"
    And a route "llm" with path prefix "/v1" to backend "openai"
    And the route "llm" has a token limit of 1000 per minute
    When I trace a chat completion using 30 tokens
    Then the collector receives the traced request's spans
    And the spans agree with the trace on route, status and backend target
    And the request's span carries the tokens the trace says the response charged
