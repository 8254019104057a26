@admin
Feature: Admin endpoints
  The admin server (spec part 4) answers the log level and changes it with the
  Rust log-filter syntax, serves a CPU profile of a duration within its
  bounds, dumps the configuration by category and shuts down on request.
  Where the spec does not show an endpoint's method, the suite asks with GET
  and, if the proxy answers 405, with the method it allows. The status that
  refuses a bad filter or duration and the dump's exact layout are extended
  features.

  Background:
    Given an echo backend "httpbin"
    And a route "httpbin" with path prefix "/" to backend "httpbin"

  @spec-4
  Scenario: GET /logging tells the current level
    When I GET the admin path "/logging"
    Then the admin response status is 200
    And the admin response body matches "^current log level is \S.*$"

  @spec-4
  Scenario Outline: POST /logging sets a level filter
    When I POST the admin path "/logging?level=<filter>"
    Then the admin response status is 200
    And the admin response body matches "^current log level is .*<shown>"
    When I GET the admin path "/logging"
    Then the admin response body matches "^current log level is .*<shown>"

    Examples:
      | filter                        | shown      |
      | debug                         | debug      |
      | warn,refproxy%3A%3Atrace=info | trace=info |

  @spec-4 @spec-8
  Scenario: A one-second CPU profile is served
    When I call the admin path "/debug/pprof/profile?seconds=1"
    Then the admin response is successful
    And the admin response body is not empty

  @spec-2.2 @spec-4
  Scenario: config_dump has every category and the configured route
    When I call the admin path "/config_dump"
    Then the admin response is successful
    And the admin response is JSON naming the categories binds, listeners, routes, backends, workloads, services, policies
    And the config dump mentions the route "httpbin"

  @spec-4
  Scenario Outline: Other diagnostic endpoints answer
    When I call the admin path "<path>"
    Then the admin response is successful
    And the admin response body is not empty

    Examples:
      | path               |
      | /memory            |
      | /debug/pprof/heap  |
      | /debug/tasks       |

  @spec-4
  Scenario: quitquitquit shuts the proxy down gracefully
    When I call the admin path "/quitquitquit"
    Then the admin response is successful
    And within 5 seconds the proxy stops accepting requests

  @extended @admin-error-status
  Scenario Outline: POST /logging refuses a bad filter with 400
    When I POST the admin path "/logging?level=<filter>"
    Then the admin response status is 400

    Examples:
      | filter               |
      | info,mod=shouty      |
      | info,mod=debug=trace |

  @extended @admin-error-status
  Scenario Outline: A CPU profile duration out of bounds is refused with 400
    When I call the admin path "/debug/pprof/profile?seconds=<seconds>"
    Then the admin response status is 400

    Examples:
      | seconds |
      | 0       |
      | 301     |
      | ten     |

  @extended @config-dump-layout
  Scenario: config_dump keeps the categories at the top level and listeners under binds
    When I call the admin path "/config_dump"
    Then the admin response is JSON with the keys binds, routes, backends, workloads, services, policies
    And the config dump lists listeners under binds
    And the config dump lists each backend as the reference does, by variant with a name and a target
