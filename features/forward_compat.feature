@forward-compat
Feature: Forward compatibility of the trace checks
  The suite validates real proxies of several versions. Unknown event types,
  unknown fields and a phase on policySelection never fail a proxy. Newer
  versions emit one policySelection per phase, the gateway phase before
  routeSelection; the ordering rule applies to the events the spec names, with
  the route-phase (or phase-less) policySelection after routeSelection.

  @spec-3 @spec-9.2
  Scenario: A 1.2 standalone trace without the middle snapshots passes
    Given the recorded trace:
      """
      {"eventStart":null,"eventEnd":3,"severity":"info","message":{"type":"requestStarted"}}
      {"eventStart":null,"eventEnd":15,"severity":"info","message":{"type":"requestSnapshot","stage":"initial request","requestState":{"request":{"method":"GET","uri":"http://localhost:3000/get","path":"/get","pathAndQuery":"/get","host":"localhost:3000","scheme":"http","version":"HTTP/1.1","headers":{"user-agent":"curl/8.5.0"},"startTime":"2025-06-01T10:00:00.000000Z"},"source":{"address":"127.0.0.1","port":51234,"rawAddress":"127.0.0.1","rawPort":51234}}}}
      {"eventStart":null,"eventEnd":40,"severity":"info","message":{"type":"routeSelection","selectedRoute":"default/default/bind/3000/listener0/default/httpbin","evaluatedRoutes":["default/default/bind/3000/listener0/default/httpbin"]}}
      {"eventStart":null,"eventEnd":52,"severity":"info","message":{"type":"policySelection","effectivePolicy":{"localRateLimit":null,"cors":null}}}
      {"eventStart":null,"eventEnd":60,"severity":"info","message":{"type":"backendCallStart","target":"127.0.0.1:8000"}}
      {"eventStart":61,"eventEnd":900,"severity":"success","message":{"type":"backendCallResult","status":200,"error":null}}
      {"eventStart":null,"eventEnd":930,"severity":"info","message":{"type":"responseSnapshot","stage":"final response","requestState":{"response":{"code":200,"headers":{"content-type":"application/json"}}}}}
      {"eventStart":null,"eventEnd":940,"severity":"success","message":{"type":"requestFinished"}}
      """
    Then the trace checks pass

  @spec-3 @spec-9.2
  Scenario: A 1.3 trace with phases, body snapshots, a raw response stage and IPv6 passes
    Given the recorded trace:
      """
      {"eventStart":null,"eventEnd":2,"severity":"info","message":{"type":"requestStarted"}}
      {"eventStart":null,"eventEnd":9,"severity":"info","message":{"type":"requestSnapshot","stage":"initial request","requestState":{"request":{"method":"POST","uri":"http://[::1]:3000/v1/chat/completions","path":"/v1/chat/completions","pathAndQuery":"/v1/chat/completions","host":"[::1]:3000","scheme":"http","version":"HTTP/1.1","headers":{},"startTime":"2026-01-10T08:00:00Z"},"source":{"address":"::1","port":40000,"rawAddress":"::1","rawPort":40000},"env":{}}}}
      {"eventStart":null,"eventEnd":10,"severity":"info","message":{"type":"bodySnapshot","stage":"initial request","body":"eyJtb2RlbCI6ImdwdCJ9"}}
      {"eventStart":null,"eventEnd":12,"severity":"info","message":{"type":"policySelection","phase":"gateway","effectivePolicy":{"localRateLimit":null}}}
      {"eventStart":null,"eventEnd":20,"severity":"info","message":{"type":"routeSelection","selectedRoute":"default/default/bind/3000/listener0/default/llm","evaluatedRoutes":["default/default/bind/3000/listener0/default/llm"]}}
      {"eventStart":null,"eventEnd":22,"severity":"info","message":{"type":"policySelection","phase":"route","effectivePolicy":{"localRateLimit":[{"maxTokens":100}]}}}
      {"eventStart":null,"eventEnd":23,"severity":"info","message":{"type":"cel","expression":"true","result":true}}
      {"eventStart":null,"eventEnd":24,"severity":"info","message":{"type":"requestSnapshot","stage":"route policies","requestState":{"request":{"method":"POST","uri":"http://[::1]:3000/v1/chat/completions","path":"/v1/chat/completions","pathAndQuery":"/v1/chat/completions","host":"[::1]:3000","scheme":"http","version":"HTTP/1.1","headers":{},"startTime":"2026-01-10T08:00:00Z"},"source":{"address":"::1","port":40000,"rawAddress":"::1","rawPort":40000},"env":{}}}}
      {"eventStart":null,"eventEnd":25,"severity":"info","message":{"type":"policySelection","phase":"backend","effectivePolicy":{}}}
      {"eventStart":null,"eventEnd":30,"severity":"info","message":{"type":"backendCallStart","target":"[::1]:8001"}}
      {"eventStart":31,"eventEnd":800,"severity":"success","message":{"type":"backendCallResult","status":200,"error":null,"retry":0}}
      {"eventStart":null,"eventEnd":801,"severity":"info","message":{"type":"responseSnapshot","stage":"raw response","requestState":{"response":{"code":200,"headers":{}},"proxy":{"requestProcessingDuration":"30us","upstreamDuration":"769us"},"env":{}}}}
      {"eventStart":null,"eventEnd":802,"severity":"info","message":{"type":"policy","name":"rate-limit","decision":"allow"}}
      {"eventStart":null,"eventEnd":810,"severity":"info","message":{"type":"responseSnapshot","stage":"final response","requestState":{"response":{"code":200,"headers":{}},"env":{}}}}
      {"eventStart":null,"eventEnd":811,"severity":"success","message":{"type":"requestFinished","futureField":{"a":1}}}
      """
    Then the trace checks pass

  @spec-2.1 @spec-3
  Scenario: A full 12-event cluster trace passes
    Given the recorded trace:
      """
      {"eventStart":null,"eventEnd":1,"severity":"info","message":{"type":"requestStarted"}}
      {"eventStart":null,"eventEnd":2,"severity":"info","message":{"type":"requestSnapshot","stage":"initial request","requestState":{"request":{"method":"GET","uri":"http://www.example.com/get","path":"/get","pathAndQuery":"/get","host":"www.example.com","scheme":"http","version":"HTTP/1.1","headers":{},"startTime":"2025-06-01T10:00:00Z"},"source":{"address":"10.244.0.1","port":40000,"rawAddress":"10.244.0.1","rawPort":40000},"env":{"podName":"gw-7d9f","namespace":"default","gateway":"gw"}}}}
      {"eventStart":null,"eventEnd":3,"severity":"info","message":{"type":"requestSnapshot","stage":"gateway policies","requestState":{"env":{"podName":"gw-7d9f","namespace":"default","gateway":"gw"}}}}
      {"eventStart":null,"eventEnd":4,"severity":"info","message":{"type":"routeSelection","selectedRoute":"httpbin/httpbin.00.http","evaluatedRoutes":["httpbin/httpbin.00.http"]}}
      {"eventStart":null,"eventEnd":5,"severity":"info","message":{"type":"policySelection","effectivePolicy":{"localRateLimit":null}}}
      {"eventStart":null,"eventEnd":6,"severity":"info","message":{"type":"requestSnapshot","stage":"route policies","requestState":{"env":{"podName":"gw-7d9f","namespace":"default","gateway":"gw"}}}}
      {"eventStart":null,"eventEnd":7,"severity":"info","message":{"type":"requestSnapshot","stage":"final request","requestState":{"backend":{"name":"httpbin.httpbin.svc.cluster.local:8000","type":"service","protocol":"http"},"env":{"podName":"gw-7d9f","namespace":"default","gateway":"gw"}}}}
      {"eventStart":null,"eventEnd":8,"severity":"info","message":{"type":"backendCallStart","target":"10.244.0.7:8080"}}
      {"eventStart":8,"eventEnd":90,"severity":"success","message":{"type":"backendCallResult","status":200,"error":null}}
      {"eventStart":null,"eventEnd":91,"severity":"info","message":{"type":"responseSnapshot","stage":"backend response ready","requestState":{"response":{"code":200,"headers":{}},"env":{"podName":"gw-7d9f","namespace":"default","gateway":"gw"}}}}
      {"eventStart":null,"eventEnd":92,"severity":"info","message":{"type":"responseSnapshot","stage":"final response","requestState":{"response":{"code":200,"headers":{}},"env":{"podName":"gw-7d9f","namespace":"default","gateway":"gw"}}}}
      {"eventStart":null,"eventEnd":93,"severity":"info","message":{"type":"requestFinished"}}
      """
    Then the trace checks pass

  @spec-2.1 @spec-3 @spec-6
  Scenario Outline: The checks still catch real faults among unknown events
    Given the recorded trace:
      """
      <trace>
      """
    Then the trace checks fail with "<reason>"

    Examples:
      | reason                          | trace |
      | routeSelection out of order     | {"eventStart":null,"eventEnd":1,"severity":"info","message":{"type":"requestStarted"}}\n{"eventStart":null,"eventEnd":2,"severity":"info","message":{"type":"policySelection","effectivePolicy":{}}}\n{"eventStart":null,"eventEnd":3,"severity":"info","message":{"type":"routeSelection","selectedRoute":"r","evaluatedRoutes":["r"]}}\n{"eventStart":null,"eventEnd":4,"severity":"info","message":{"type":"responseSnapshot","stage":"final response","requestState":{"response":{"code":404,"headers":{}}}}}\n{"eventStart":null,"eventEnd":5,"severity":"info","message":{"type":"requestFinished"}} |
      | eventEnd decreases              | {"eventStart":null,"eventEnd":5,"severity":"info","message":{"type":"requestStarted"}}\n{"eventStart":null,"eventEnd":6,"severity":"info","message":{"type":"futureThing"}}\n{"eventStart":null,"eventEnd":4,"severity":"info","message":{"type":"routeSelection","selectedRoute":"r","evaluatedRoutes":["r"]}}\n{"eventStart":null,"eventEnd":7,"severity":"info","message":{"type":"policySelection","effectivePolicy":{}}}\n{"eventStart":null,"eventEnd":8,"severity":"info","message":{"type":"responseSnapshot","stage":"final response","requestState":{"response":{"code":404,"headers":{}}}}}\n{"eventStart":null,"eventEnd":9,"severity":"info","message":{"type":"requestFinished"}} |
      | missing requestFinished         | {"eventStart":null,"eventEnd":1,"severity":"info","message":{"type":"requestStarted"}}\n{"eventStart":null,"eventEnd":2,"severity":"info","message":{"type":"routeSelection","selectedRoute":"r","evaluatedRoutes":["r"]}}\n{"eventStart":null,"eventEnd":3,"severity":"info","message":{"type":"policySelection","phase":"route","effectivePolicy":{}}}\n{"eventStart":null,"eventEnd":4,"severity":"info","message":{"type":"responseSnapshot","stage":"final response","requestState":{"response":{"code":404,"headers":{}}}}} |
      | eventStart on a point event     | {"eventStart":null,"eventEnd":1,"severity":"info","message":{"type":"requestStarted"}}\n{"eventStart":1,"eventEnd":2,"severity":"info","message":{"type":"routeSelection","selectedRoute":"r","evaluatedRoutes":["r"]}}\n{"eventStart":null,"eventEnd":3,"severity":"info","message":{"type":"policySelection","effectivePolicy":{}}}\n{"eventStart":null,"eventEnd":4,"severity":"info","message":{"type":"responseSnapshot","stage":"final response","requestState":{"response":{"code":404,"headers":{}}}}}\n{"eventStart":null,"eventEnd":5,"severity":"info","message":{"type":"requestFinished"}} |
      | more than one request           | {"eventStart":null,"eventEnd":1,"severity":"info","message":{"type":"requestStarted"}}\n{"eventStart":null,"eventEnd":2,"severity":"info","message":{"type":"routeSelection","selectedRoute":"r","evaluatedRoutes":["r"]}}\n{"eventStart":null,"eventEnd":3,"severity":"info","message":{"type":"policySelection","effectivePolicy":{}}}\n{"eventStart":null,"eventEnd":4,"severity":"info","message":{"type":"responseSnapshot","stage":"final response","requestState":{"response":{"code":404,"headers":{}}}}}\n{"eventStart":null,"eventEnd":5,"severity":"info","message":{"type":"requestFinished"}}\n{"eventStart":null,"eventEnd":6,"severity":"info","message":{"type":"requestStarted"}}\n{"eventStart":null,"eventEnd":7,"severity":"info","message":{"type":"requestFinished"}} |
