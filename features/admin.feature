@admin
Feature: Admin endpoints
  The admin server (spec part 4) answers the log level, changes it with the
  Rust log-filter syntax and refuses bad filters, bounds the CPU profile
  duration, dumps the configuration by category and shuts down on request.

  Background:
    Given an echo backend "httpbin"
    And a route "httpbin" with path prefix "/" to backend "httpbin"

  Scenario: GET /logging tells the current level
    When I GET the admin path "/logging"
    Then the admin response status is 200
    And the admin response body matches "^current log level is \S.*$"

  Scenario Outline: POST /logging sets a level filter
    When I POST the admin path "/logging?level=<filter>"
    Then the admin response status is 200
    And the admin response body matches "^current log level is .*<shown>"
    When I GET the admin path "/logging"
    Then the admin response body matches "^current log level is .*<shown>"

    Examples:
      | filter                        | shown     |
      | debug                         | debug     |
      | warn,refproxy%3A%3Atrace=info | trace=info |

  Scenario Outline: POST /logging refuses a bad filter
    When I POST the admin path "/logging?level=<filter>"
    Then the admin response status is 400

    Examples:
      | filter               |
      | info,mod=shouty      |
      | info,mod=debug=trace |

  Scenario Outline: The CPU profile duration is bounded
    When I GET the admin path "/debug/pprof/profile?seconds=<seconds>"
    Then the admin response status is 400

    Examples:
      | seconds |
      | 0       |
      | 301     |
      | ten     |

  Scenario: A one-second CPU profile is served
    When I GET the admin path "/debug/pprof/profile?seconds=1"
    Then the admin response status is 200
    And the admin response body is not empty

  Scenario: config_dump has every category and the configured route
    When I GET the admin path "/config_dump"
    Then the admin response status is 200
    And the admin response is JSON with the keys binds, routes, backends, workloads, services, policies
    And the config dump lists listeners under binds
    And the config dump mentions the route "httpbin"

  Scenario Outline: Other diagnostic endpoints answer
    When I GET the admin path "<path>"
    Then the admin response status is 200
    And the admin response body is not empty

    Examples:
      | path               |
      | /memory            |
      | /debug/pprof/heap  |
      | /debug/tasks       |

  Scenario: quitquitquit shuts the proxy down gracefully
    When I POST the admin path "/quitquitquit"
    Then the admin response status is 200
    And within 5 seconds the proxy stops accepting requests
