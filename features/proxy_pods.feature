@proxy-pods
Feature: Proxy pods
  In a cluster the proxy runs in pods that the Gateway's controller deploys.
  Programmed is one of the Gateway conditions that indicate health (spec
  part 2.4): a Gateway is Programmed only once a proxy pod is ready to serve
  its traffic, never while its pods are still starting. In cluster mode every
  trace snapshot carries env with podName, namespace and gateway (spec part
  2.1), naming the pod that took the request, its namespace and its Gateway.
  These scenarios need a cluster target whose proxy runs in pods the suite
  reaches (capability data-plane); the target watches the Gateway from its
  creation and looks at its pods the moment it first reads Programmed=True.

  Background:
    Given an echo backend "httpbin"
    And a route "httpbin" with path prefix "/" to backend "httpbin"

  @spec-2.4 @spec-3
  Scenario: The Gateway is Programmed only once a proxy pod is ready
    When the configuration is applied
    Then the Gateway has condition "Programmed" with status "True"
    And the Gateway was Programmed only once its proxy could serve traffic

  @spec-2.1
  Scenario: Every snapshot names the proxy pod, its namespace and its Gateway
    When I trace a GET request to "/get"
    Then the traced response status is 200
    And every request and response snapshot has env with podName, namespace and gateway
    And the env of every snapshot names the proxy pod, its namespace and its Gateway
