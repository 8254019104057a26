@trace-order
Feature: Trace ordering
  A trace covers exactly one request. The events it carries follow the fixed
  order of spec part 3; a proxy may omit the four middle snapshots, but the
  events every trace needs must be there, eventEnd never decreases, and
  eventStart is set only on timed events. The trace tells the status the
  backend answered and the status the client received, and any transport
  error. Core scenarios hold a proxy to the spec only: the severity values,
  status codes and stream headers of the reference implementation are
  extended features.

  Background:
    Given an echo backend "httpbin"
    And a route "httpbin" with path prefix "/" to backend "httpbin"

  @spec-1.3 @spec-2.1 @spec-3 @spec-4 @spec-6
  Scenario: A forwarded request traces every required event in order
    When I trace a GET request to "/get"
    Then the traced response status is 200
    And the trace has the events requestStarted, routeSelection, policySelection, backendCallStart, backendCallResult, requestFinished
    And the trace has a "final response" response snapshot with code 200
    And the trace events follow the order of the spec
    And every event has the fields of spec part 2.1
    And eventEnd never decreases
    And eventStart is set only on timed events
    And the trace stream ends after requestFinished
    And the trace stream has content type "text/event-stream"

  @spec-2.1
  Scenario: Snapshots carry the fields of spec part 2.1
    When I trace a GET request to "/anything?x=1"
    Then every request snapshot has request method, uri, path, pathAndQuery, host, scheme, version, headers and startTime
    And every request snapshot has the source address and port
    And every response snapshot has the response code and headers
    And every event has the fields of spec part 2.1
    And the "initial request" request snapshot has path "/anything" and method "GET"
    And the routeSelection selects a route among the evaluated routes
    And the policySelection carries every effectivePolicy key
    And the backendCallStart target is the backend address

  @spec-1.3 @spec-2.1 @spec-6 @spec-7
  Scenario Outline: The trace reports the status the backend answered and the client received
    When I trace a GET request to "/status/<status>"
    Then the traced response status is <status>
    And the "backendCallResult" event has status <status> and no error
    And the trace has a "final response" response snapshot with code <status>
    And the trace events follow the order of the spec

    Examples:
      | status |
      | 201    |
      | 418    |
      | 503    |

  @spec-1.4 @spec-2.1
  Scenario: Inject mode sets the Host header from the URL host only
    When I trace a GET request to "http://conformance.example.test/get"
    Then the traced response status is 200
    And the "initial request" request snapshot has host "conformance.example.test"

  @spec-1.3 @spec-6
  Scenario: Watch mode traces the next request and only it
    When I watch for the next request
    And I send GET requests to "/first" and "/second" back to back
    Then the trace covers exactly one request
    And the "initial request" request snapshot has path "/first"
    And the trace stream ends after requestFinished

  @spec-3 @spec-6
  Scenario: An unmatched route traces no backend call
    Given a route "only-api" with path prefix "/api" to backend "httpbin" on listener "narrow"
    When I trace a GET request to "/nowhere" on listener "narrow"
    Then the trace has no "backendCallStart" event
    And the trace has a "final response" response snapshot with the status the client received
    And the trace events follow the order of the spec
    And the trace stream ends after requestFinished

  @spec-2.1 @spec-4 @spec-6 @spec-7
  Scenario: A rate-limited request traces a 429 and no backend call
    Given the route "httpbin" has a request limit of 1 per minute
    When I send a GET request to "/get"
    And I trace a GET request to "/get"
    Then the traced response status is 429
    And the policySelection shows a localRateLimit policy
    And the trace has no "backendCallStart" event
    And the trace has a "final response" response snapshot with code 429
    And the trace events follow the order of the spec

  @spec-2.1 @spec-6 @spec-7
  Scenario: A backend transport error is reported in backendCallResult
    Given a route "down" with path prefix "/" to an unreachable backend on listener "broken"
    When I trace a GET request to "/down" on listener "broken"
    Then the "backendCallResult" event has a transport error
    And the trace has a "final response" response snapshot with the status the client received
    And the trace events follow the order of the spec

  @spec-2.1 @spec-6 @spec-7
  Scenario: A backend that cuts its body short is never traced as a clean success
    When I trace a GET request to "/cut/1000", whatever comes back
    Then the trace does not claim a response the client never received
    And the trace reports the transport error unless the client received the backend's status 200
    And the trace events follow the order of the spec

  @extended @trace-body-errors
  Scenario: A body cut short after the response began is reported in the trace
    When I trace a GET request to "/cut/40000", whatever comes back
    Then the trace reports the error in backendCallResult or requestFinished with severity "error"

  @extended @trace-severity
  Scenario: Severity says how each step went
    Given a route "only-api" with path prefix "/api" to backend "httpbin" on listener "narrow"
    And a route "down" with path prefix "/" to an unreachable backend on listener "broken"
    And the route "httpbin" has a request limit of 1 per minute
    When I trace a GET request to "/status/418"
    Then the "backendCallResult" event has severity "warn"
    When I trace a GET request to "/get"
    Then the traced response status is 429
    And the "requestFinished" event has severity "warn"
    When I trace a GET request to "/nowhere" on listener "narrow"
    Then the "routeSelection" event has severity "error"
    And the "requestFinished" event has severity "warn"
    When I trace a GET request to "/down" on listener "broken"
    Then the "backendCallResult" event has severity "error"
    And the "requestFinished" event has severity "error"

  @extended @proxy-status-codes
  Scenario: No matching route answers 404 and a transport error answers 5xx
    Given a route "only-api" with path prefix "/api" to backend "httpbin" on listener "narrow"
    And a route "down" with path prefix "/" to an unreachable backend on listener "broken"
    When I trace a GET request to "/nowhere" on listener "narrow"
    Then the traced response status is 404
    When I trace a GET request to "/down" on listener "broken"
    Then the traced response status is at least 500

  @extended @trace-stream-headers
  Scenario: The trace stream is not cached
    When I open a trace stream
    Then the trace stream has header "Cache-Control" "no-cache"

  @extended @trace-ready-comment
  Scenario: The trace stream opens with a ready comment
    When I open a trace stream
    Then the first frame of the trace stream is the comment "ready"
    And the trace stream has content type "text/event-stream"

  @extended @trace-cel-expression
  Scenario: A CEL expression picks the request to trace
    When I watch for the next request matching 'request.path == "/second"'
    And I send GET requests to "/first" and "/second" back to back
    Then the "initial request" request snapshot has path "/second"
    And the trace covers exactly one request

  @extended @trace-cel-expression
  Scenario: A bad CEL expression is refused
    When I open a trace stream with expression 'request.path =='
    Then the trace stream is refused with status 400 and a body containing "invalid expression"

  @extended @trace-watcher-fifo
  Scenario: Watchers are served first in, first out
    When two watchers wait for the next request
    And I send GET requests to "/first" and "/second" back to back
    Then the first watcher traces "/first" and the second traces "/second"
