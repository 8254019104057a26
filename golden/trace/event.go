// Package trace is what a trace is: the events of spec part 2.1 as they
// travel on the wire, which every proxy under test sends and the CLI, the
// suite and the golden traces read. Reading a stream or a saved capture is
// package golden/trace/sse; producing events is the reference proxy's
// refproxy/internal/tracing.
package trace

import "encoding/json"

// MessageType is the value of message.type in a trace event.
type MessageType string

// The message types of spec part 2.1, in the order spec part 3 fixes for one request.
const (
	RequestStarted    MessageType = "requestStarted"
	RequestSnapshot   MessageType = "requestSnapshot"
	RouteSelection    MessageType = "routeSelection"
	PolicySelection   MessageType = "policySelection"
	BackendCallStart  MessageType = "backendCallStart"
	BackendCallResult MessageType = "backendCallResult"
	ResponseSnapshot  MessageType = "responseSnapshot"
	RequestFinished   MessageType = "requestFinished"
)

// Message types of the reference's newer releases (REFERENCE.md) that
// carry reasons: a policy applied or skipped, and what a policy did.
const (
	// PolicyResultType is `policy`: {kind, result: {type: apply, details}
	// or {type: skip, reason}}.
	PolicyResultType MessageType = "policy"
	// PolicyEvent is `policyEvent`: {kind, details}.
	PolicyEvent MessageType = "policyEvent"
	// LLMRequestDetected is `llmRequestDetected`: {provider, inputFormat,
	// requestModel, streaming}, what a request to an LLM provider asks.
	LLMRequestDetected MessageType = "llmRequestDetected"
)

// Snapshot stages of spec part 2.1.
const (
	StageInitialRequest       = "initial request"
	StageGatewayPolicies      = "gateway policies"
	StageRoutePolicies        = "route policies"
	StageFinalRequest         = "final request"
	StageBackendResponseReady = "backend response ready"
	StageFinalResponse        = "final response"
)

// Severity of a trace event.
type Severity string

// Severities used by the reference implementation.
const (
	SeveritySuccess Severity = "success"
	SeverityInfo    Severity = "info"
	SeverityWarn    Severity = "warn"
	SeverityError   Severity = "error"
)

// Event is one trace event as it travels on the wire: one SSE data frame, or
// one line of a JSON Lines trace. Message keeps every field, known or not, so
// that a consumer validating newer proxies never loses what it did not expect.
type Event struct {
	// EventStart is microseconds since the traced request was taken, set only
	// on timed events (backendCallResult: when the upstream call started).
	EventStart *int64 `json:"eventStart"`
	// EventEnd is microseconds since the traced request was taken; it never
	// decreases within one trace.
	EventEnd int64          `json:"eventEnd"`
	Severity Severity       `json:"severity"`
	Scope    []string       `json:"scope,omitempty"`
	Message  map[string]any `json:"message"`
	// RequestID names the request of the event on a follow stream, where
	// the events of several requests interleave; one-shot streams omit it.
	RequestID string `json:"requestId,omitempty"`
}

// Type returns message.type, or "" when it is missing or not a string.
func (e Event) Type() MessageType {
	t, _ := e.Message["type"].(string)
	return MessageType(t)
}

// Stage returns message.stage for snapshot events, or "".
func (e Event) Stage() string {
	s, _ := e.Message["stage"].(string)
	return s
}

// Parse decodes one event from a JSON object, as encoding/json does (its
// errors included), through a faster path for the events proxies send
// (parse.go). The Event does not refer to b.
func Parse(b []byte) (Event, error) {
	if e, ok := parseFast(string(b)); ok {
		return e, nil
	}
	return parseJSON(b)
}

// parseJSON is Parse by encoding/json alone.
func parseJSON(b []byte) (Event, error) {
	var e Event
	err := json.Unmarshal(b, &e)
	return e, err
}

// ByRequest splits the events of a follow stream by requestId, keeping
// the order in which the requests first appear and, within each, the order
// of its events. Events without a requestId are under "".
func ByRequest(events []Event) (ids []string, traces map[string][]Event) {
	traces = map[string][]Event{}
	for _, e := range events {
		if _, seen := traces[e.RequestID]; !seen {
			ids = append(ids, e.RequestID)
		}
		traces[e.RequestID] = append(traces[e.RequestID], e)
	}
	return ids, traces
}
