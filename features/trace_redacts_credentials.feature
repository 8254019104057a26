@extended @trace-redacts-credentials
Feature: Traces never show credentials
  The spec says nothing of credentials (part 5: "not shown"). The reference
  marks every request's authorization and proxy-authorization sensitive,
  and each header its config.sensitiveHeaders names: "additional request
  headers whose values should be redacted from trace and debug output" (its
  published schema). A trace travels, into terminals, files, CI artifacts
  and bug reports, so no event may hold those values, whatever the event
  (a snapshot, a route's reasons, a policy's result, an error). The header
  stays, so that a reader can tell it was sent; the traffic is untouched:
  the backend receives the credentials as the client sent them. Each
  credential is made for the scenario when it runs, never written here.

  Background:
    Given an echo backend "httpbin"

  Scenario: Authorization and Proxy-Authorization never appear in a trace
    Given a route "echo" with path prefix "/" to backend "httpbin"
    And the requests carry credentials in "Authorization" and "Proxy-Authorization"
    When I trace a GET request to "/headers"
    Then the response status is 200
    And no trace event holds a credential the requests carried
    And the "initial request" request snapshot shows the header "authorization" without its credential
    And the "initial request" request snapshot shows the header "proxy-authorization" without its credential
    And the response echoes the credentials as sent

  Scenario: A header named in config.sensitiveHeaders never appears in a trace
    Given a route "echo" with path prefix "/" to backend "httpbin"
    And the config names "x-tenant-token" as a sensitive header
    And the requests carry credentials in "X-Tenant-Token"
    When I trace a GET request to "/headers"
    Then the response status is 200
    And no trace event holds a credential the requests carried
    And the "initial request" request snapshot shows the header "x-tenant-token" without its credential
    And the response echoes the credentials as sent

  Scenario: A credential a route matches on stays out of the trace when it does not match
    Given a route "admin" with path prefix "/" and header "authorization" "Bearer the-admin-token" to backend "httpbin" on listener "main"
    And the requests carry credentials in "Authorization"
    When I trace a GET request to "/headers" on listener "main"
    Then no trace event holds a credential the requests carried
