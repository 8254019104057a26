package steps

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/clusters/toolbin"
	"github.com/gwdiag/gwdiag/steps/bundle"
	"github.com/gwdiag/gwdiag/steps/targets"
	"github.com/gwdiag/gwdiag/steps/targets/container"
	"github.com/gwdiag/gwdiag/steps/targets/container/containertest"
	"github.com/gwdiag/gwdiag/steps/targets/inprocess"
	"github.com/gwdiag/gwdiag/steps/targets/process"
)

// faultCase is a fault and what the suite must say of it.
type faultCase struct {
	fault     string
	claimAll  bool
	wantFail  map[string]string // scenario -> text its message must contain ("a | b": either)
	wantUnsup map[string]string
}

// faultCases are every fault of faults with the scenarios it must fail.
var faultCases = []faultCase{
	{fault: "reordered trace events", claimAll: true, wantFail: map[string]string{
		"A forwarded request traces every required event in order":                  "routeSelection out of order",
		"A rate-limited request traces a 429 and no backend call":                   "routeSelection out of order",
		"A backend transport error is reported in backendCallResult":                "routeSelection out of order",
		"The trace reports the status the backend answered and the client received": "routeSelection out of order",
		"A backend that cuts its body short is never traced as a clean success":     "routeSelection out of order",
		"N requests give N whole traces in order, under distinct request ids":       "routeSelection out of order",
		"Requests sent at once are kept apart by their request ids":                 "routeSelection out of order",
	}},
	{fault: "trace hides the backend status", wantFail: map[string]string{
		"The trace reports the status the backend answered and the client received": "backendCallResult.status: got 200, want",
		"A backend transport error is reported in backendCallResult":                "response.code: got 200, but the client received",
		"A rate-limited request traces a 429 and no backend call":                   "response.code: got 200, want 429",
		"An unmatched route traces no backend call":                                 "response.code: got 200, but the client received 404",
		"A backend that cuts its body short is never traced as a clean success":     "the client received 502, but the final response snapshot says 200",
	}},
	{fault: "snapshot fields of the wrong type", wantFail: map[string]string{
		"A forwarded request traces every required event in order": "request.startTime is string",
		"Snapshots carry the fields of spec part 2.1":              "source.port is string",
	}, wantUnsup: map[string]string{
		"N requests give N whole traces in order, under distinct request ids": "source.port is string",
		"Requests sent at once are kept apart by their request ids":           "source.port is string",
	}},
	{fault: "trace claims a cut body succeeded", claimAll: true, wantFail: map[string]string{
		"A backend that cuts its body short is never traced as a clean success": "the client received no response",
		"A body cut short after the response began is reported in the trace":    "neither backendCallResult nor requestFinished carries an error",
	}},
	// A proxy may close a connection after any response: the suite
	// opens a new one for each request, so nothing fails.
	{fault: "connection closed after every response", claimAll: true},
	{fault: "missing burst", claimAll: true, wantFail: map[string]string{
		"Burst adds to the base limit and refused requests are not forwarded": "got [200 200 200 429 429 429 429], want [200 200 200 200 200 200 429]",
		"The 429 response carries the spec body and headers":                  "got [200 200 429 429], want [200 200 200 429]",
		"Allowed responses carry the rate-limit headers":                      `x-ratelimit-limit: got "3", want "4"`,
	}},
	{fault: "gateway limits ignored", claimAll: true, wantFail: map[string]string{
		"A gateway-wide limit caps every route of the gateway together": "got [200 200 200 200], want [200 200 200 429]",
	}},
	{fault: "forwarded 429s", claimAll: true, wantFail: map[string]string{
		"A gateway-wide limit caps every route of the gateway together":                            `backend "httpbin": got 5, want 4`,
		"Burst adds to the base limit and refused requests are not forwarded":                      `backend "httpbin": got 7, want 6`,
		"The 429 response carries the spec body and headers":                                       `backend "httpbin": got 4, want 3`,
		"The request that crosses the budget succeeds, the next one is refused":                    `backend "openai": got 3, want 2`,
		"Two replicas share one global request budget":                                             `backend "echo": got 8, want 5`,
		"Two replicas share one global token budget":                                               `backend "openai": got 5, want 3`,
		"A keyed limit gives each client its own bucket, and requests without a key share one":     `backend "httpbin": got 7, want 5`,
		"A global limit keyed by a client header gives each client its own budget":                 `backend "echo": got 6, want 4`,
		"A keyed token limit gives each client its own token budget":                               `backend "openai": got 4, want 3`,
		"A descriptor that cannot be evaluated lets the request through when the limit fails open": `backend "echo": got 4, want 3`,
		"Where several global limits refuse, the 429 tells the latest reset":                       `backend "echo": got 3, want 2`,
	}},
	{fault: "tokens counted before the response", claimAll: true, wantFail: map[string]string{
		"The request that crosses the budget succeeds, the next one is refused": "got [200 429 200], want [200 200 429]",
		"Responses of 39 tokens against a budget of 100":                        "got [200 200 429 429], want [200 200 200 429]",
		"The proxy asks a streaming backend for usage when the client did not":  "response status: got 429, want 200",
		"A streaming response is counted from its final chunk and never cut":    "response status: got 429, want 200",
		"Several limit entries are all enforced: the token limit":               "got [429 429 429], want [200 429 429]",
		"A stream is counted only when it ends":                                 "the held stream ended before it was released (status 429",
		// 60 of 100 tokens counted before the next request of 60.
		"A token limit that refuses gives the 429 its headers, not the request limit's":   "got [200 429 429], want [200 200 429]",
		"A keyed token limit gives each client its own token budget":                      "got [200 429 429 429], want [200 200 429 200]",
		"The IETF fields describe each kind of limit, and a 429's the limit that refused": "got [200 429 429], want [200 200 429]",
	}},
	{fault: "global limits counted per replica", claimAll: true, wantFail: map[string]string{
		"Two replicas share one global request budget":                             "got [200 200 200 200 200 200 200 200], want [200 200 200 200 200 429 429 429]",
		"Two replicas share one global token budget":                               "got [200 200 200 200 200], want [200 200 200 429 429]",
		"A global 429 carries the windowed limit and the service's mark":           `x-ratelimit-limit: got "2", want "2, 2;w=86400"`,
		"Without its service, a global limit refuses requests, and recovers":       "got [200 200], want [200 500]",
		"Without its service, a fail-open global limit lets requests through":      "got [200 429 429], want [200 200 200]",
		"A global limit keyed by a client header gives each client its own budget": "got [200 200 200 200 429 429], want [200 200 429 200 200 429]",
		// Counted locally per hour, the 429 tells the hour's refill.
		"Where several global limits refuse, the 429 tells the latest reset": "Retry-After: got 3",
		// Counted locally, a keyless request shares one bucket, never
		// failing its descriptor; a local 429 has no x-envoy-ratelimited.
		"A descriptor that cannot be evaluated refuses the request when the limit fails closed":        "got [200 200 429], want [200 500 500]",
		"A descriptor that cannot be evaluated lets the request through when the limit fails open":     "got [200 429 429 429], want [200 429 200 200]",
		"A global limit's 429 is OpenAI's JSON error too":                                              "x-envoy-ratelimited: absent",
		"A response's tokens reach the service with their descriptor, a stream's after its last chunk": "the service counted 0 for the route",
	}},
	{fault: "wrong headers", claimAll: true, wantFail: map[string]string{
		"The 429 response carries the spec body and headers":                            `x-ratelimit-limit: absent, want "3"`,
		"No rate-limit headers without a policy":                                        `X-Ratelimit-Limit: got ["100"], want no header x-ratelimit-limit`,
		"A global 429 carries the windowed limit and the service's mark":                `x-ratelimit-limit: absent, want "2, 2;w=86400"`,
		"A 429 carries the headers of the limit that refused it":                        `x-ratelimit-limit: absent, want "2"`,
		"A token limit that refuses gives the 429 its headers, not the request limit's": `x-ratelimit-limit: absent, want "100"`,
		"Where several global limits refuse, the 429 tells the latest reset":            `x-ratelimit-limit: absent, want "2, 2;w=1, 2;w=86400"`,
	}},
	{fault: "wrong admin answers", claimAll: true, wantFail: map[string]string{
		"GET /logging tells the current level":                                        `got "log level: info\n"`,
		"POST /logging sets a level filter":                                           `got "log level: info\n"`,
		"A CPU profile duration out of bounds is refused with 400":                    "got 200 (body \"profile\"), want 400",
		"config_dump has every category and the configured route":                     "config_dump names no category policies",
		"config_dump keeps the categories at the top level and listeners under binds": "config_dump lacks policies",
	}},
	{fault: "follow stream never answers", claimAll: true, wantFail: map[string]string{
		"N requests give N whole traces in order, under distinct request ids": "follow stream: no answer within ",
		"Requests sent at once are kept apart by their request ids":           "follow stream: no answer within ",
		"The stream ends after max traces and later requests are not traced":  "follow stream: no answer within ",
		"The stream ends at its duration":                                     "follow stream: no answer within ",
	}},
	{fault: "limits never reset", claimAll: true, wantFail: map[string]string{
		"The window resets with no manual action":                               "no 2xx within 3s, want one once the window resets: not within 3s",
		"The request that crosses the budget succeeds, the next one is refused": "no 2xx within 3s, want one once the window resets: not within 3s",
		"A streaming response is counted from its final chunk and never cut":    "no 2xx within 3s, want one once the window resets: not within 3s",
		// Refusing everyone after a 429 refuses the other keys too.
		"A keyed limit gives each client its own bucket, and requests without a key share one": "got [200 200 429 429 429 429 429], want [200 200 429 200 200 200 429]",
		"A keyed token limit gives each client its own token budget":                           "got [200 200 429 429], want [200 200 429 200]",
		"Long keys that differ only in their last byte get buckets of their own":               "got [200 429 429], want [200 429 200]",
		// Each replica refuses on its own after its first 429.
		"A global limit keyed by a client header gives each client its own budget":                 "got [200 200 429 200 429 200], want [200 200 429 200 200 429]",
		"A descriptor that cannot be evaluated lets the request through when the limit fails open": "got [200 429 429 429], want [200 429 200 200]",
	}},
	{fault: "holds a cut body open", claimAll: true, wantFail: map[string]string{
		"A body cut short after the response began is reported in the trace": "body not ended after 40000 bytes within ",
	}},
	{fault: "ignores quitquitquit", claimAll: true, wantFail: map[string]string{
		"quitquitquit shuts the proxy down gracefully": "did not stop accepting connections within 5s of /quitquitquit: not within 5s",
	}},
	{fault: "trace mixes requests", claimAll: true, wantFail: map[string]string{
		"A forwarded request traces every required event in order": "want EOF right after requestFinished",
		"An unmatched route traces no backend call":                "want EOF right after requestFinished",
		// The re-opened stream takes the next request, so the next
		// watcher of the scenario waits in vain.
		"No matching route answers 404 and a transport error answers 5xx": "the trace did not complete within 5s",
		"Severity says how each step went":                                "the trace did not complete within 5s",
		// Whether the fault's re-opened stream catches the second
		// request is a race of the fault itself; either way it fails.
		"Watch mode traces the next request and only it": "more than one request: 2 requestStarted events | want EOF right after requestFinished",
		// Re-opened, a follow stream never ends.
		"N requests give N whole traces in order, under distinct request ids": "the followed stream did not end",
		"Requests sent at once are kept apart by their request ids":           "the followed stream did not end",
		"The stream ends after max traces and later requests are not traced":  "the followed stream did not end",
		"The stream ends at its duration":                                     "the followed stream did not end",
	}},
	{fault: "eventStart on point events", claimAll: true, wantFail: map[string]string{
		"A forwarded request traces every required event in order":            "eventStart on a point event: routeSelection",
		"N requests give N whole traces in order, under distinct request ids": "eventStart on a point event: routeSelection",
		"Requests sent at once are kept apart by their request ids":           "eventStart on a point event: routeSelection",
	}},
	{fault: "stream cut", claimAll: true, wantFail: map[string]string{
		"A streaming response is counted from its final chunk and never cut":                           "stream cut: got 1 chunks",
		"A stream is counted only when it ends":                                                        "the usage chunk of the held stream did not reach the client",
		"The proxy asks a streaming backend for usage when the client did not":                         "stream cut: got 1 chunks",
		"A response's tokens reach the service with their descriptor, a stream's after its last chunk": "stream cut: got 1 chunks",
	}},
	{fault: "stream counted at its usage chunk", claimAll: true, wantFail: map[string]string{
		"A stream is counted only when it ends": "got [429 429], want [200 429]",
	}},
	{fault: "trace gives wrong reasons", claimAll: true, wantFail: map[string]string{
		"A route not matched by its method says which method it wanted": `route "submit" did not match on path (method is GET, the route wants POST), want method`,
		"A route not matched by a header says which value it wanted":    `route "tenant" did not match on path (header x-tenant is "red", the route wants exact "blue"), want header`,
		"A 429 names the limit entry that refused it":                   "the entry marked refused has 1 remaining, want nothing left",
		"A token limit names its entry once a response took its budget": "the entry marked refused has 1 remaining, want nothing left",
		"A backend that cannot be reached is the cause of the 503":      "requestFinished.cause.kind backendError",
	}},
	{fault: "limits not keyed", claimAll: true, wantFail: map[string]string{
		"A keyed limit gives each client its own bucket, and requests without a key share one": "got [200 200 429 429 429 429 429], want [200 200 429 200 200 200 429]",
		"A keyed token limit gives each client its own token budget":                           "got [200 200 429 429], want [200 200 429 200]",
		"Long keys that differ only in their last byte get buckets of their own":               "got [200 429 429], want [200 429 200]",
	}},
	{fault: "global limits not per client", claimAll: true, wantFail: map[string]string{
		"A global limit keyed by a client header gives each client its own budget": "got [200 200 429 429 429 429], want [200 200 429 200 200 429]",
		// One budget for everyone: a keyless request is counted in it.
		"A descriptor that cannot be evaluated refuses the request when the limit fails closed":    "got [200 200 429], want [200 500 500]",
		"A descriptor that cannot be evaluated lets the request through when the limit fails open": "got [200 429 429 429], want [200 429 200 200]",
	}},
	{fault: "429 headers of a limit that passed", claimAll: true, wantFail: map[string]string{
		"A 429 carries the headers of the limit that refused it":                        `x-ratelimit-limit: got "10", want "2"`,
		"A token limit that refuses gives the 429 its headers, not the request limit's": `x-ratelimit-remaining: got "1", want "0"`,
	}},
	{fault: "no Retry-After", claimAll: true, wantFail: map[string]string{
		"A 429 says when to retry in Retry-After, as x-ratelimit-reset does": `retry-after: got "", want a whole number of seconds`,
		// The draft: a refused client is told when to retry, not earlier
		// than the policy's reset.
		"The IETF fields describe each kind of limit, and a 429's the limit that refused": `429 of policy "tokens": Retry-After "", want whole seconds`,
		"Where several global limits refuse, the 429 tells the latest reset":              `Retry-After: got "", want whole seconds`,
		"A global 429 carries the windowed limit and the service's mark":                  `Retry-After: got "", want whole seconds`,
	}},
	{fault: "token headers before the charge", claimAll: true, wantFail: map[string]string{
		"A completion's rate-limit headers count its own tokens": `got ["1000" "961" "922"], want ["961" "922" "883"]`,
	}},
	{fault: "429 always plain text", claimAll: true, wantFail: map[string]string{
		"An LLM route can refuse with OpenAI's JSON error":    `response Content-Type: got "text/plain", want application/json`,
		"A global limit's 429 is OpenAI's JSON error too":     `response Content-Type: got "text/plain", want application/json`,
		"An LLM route can refuse with Anthropic's JSON error": `response Content-Type: got "text/plain", want application/json`,
	}},
	{fault: "credentials in clear", claimAll: true, wantFail: map[string]string{
		"Authorization and Proxy-Authorization never appear in a trace":                 "requestState.request.headers.authorization",
		"A credential a route matches on stays out of the trace when it does not match": "requestState.request.headers.authorization",
		"Cookies and API-key headers never appear in a trace":                           "requestState.request.headers.",
		"A backend's Set-Cookie never appears in a trace, and the client still gets it": "requestState.response.headers.set-cookie",
		"The API key the proxy sends an LLM provider never appears in a trace":          "requestState.request.headers.authorization",
	}},
	{fault: "config dump shows its keys", claimAll: true, wantFail: map[string]string{
		"The API key the proxy sends an LLM provider never appears in its config dump": "the config dump shows a credential the scenario planted at config_dump.policies[",
	}},
	{fault: "redacts only what the reference does", claimAll: true, wantFail: map[string]string{
		"Cookies and API-key headers never appear in a trace":                           "requestState.request.headers.",
		"A backend's Set-Cookie never appears in a trace, and the client still gets it": "requestState.response.headers.set-cookie",
	}},
	{fault: "sensitiveHeaders ignored", claimAll: true, wantFail: map[string]string{
		"A header named in config.sensitiveHeaders never appears in a trace": "requestState.request.headers.x-tenant-token",
	}},
	{fault: "redacted headers dropped", claimAll: true, wantFail: map[string]string{
		"Authorization and Proxy-Authorization never appear in a trace":                 `the "initial request" request snapshot has no header "authorization"`,
		"A header named in config.sensitiveHeaders never appears in a trace":            `the "initial request" request snapshot has no header "x-tenant-token"`,
		"Cookies and API-key headers never appear in a trace":                           `the "initial request" request snapshot has no header "cookie"`,
		"A backend's Set-Cookie never appears in a trace, and the client still gets it": `the "final response" response snapshot has no header "set-cookie"`,
	}},
	{fault: "429 headers of the lowest limit", claimAll: true, wantFail: map[string]string{
		"A token limit that refuses gives the 429 its headers, not the request limit's": `x-ratelimit-limit: got "10", want "100"`,
	}},
	{fault: "429 reset of the shortest window", claimAll: true, wantFail: map[string]string{
		"A 429 carries the headers of the limit that refused it":                        "x-ratelimit-reset: got",
		"A token limit that refuses gives the 429 its headers, not the request limit's": "x-ratelimit-reset: got",
	}},
	{fault: "keyed token limits share one budget", claimAll: true, wantFail: map[string]string{
		"A keyed token limit gives each client its own token budget": "response statuses: got [200 200 429 429], want [200 200 429 200]",
	}},
	{fault: "keys cut at 64 bytes", claimAll: true, wantFail: map[string]string{
		"Long keys that differ only in their last byte get buckets of their own": "response statuses: got [200 429 429], want [200 429 200]",
	}},
	{fault: "retry-after on allowed responses", claimAll: true, wantFail: map[string]string{
		"A 429 says when to retry in Retry-After, as x-ratelimit-reset does":       `response 1 (status 200): header retry-after`,
		"A shadow limit is counted, and shows its count in the headers when asked": `response 3 (status 200): header retry-after`,
	}},
	{fault: "no reset on allowed responses", claimAll: true, wantFail: map[string]string{
		"Allowed responses carry the rate-limit headers":                           "x-ratelimit-reset: got []",
		"A shadow limit is counted, and shows its count in the headers when asked": "x-ratelimit-reset: got []",
		"A shadow limit beside an enforced one leaves the refusing to it":          "x-ratelimit-reset: got []",
	}},
	{fault: "shadow limits refuse", claimAll: true, wantFail: map[string]string{
		"A shadow limit never refuses, and the trace names the requests it would have refused": "response statuses: got [200 200 429 429], want [200 200 200 200]",
		"A shadow limit is counted, and shows its count in the headers when asked":             "response statuses: got [200 200 429], want [200 200 200]",
		"A shadow limit beside an enforced one leaves the refusing to it":                      "response statuses: got [200 429 429 429], want [200 200 200 429]",
	}},
	{fault: "shadow limits ignored", claimAll: true, wantFail: map[string]string{
		"A shadow limit never refuses, and the trace names the requests it would have refused": "no localRateLimit policy event | localRateLimit",
		"A shadow limit is counted, and shows its count in the headers when asked":             "x-ratelimit-limit: absent",
	}},
	{fault: "shadow headers always written", claimAll: true, wantFail: map[string]string{
		"A shadow limit beside an enforced one leaves the refusing to it": `x-ratelimit-limit: got "1", want "3"`,
	}},
	{fault: "token charge without its descriptor", claimAll: true, wantFail: map[string]string{
		"Two replicas share one global token budget":                                                   "got [200 200 200 200 200], want [200 200 200 429 429]",
		"A response's tokens reach the service with their descriptor, a stream's after its last chunk": "the service counted 0 for the route",
	}},
	{fault: "global 429 without a body", claimAll: true, wantFail: map[string]string{
		"A global 429 carries the windowed limit and the service's mark": `response body: got "", want "rate limit exceeded"`,
		"A global limit's 429 is OpenAI's JSON error too":                `response Content-Type: got "", want application/json`,
	}},
	{fault: "global 429 tells the shortest reset", claimAll: true, wantFail: map[string]string{
		"Where several global limits refuse, the 429 tells the latest reset": "want the seconds until the service's day window ends",
	}},
	{fault: "IETF fields in an old draft's form", claimAll: true, wantFail: map[string]string{
		"The IETF fields describe each kind of limit, and a 429's the limit that refused": "is not a structured-field List",
		"A provider's own IETF fields arrive beside the proxy's":                          "is not a structured-field List",
	}},
	{fault: "upstream IETF fields replaced", claimAll: true, wantFail: map[string]string{
		"A provider's own IETF fields arrive beside the proxy's": "no IETF request policy of 500 per 60 seconds",
	}},
	{fault: "OpenAI resets in seconds", claimAll: true, wantFail: map[string]string{
		"OpenAI's headers describe each kind of limit, and a 429's the limit that refused": `x-ratelimit-reset-requests: "59" is not a duration | x-ratelimit-reset-requests: "60" is not a duration`,
		"A provider's stricter OpenAI headers are kept, its more permissive ones replaced": "is not a duration",
	}},
	{fault: "provider rate-limit headers overwritten", claimAll: true, wantFail: map[string]string{
		"A provider's own IETF fields arrive beside the proxy's":                           "no IETF request policy of 500 per 60 seconds",
		"A provider's stricter OpenAI headers are kept, its more permissive ones replaced": "x-ratelimit-limit-requests: got 3, want 500",
	}},
	{fault: "Anthropic resets in seconds", claimAll: true, wantFail: map[string]string{
		"Anthropic's headers describe each kind of limit, and a 429's the limit that refused": "is not an RFC 3339 time",
	}},
	{fault: "spans disagree with the trace on status", claimAll: true, wantFail: map[string]string{
		"A forwarded request's spans agree with its trace":              "the request span's http.response.status_code is 201, the trace says 200 (requestFinished.status)",
		"A refused request's span names the limit that refused it":      "the request span's http.response.status_code is 430, the trace says 429 (requestFinished.status)",
		"A chat completion's span carries the tokens its trace charged": "the request span's http.response.status_code is 201, the trace says 200 (requestFinished.status)",
	}},
	{fault: "spans miscount the charged tokens", claimAll: true, wantFail: map[string]string{
		"A chat completion's span carries the tokens its trace charged": "the request span's gateway.llm.tokens_charged is 31, the trace charged 30 tokens",
	}},
	{fault: "client's traceparent lost", claimAll: true, wantFail: map[string]string{
		"A client's trace goes on through the proxy to the backend": "the client's traceparent named trace 0af7651916cd43dd8448eb211c80319c, span b7ad6b7169203331",
	}},
	{fault: "unevaluated descriptors skipped under fail-closed", claimAll: true, wantFail: map[string]string{
		"A descriptor that cannot be evaluated refuses the request when the limit fails closed": "response statuses: got [200 200 200], want [200 500 500]",
	}},
	{fault: "single watcher slot", wantUnsup: map[string]string{
		"Watchers are served first in, first out": "watcher 1: the trace stream ended with no events",
	}},
	{fault: "no ready comment", wantUnsup: map[string]string{
		"The trace stream opens with a ready comment": `first trace frame: got nothing, want the comment "ready"`,
	}},
}

// TestSuiteCatchesFaults runs every feature against a deliberately broken
// proxy per fault and checks that exactly the expected scenarios fail (or,
// for a missing extended feature, are reported unsupported), each with a
// message that says why.
//
// make test runs the whole catalogue in a go test of its own, without the
// race detector (the catalogue is a third of ./steps' time, and the race
// detector makes it about twice as long), and sets $GWDIAG_CATALOGUE to
// race-sample for its -race run, which then runs a sample of
// raceSampleSize faults that changes every day (catalogueSample); the
// test says which in its log. Without $GWDIAG_CATALOGUE, every fault runs,
// with or without -race.
func TestSuiteCatchesFaults(t *testing.T) {
	t.Parallel()
	cases, note := catalogueSample(faultCases, raceEnabled, os.Getenv("GWDIAG_CATALOGUE"), time.Now().UTC())
	t.Log(note)
	for _, tt := range cases {
		t.Run(tt.fault, func(t *testing.T) {
			// Each fault has its own proxy, ports and mocks: the faults
			// run at once, as many as go test's -parallel.
			t.Parallel()
			rep := checkFault(t, inprocess.New(faults[tt.fault].proxyOptions...), tt)
			checkReplays(t, rep, faults[tt.fault], "", nil)
		})
	}
}

// raceSampleSize is how many faults a -race run under make test runs.
const raceSampleSize = 6

// catalogueSample returns the faults of cases a run of the catalogue runs,
// and a line that says which: every one, unless the test binary has the
// race detector and mode is "race-sample" (make test, which runs every
// fault without it): then raceSampleSize of them, a different set each
// day (by day number since 1970, UTC), so that every fault runs under the
// race detector once in len(cases)/raceSampleSize days.
func catalogueSample(cases []faultCase, race bool, mode string, now time.Time) ([]faultCase, string) {
	if !race || mode != "race-sample" {
		return cases, fmt.Sprintf("fault catalogue: all %d faults (race detector: %v)", len(cases), race)
	}
	out, round, rounds := dailySample(cases, raceSampleSize, now)
	return out, fmt.Sprintf("fault catalogue under the race detector: %d of %d faults today (%s, round %d of %d; $GWDIAG_CATALOGUE=race-sample: make test runs all of them without it): %s",
		len(out), len(cases), now.Format(time.DateOnly), round+1, rounds, faultNames(out))
}

// dailySample returns at most size of cases, a different set each day (by
// day number since 1970, UTC): over rounds days in a row, each case once.
func dailySample(cases []faultCase, size int, now time.Time) (out []faultCase, round, rounds int) {
	rounds = (len(cases) + size - 1) / size
	round = int(now.Unix()/86400) % rounds
	for i, c := range cases {
		if i%rounds == round {
			out = append(out, c)
		}
	}
	return out, round, rounds
}

func faultNames(cases []faultCase) string {
	var names []string
	for _, c := range cases {
		names = append(names, c.fault)
	}
	return strings.Join(names, ", ")
}

// checkFault runs the suite against inner with the fault of tt and checks
// what it reports; it returns the report.
func checkFault(t *testing.T, inner targets.Target, tt faultCase) *ConformanceReport {
	t.Helper()
	return checkFaultOn(t, inner, tt, "", nil)
}

// checkFaultOn is checkFault for the scenarios of a tag expression (every
// scenario when empty) but those named in skip.
func checkFaultOn(t *testing.T, inner targets.Target, tt faultCase, tags string, skip []string) *ConformanceReport {
	t.Helper()
	f, ok := faults[tt.fault]
	if !ok {
		t.Fatalf("no fault %q", tt.fault)
	}
	// Faults that hold a stream make the suite wait this long. Under the
	// race detector, on a loaded make test, the faithful proxy's heap
	// profile took longer than 3 s ("Other diagnostic endpoints answer":
	// /debug/pprof/heap: context deadline exceeded), for every fault.
	request := 3 * time.Second
	if raceEnabled {
		request = 10 * time.Second
	}
	o := Options{TargetImpl: &faultyTarget{inner: inner, fault: f}, Output: &strings.Builder{}, Tags: tags, SkipScenarios: skip,
		Timeouts: Timeouts{Request: Duration(request)}, Producer: Producer{Version: catalogueProducer}}
	o.AllFeatures = tt.claimAll
	// Failures quote what the proxy sent: none may quote a credential.
	plantCredentials(t, &o)
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	got := map[Result]map[string]string{Failed: {}, Unsupported: {}}
	for _, f := range rep.Features {
		for _, s := range f.Scenarios {
			if m, ok := got[s.Result]; ok {
				m[s.Name] = s.Message
			}
			// A scenario expected to fail that ended otherwise (passed, or
			// not run for want of redis-server) says how.
			_, failed := tt.wantFail[s.Name]
			_, unsup := tt.wantUnsup[s.Name]
			if (failed && s.Result != Failed) || (unsup && s.Result != Unsupported) {
				t.Logf("%s: %s %s", s.Name, s.Result, s.Message)
			}
		}
	}
	compare(t, "failed", got[Failed], tt.wantFail)
	compare(t, "unsupported", got[Unsupported], tt.wantUnsup)
	if t.Failed() {
		logEvidence(t, rep)
	}
	return rep
}

// logEvidence logs the ends of the proxy's output and of the traces in
// each failed scenario's bundle: the test's temporary directory goes
// with it, and a fault that failed the wrong way once (a 500 where the
// scenario wanted a 429, 2026-12-03) left only its message to go on.
func logEvidence(t *testing.T, rep *ConformanceReport) {
	t.Helper()
	for _, f := range rep.Features {
		for _, s := range f.Scenarios {
			if s.Bundle == "" {
				continue
			}
			files, _ := filepath.Glob(filepath.Join(s.Bundle, bundle.TracesDir, "*"))
			for _, file := range append([]string{filepath.Join(s.Bundle, bundle.ProxyLogFile)}, files...) {
				b, err := os.ReadFile(file)
				if err != nil {
					continue
				}
				t.Logf("%s: bundle's %s, its last lines:\n%s", s.Name, filepath.Base(file), toolbin.LastLines(string(b), 30))
			}
		}
	}
}

// catalogueProducer is the gwdiag version the catalogue's runs give (as
// the CLI gives its release): every bundle must carry it.
const catalogueProducer = "catalogue-test"

// onTargets returns the faults of cases a target other than the
// in-process one can run: those without options of the in-process proxy
// (a fault inside refproxy's own code runs only in process) that expect
// some scenario to fail or be unsupported (a fault that fails nothing
// leaves no bundle; that it fails nothing is TestSuiteCatchesFaults's).
func onTargets(cases []faultCase) []faultCase {
	var out []faultCase
	for _, tt := range cases {
		if faults[tt.fault].proxyOptions == nil && len(tt.wantFail)+len(tt.wantUnsup) > 0 {
			out = append(out, tt)
		}
	}
	return out
}

// TestContainerTargetCatchesFaults: the container target, running the
// reference proxy's image behind the same fault wrappers, fails the same
// scenarios for the same reasons for every fault it can run (onTargets),
// each failed scenario's bundle holds the evidence (checkBundle: the
// container's logs among it), and the bundle of the first failure passes
// replayed on the reference in process and fails at the same step
// replayed on the same faulty container. Each fault runs only the
// scenarios it must fail (faultScope): that it fails nothing else is
// TestSuiteCatchesFaults's (every feature, in process), that the other
// scenarios pass on the container target TestContainerConformance's
// (steps/targets/container); a container per scenario of every feature
// the faults touch made this test 10 minutes of the gate. The containers
// run in this machine's network (container.NetworkHost), as those of
// TestContainerConformance do; the run's own network is
// TestContainerDeployment's and the CLI's container tests'.
func TestContainerTargetCatchesFaults(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a container per scenario")
	}
	proxy, mocks := containertest.Images(t)
	// One target for every fault's runs: one mock pool, started once, where
	// a target per run started 68 pools. In this machine's network, a
	// container starts in half the time and CPU (docs/container.md).
	shared := container.New(container.Options{Image: proxy, MockImage: mocks, Pull: container.PullNever, Network: container.NetworkHost})
	if err := shared.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := shared.Stop(context.Background()); err != nil {
			t.Errorf("container target: %v", err)
		}
	})
	newTarget := func() targets.Target { return startedTarget{shared} }
	cases := onTargets(faultCases)
	t.Logf("container target: all %d faults it can run", len(cases))
	for _, tt := range cases {
		t.Run(tt.fault, func(t *testing.T) {
			t.Parallel() // containers and ports of its own
			rep := checkFaultScope(t, newTarget(), tt)
			checkReplays(t, rep, faults[tt.fault], "refproxy started", func() *faultyTarget {
				return &faultyTarget{inner: newTarget(), fault: faults[tt.fault]}
			})
		})
	}
}

// startedTarget is a container target started once and shared by runs,
// each scenario of each still with a proxy container of its own: a run's
// Start and Stop leave it be.
type startedTarget struct{ *container.Container }

func (startedTarget) Start(context.Context) error { return nil }
func (startedTarget) Stop(context.Context) error  { return nil }

// TestProcessTargetCatchesFaults: every fault the process target can run
// (onTargets), in front of refproxy run as a process, on the scenarios it
// must fail (faultScope): each fails them for the same reasons, their
// bundles hold the evidence (checkBundle: the process's output among
// it), and the bundle of the first failure passes replayed on the
// reference and fails at the same step replayed on the same faulty
// process.
func TestProcessTargetCatchesFaults(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs refproxy as a process")
	}
	bin := builtBinary(t, "github.com/gwdiag/gwdiag/refproxy/cmd/refproxy")
	// In make test's -race run a daily sample: the catalogue run without
	// the race detector runs every fault.
	cases, note := catalogueSample(onTargets(faultCases), raceEnabled, os.Getenv("GWDIAG_CATALOGUE"), time.Now().UTC())
	t.Log("process target: " + note)
	for _, tt := range cases {
		t.Run(tt.fault, func(t *testing.T) {
			t.Parallel()
			rep := checkFaultScope(t, process.New(bin+" -f {config}"), tt)
			checkReplays(t, rep, faults[tt.fault], "refproxy started", func() *faultyTarget {
				return &faultyTarget{inner: process.New(bin + " -f {config}"), fault: faults[tt.fault]}
			})
		})
	}
}

// checkFaultScope is checkFault on the scenarios tt must fail (faultScope).
func checkFaultScope(t *testing.T, inner targets.Target, tt faultCase) *ConformanceReport {
	t.Helper()
	tags, skip := faultScope(t, tt)
	rep := checkFaultOn(t, inner, tt, tags, skip)
	ran := 0
	for _, f := range rep.Features {
		for _, s := range f.Scenarios {
			if s.Result != Skipped {
				ran++
			}
		}
	}
	t.Logf("features %s: %d scenarios run, %d skipped", tags, ran, len(skip))
	return rep
}

// faultScope is what a target's catalogue runs of tt: the tag expression
// of the features (core or extended) holding the scenarios tt expects
// failed or unsupported, and the names of those features' other
// scenarios, to skip.
func faultScope(t *testing.T, tt faultCase) (tags string, skip []string) {
	t.Helper()
	byName := map[string]FeatureName{}
	all := loadScenarios(t)
	for _, s := range all {
		byName[s.name] = s.feature
	}
	var feats []FeatureName
	for _, want := range []map[string]string{tt.wantFail, tt.wantUnsup} {
		for name := range want {
			f, ok := byName[name]
			if !ok {
				t.Fatalf("fault %q expects scenario %q, which no feature has", tt.fault, name)
			}
			if !slices.Contains(feats, f) {
				feats = append(feats, f)
			}
		}
	}
	if len(feats) == 0 {
		t.Fatalf("fault %q expects no scenario to fail: it has no scope", tt.fault)
	}
	var tagList []string
	for _, f := range feats {
		tagList = append(tagList, "@"+string(f))
	}
	sort.Strings(tagList)
	for _, s := range all {
		_, failed := tt.wantFail[s.name]
		_, unsup := tt.wantUnsup[s.name]
		if slices.Contains(feats, s.feature) && !failed && !unsup {
			skip = append(skip, s.name)
		}
	}
	return strings.Join(tagList, ","), skip
}

func compare(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	var gotNames, wantNames []string
	for n := range got {
		gotNames = append(gotNames, n)
	}
	for n := range want {
		wantNames = append(wantNames, n)
	}
	sort.Strings(gotNames)
	sort.Strings(wantNames)
	if !slices.Equal(gotNames, wantNames) {
		t.Errorf("%s scenarios:\n got  %q\n want %q", what, gotNames, wantNames)
		for _, n := range gotNames {
			t.Logf("%s: %s", n, got[n])
		}
	}
	for n, text := range want {
		msg, ok := got[n]
		if !ok {
			continue
		}
		found := false
		for _, alt := range strings.Split(text, " | ") {
			found = found || strings.Contains(msg, alt)
		}
		if !found {
			t.Errorf("%s scenario %q: message %q lacks %q", what, n, msg, text)
		}
	}
}

// TestCatalogueSample: without the race detector, or without make test's
// race-sample mode, every fault runs; in that mode each day runs at most
// raceSampleSize faults, and consecutive days cover every fault once
// before any twice.
func TestCatalogueSample(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		race bool
		mode string
	}{{false, ""}, {false, "race-sample"}, {true, ""}, {true, "other"}} {
		if got, _ := catalogueSample(faultCases, tc.race, tc.mode, day); len(got) != len(faultCases) {
			t.Errorf("race %v mode %q: %d faults, want all %d", tc.race, tc.mode, len(got), len(faultCases))
		}
	}
	rounds := (len(faultCases) + raceSampleSize - 1) / raceSampleSize
	seen := map[string]int{}
	for d := range rounds {
		got, note := catalogueSample(faultCases, true, "race-sample", day.AddDate(0, 0, d))
		if len(got) == 0 || len(got) > raceSampleSize || !strings.Contains(note, got[0].fault) {
			t.Errorf("day %d: %d faults (want 1 to %d), note %q", d, len(got), raceSampleSize, note)
		}
		for _, c := range got {
			seen[c.fault]++
		}
	}
	for _, c := range faultCases {
		if seen[c.fault] != 1 {
			t.Errorf("%s: run %d times under the race detector in %d days, want once", c.fault, seen[c.fault], rounds)
		}
	}
}
