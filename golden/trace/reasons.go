package trace

import (
	"bytes"
	"encoding/json"
	"errors"
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

// PolicyOutcome is what one policy kind did with the request. Entries are
// localRateLimit's; the fields of the other kinds (remoteRateLimit's
// descriptors, who an auth policy found, where backendAuth put its
// credential) are written in docs/admin.md only, and a lenient decode
// skips them.
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
	// Remaining and ResetSeconds: the bucket after the request (absent
	// for an entry of a conditional group that did not apply).
	Remaining    *int64 `json:"remaining,omitempty"`
	ResetSeconds *int64 `json:"resetSeconds,omitempty"`
	// Refused: this entry refused the request.
	Refused bool `json:"refused,omitempty"`
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
