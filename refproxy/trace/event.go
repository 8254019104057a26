// Package trace implements the proxy's request tracing: the trace events of
// spec part 2.1, the registry of watchers waiting for the next request, and the
// JSON-over-SSE stream served at /debug/trace.
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

// Parse decodes one event from a JSON object.
func Parse(b []byte) (Event, error) {
	var e Event
	err := json.Unmarshal(b, &e)
	return e, err
}
