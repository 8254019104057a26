package features

// SpecPart is one part of the specification a core scenario enforces,
// named by its tag: @spec-<ID>. IDs follow the spec's numbering: a section
// ("4"), a subsection ("2.1"), or a numbered item or rule of a section
// ("1.3": part 1, item 3; "7.2": part 7, token-limit timing rule 2).
type SpecPart struct {
	ID    string
	Title string
	// Quotes are the sentences of the spec the scenarios rest on, verbatim
	// (a test checks each against the spec text).
	Quotes []string
}

// SpecParts are every part a scenario may name. A core scenario names at
// least one; features/README.md lists them with the scenarios.
var SpecParts = []SpecPart{
	{ID: "1.3", Title: "Tracing", Quotes: []string{
		"the admin endpoint `/debug/trace` streams a step-by-step record of how the proxy handled the NEXT request it receives. The record shows the matched route, the applied policies, the chosen backend and the response status.",
	}},
	{ID: "1.4", Title: "Trace client, inject mode", Quotes: []string{
		"The host part of `<url>` sets the Host header only and is never used for name resolution.",
	}},
	{ID: "2.1", Title: "Trace event", Quotes: []string{
		"null for point events; set on `backendCallResult` (start of the call).",
		"Monotonically increasing across one trace.",
		"| backendCallResult | `status` (integer HTTP status), `error` (null, or the transport error) |",
		"| backendCallStart | `target` (string, host:port of the upstream endpoint) |",
		"(each null when no such policy applies; otherwise the merged policy for the matched route)",
		"| request.startTime | string | ISO 8601 UTC timestamp. |",
		"responseSnapshot `requestState`: `response.code` (integer status), `response.headers` (object)",
		"| env | object | Cluster mode: `podName`, `namespace`, `gateway` (strings) on every snapshot. |",
		"and `env` as above.",
	}},
	{ID: "2.2", Title: "Standalone config and config dump", Quotes: []string{
		"Full structure of the config dump: not shown beyond the categories it contains (binds, listeners, routes, backends, workloads, services, policies).",
	}},
	{ID: "2.3", Title: "Rate-limit policy resource", Quotes: []string{
		"| local[].burst | integer | no | Extra requests allowed above the base limit (shown on a requests entry). |",
		"Status: `status.ancestors[].conditions[]`, each with `type`, `status` and `message`. Condition types shown: `Accepted`, `Attached`.",
	}},
	{ID: "2.4", Title: "Gateway API resources checked for diagnosis", Quotes: []string{
		"| Resource | Conditions that indicate health |",
		"| Gateway | `Accepted`, `Programmed` |",
		"| HTTPRoute | `Accepted`, `ResolvedRefs` |",
	}},
	{ID: "3", Title: "States and transitions", Quotes: []string{
		"Rate-limit window: budget available, budget exhausted (429 returned), restored after the window resets with no manual action.",
		"Order of trace events for one request (fixed sequence)",
		"a tester must not require all twelve events.",
	}},
	{ID: "4", Title: "Endpoints", Quotes: []string{
		"| /config_dump | method: not shown | none | JSON of the runtime configuration: binds, listeners, routes, backends, workloads, services, policies. |",
		"| /debug/trace | method: not shown | none | JSON-over-SSE stream of the trace of the next request (events as in part 2.1). |",
		"| /logging | GET gets the level; POST sets it |",
		"Plain text of the form: current log level is <filter list>.",
		"| /debug/pprof/profile | method: not shown | query `seconds=<N>` (integer 1 to 300, default 10) | CPU profile in profiler format. |",
		"| /quitquitquit | method: not shown | none | Triggers a graceful shutdown. |",
		"Data-plane behavior tied to the policy: a request that exceeds an active limit receives HTTP 429 and is not forwarded to the backend.",
	}},
	{ID: "6", Title: "Events", Quotes: []string{
		"a trace covers exactly one request, the next one that arrives (watch mode) or the one the client injects.",
		"The trace tells why a request matched or did not match a route, why a policy applied or not, and why an unexpected status was returned.",
	}},
	{ID: "7", Title: "Errors and rate-limit headers", Quotes: []string{
		"HTTP 429; the request is not forwarded to the backend. The shown body text is: rate limit exceeded.",
		"Reported in the `error` field of the backendCallResult trace event (it is null on success).",
		"| x-ratelimit-limit | Ceiling for the request. Local: base limit plus burst.",
		"| x-ratelimit-remaining | Requests (or tokens for LLM limits) left in the current window. | the proxy |",
		"| x-ratelimit-reset | Seconds until the window resets. | the proxy |",
		"Present only on 429 responses with global limiting through a compatible external rate-limit service; absent with local limiting.",
	}},
	{ID: "7.1", Title: "Token-limit timing, rule 1", Quotes: []string{
		"The proxy reads the `usage` field of every LLM response and adds it to the budget.",
	}},
	{ID: "7.2", Title: "Token-limit timing, rule 2", Quotes: []string{
		"Counting happens after the response. The request that takes the budget over the limit succeeds; later requests get 429 until the window resets.",
	}},
	{ID: "7.3", Title: "Token-limit timing, rule 3", Quotes: []string{
		"For a streaming response, the count is taken from the final chunk's `usage` field after the stream ends; a stream is never interrupted mid-way.",
	}},
	{ID: "7.4", Title: "Token-limit timing, rule 4", Quotes: []string{
		"When several `local[]` entries apply, all are evaluated independently and a request must pass all of them.",
	}},
	{ID: "8", Title: "Limits", Quotes: []string{
		"| Local request limit | `requests` per `unit` (Seconds, Minutes, Hours), plus optional `burst` | Route or gateway targeted by the policy |",
		"| CPU profile duration | 1 to 300 seconds, default 10 | /debug/pprof/profile `seconds` |",
	}},
	{ID: "8.2", Title: "Limits, rule 2", Quotes: []string{
		"A policy targeting a Gateway caps total consumption across all its routes; one targeting an HTTPRoute caps that route.",
	}},
	{ID: "9.2", Title: "Versioning, rule 2", Quotes: []string{
		"Tracing and the trace client are experimental and subject to change.",
	}},
}

// Spec returns the part of that ID.
func Spec(id string) (SpecPart, bool) {
	for _, p := range SpecParts {
		if p.ID == id {
			return p, true
		}
	}
	return SpecPart{}, false
}
