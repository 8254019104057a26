package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// The reasons a trace may carry (spec part 6: why a route matched or not,
// why a policy applied or not, why an unexpected status was returned).
// The spec names no field for them; these are the shapes refproxy writes,
// in the reference implementation's newer events (docs/admin.md,
// "Reasons"), and the ones `gwdiag trace explain` reads. They are written
// here once: refproxy's tests hold what it emits to them (strictly: no
// field they do not name), and the explanation decodes them (leniently: a
// proxy's field of another type counts as absent).

// RouteReason is one route's verdict in routeSelection.reasons.
type RouteReason struct {
	// Route is the route's key.
	Route string `json:"route"`
	// Result is selected, shadowed (it matches too, but the selected
	// route goes first) or noMatch.
	Result string `json:"result"`
	// Reason is the verdict in words.
	Reason string `json:"reason"`
	// Match is the index of the route's closest match, for a route of
	// several matches.
	Match *int `json:"match,omitempty"`
	// Condition is the first condition a noMatch failed on: listener,
	// hostname, path, method, header or query; Name the header or query
	// parameter; Want what the route wanted, Got what the request had
	// (Missing: it had none).
	Condition string `json:"condition,omitempty"`
	Name      string `json:"name,omitempty"`
	Want      string `json:"want,omitempty"`
	Got       string `json:"got,omitempty"`
	Missing   bool   `json:"missing,omitempty"`
}

// PolicyResult is the message of a `policy` event: one policy kind of the
// route, applied (with its details) or skipped (with why).
type PolicyResult struct {
	// Type is the event's, "policy".
	Type   string        `json:"type"`
	Kind   string        `json:"kind"`
	Result PolicyOutcome `json:"result"`
}

// PolicyOutcome is what one policy kind did with the request: the
// fields every kind has (Type, Details or Reason, Decision), then each
// kind's own.
type PolicyOutcome struct {
	// Type is apply or skip.
	Type string `json:"type"`
	// Details say what an applied policy did; Reason why one was skipped.
	Details string `json:"details,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// Decision is allowed, refused, or failed (a global limit's service).
	Decision string `json:"decision,omitempty"`

	// Entries are a local limit's entries, in effectivePolicy's order.
	Entries []LimitEntry `json:"entries,omitempty"`

	// A global limit (remoteRateLimit): the service asked, its domain,
	// the limit's source (route or policy) and failure mode, the
	// descriptors sent with the service's answer to each, and Error when
	// the service could not answer (Decision failed).
	Service     string       `json:"service,omitempty"`
	Domain      string       `json:"domain,omitempty"`
	From        string       `json:"from,omitempty"`
	FailureMode string       `json:"failureMode,omitempty"`
	Descriptors []Descriptor `json:"descriptors,omitempty"`
	Error       string       `json:"error,omitempty"`

	// An auth policy (jwt, basicAuth, apiKey): the phase it ran in
	// (gateway or route) and who the client is. Never the credential.
	Phase string `json:"phase,omitempty"`
	// Key is the index of the API key that matched, Metadata its
	// metadata as the config gives it (apiKey).
	Key      *int           `json:"key,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
	// User is the basicAuth user.
	User string `json:"user,omitempty"`
	// Issuer, Subject and KeyID are the JWT's, Provider the index of
	// the policy's provider that validated it (jwt).
	Issuer   string `json:"issuer,omitempty"`
	Subject  string `json:"subject,omitempty"`
	KeyID    string `json:"keyId,omitempty"`
	Provider *int   `json:"provider,omitempty"`

	// backendAuth: the backend the credential went to and where in the
	// request it went ("header authorization").
	Backend   string   `json:"backend,omitempty"`
	Locations []string `json:"locations,omitempty"`
}

// LimitEntry is one entry of a local rate limit as a policy event (and
// the policyEvent of a charge) shows it.
type LimitEntry struct {
	// Entry is its index in effectivePolicy's list; Index in its
	// source's local[] (or localRateLimit); From the source (route or
	// policy), Policy a top-level policy's name.
	Entry  *int   `json:"entry,omitempty"`
	Index  int    `json:"index"`
	From   string `json:"from"`
	Policy string `json:"policy,omitempty"`
	// Type is requests or tokens.
	Type          string `json:"type"`
	MaxTokens     uint64 `json:"maxTokens"`
	TokensPerFill uint64 `json:"tokensPerFill"`
	// FillInterval as configs write it ("60s").
	FillInterval string `json:"fillInterval"`
	// Shadow: the entry counts but never refuses (it is in shadow mode).
	Shadow bool `json:"shadow,omitempty"`
	// Remaining and ResetSeconds: the bucket after the request (absent
	// for an entry of a conditional group that did not apply).
	Remaining    *int64 `json:"remaining,omitempty"`
	ResetSeconds *int64 `json:"resetSeconds,omitempty"`
	// Refused: this entry refused the request; WouldRefuse: a shadow
	// entry that would have.
	Refused     bool `json:"refused,omitempty"`
	WouldRefuse bool `json:"wouldRefuse,omitempty"`
	// Condition is a conditional entry's CEL condition (null for the
	// group's fallback), Applies whether it was the entry of its group
	// that held.
	Condition *string `json:"condition,omitempty"`
	Applies   *bool   `json:"applies,omitempty"`
	// Key is a keyed entry's CEL key; Bucket the request's key (nil: the
	// bucket of requests without one).
	Key    *string `json:"key,omitempty"`
	Bucket *string `json:"bucket,omitempty"`
}

// Descriptor is one descriptor a global limit sent to its rate-limit
// service, and the service's answer.
type Descriptor struct {
	// Entries are the descriptor's keys and the request's values (a
	// value that is a credential of the request shown as its marker).
	Entries map[string]string `json:"entries"`
	// Type is requests or tokens.
	Type string `json:"type"`
	// Code is the service's answer: OK or OVER_LIMIT ("" when it did not
	// answer).
	Code string `json:"code"`
	// Limit, Unit, Remaining and ResetSeconds are the limit the service
	// applied, when it told one.
	Limit        *uint64 `json:"limit,omitempty"`
	Unit         string  `json:"unit,omitempty"`
	Remaining    *uint64 `json:"remaining,omitempty"`
	ResetSeconds *int64  `json:"resetSeconds,omitempty"`
}

// PolicyCharge is the message of the `policyEvent` refproxy traces when a
// response's usage was charged to the route's token limits: the tokens
// taken and what each limit has left (the reason of a later 429).
type PolicyCharge struct {
	// Type is the event's, "policyEvent"; Kind is localRateLimit.
	Type    string `json:"type"`
	Kind    string `json:"kind"`
	Details string `json:"details"`
	Tokens  uint64 `json:"tokens"`
	// Entries are the token limits charged, each with its bucket after
	// the charge.
	Entries []LimitEntry `json:"entries"`
	// Usage is the usage as the response gave it.
	Usage Usage `json:"usage"`
}

// Usage is an LLM response's usage, its input and output tokens apart.
type Usage struct {
	InputTokens  uint64 `json:"inputTokens"`
	OutputTokens uint64 `json:"outputTokens"`
}

// Cause is requestFinished.cause: why the proxy answered a status the
// backend did not give.
type Cause struct {
	// Kind: noRoute, rateLimit, rateLimitServiceUnavailable, noBackend,
	// backendUnreachable, backendError, backendBody, clientBody,
	// authorization, authentication, directResponse, noModel.
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
	// Policy names the policy kind that answered, where one did.
	Policy string `json:"policy,omitempty"`
}

// DecodeReason reads v (a field of an event's message, as the event
// was parsed) into a reason type, leniently: a field of another type
// counts as absent, unknown fields are ignored. It reports whether v was
// there at all.
func DecodeReason(v any, into any) bool {
	if v == nil {
		return false
	}
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return false
	}
	var te *json.UnmarshalTypeError
	if err := json.Unmarshal(b, into); err != nil && !errors.As(err, &te) {
		return false
	}
	return true
}

// StrictReason decodes v into a reason type refusing any field the type
// does not name and any value of another type: what a producer's test
// holds its reasons to.
func StrictReason(v any, into any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode(into)
}

// StrictReasons holds the reasons e carries to the types above, strictly
// (StrictReason): routeSelection's reasons, a policy event whole, a
// policyEvent whole (refproxy's only one is a charge, PolicyCharge) and
// requestFinished's cause. An event that carries none passes. It is what
// a producer's tests call on every event they read, so that no shape is
// written only in prose.
func StrictReasons(e Event) error {
	var err error
	switch m := e.Message; e.Type() {
	case RouteSelection:
		if v, ok := m["reasons"]; ok {
			err = StrictReason(v, new([]RouteReason))
		}
	case PolicyResultType:
		err = StrictReason(m, new(PolicyResult))
	case PolicyEvent:
		err = StrictReason(m, new(PolicyCharge))
	case RequestFinished:
		if v, ok := m["cause"]; ok {
			err = StrictReason(v, new(Cause))
		}
	}
	if err != nil {
		return fmt.Errorf("%s event %s: %w", e.Type(), compact(e.Message), err)
	}
	return nil
}

// compact is m as one line of JSON, for an error.
func compact(m map[string]any) string {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Sprint(m)
	}
	return string(b)
}
