package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
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

// The reason types below list their fields in the order of their JSON
// names, the order in which encoding/json writes a map's keys: a proxy
// that writes a reason from these types (refproxy does) writes the bytes
// it would write from a map. TestReasonFieldsAreInKeyOrder holds them to
// it.

// PolicyOutcome is what one policy kind did with the request: the
// fields every kind has (Type, Details or Reason, Decision), then each
// kind's own, named in each field's comment.
type PolicyOutcome struct {
	// Backend (backendAuth) is the backend the credential went to.
	Backend string `json:"backend,omitempty"`
	// Decision is allowed, refused, or failed (a global limit's service).
	Decision string `json:"decision,omitempty"`
	// Descriptors (remoteRateLimit) are the descriptors sent, with the
	// service's answer to each.
	Descriptors []Descriptor `json:"descriptors,omitempty"`
	// Details say what an applied policy did.
	Details string `json:"details,omitempty"`
	// Domain (remoteRateLimit) is the service's domain.
	Domain string `json:"domain,omitempty"`
	// Entries (localRateLimit) are a local limit's entries, in
	// effectivePolicy's order.
	Entries []LimitEntry `json:"entries,omitempty"`
	// Error (remoteRateLimit) is why the service could not answer
	// (Decision failed).
	Error string `json:"error,omitempty"`
	// FailureMode (remoteRateLimit) is failOpen or failClosed.
	FailureMode string `json:"failureMode,omitempty"`
	// From (remoteRateLimit) is the limit's source: the route or policy.
	From string `json:"from,omitempty"`
	// Issuer (jwt) is the JWT's issuer.
	Issuer string `json:"issuer,omitempty"`
	// Key (apiKey) is the index of the API key that matched.
	Key *int `json:"key,omitempty"`
	// KeyID (jwt) is the id of the key that verified the JWT.
	KeyID string `json:"keyId,omitempty"`
	// Locations (backendAuth) are where in the request the credential
	// went ("header authorization").
	Locations []string `json:"locations,omitempty"`
	// Metadata (apiKey) is the matched key's metadata as the config gives
	// it ({} for none). Never the key.
	Metadata map[string]any `json:"metadata,omitzero"`
	// Phase (jwt, basicAuth, apiKey) is where the policy ran: gateway or
	// route.
	Phase string `json:"phase,omitempty"`
	// Provider (jwt) is the index of the policy's provider that validated
	// the JWT.
	Provider *int `json:"provider,omitempty"`
	// Reason says why a policy was skipped.
	Reason string `json:"reason,omitempty"`
	// Service (remoteRateLimit) is the rate-limit service asked.
	Service string `json:"service,omitempty"`
	// Subject (jwt) is the JWT's subject, "" for a JWT without one.
	Subject *string `json:"subject,omitempty"`
	// Type is apply or skip.
	Type string `json:"type"`
	// User (basicAuth) is the user who authenticated.
	User string `json:"user,omitempty"`
}

// LimitEntry is one entry of a local rate limit as a policy event (and
// the policyEvent of a charge) shows it.
type LimitEntry struct {
	// Applies: for an entry of the conditional form, whether it was the
	// entry of its group whose condition held.
	Applies *bool `json:"applies,omitempty"`
	// Bucket is a keyed entry's bucket of the request: its key, or null
	// for the bucket of requests without one.
	Bucket Nullable[string] `json:"bucket,omitzero"`
	// Condition is a conditional entry's CEL condition, null for its
	// group's fallback.
	Condition Nullable[string] `json:"condition,omitzero"`
	// Entry is its index in effectivePolicy's list.
	Entry *int `json:"entry,omitempty"`
	// FillInterval as configs write it ("60s").
	FillInterval string `json:"fillInterval"`
	// From is the entry's source (route or policy).
	From string `json:"from"`
	// Index is its index in its source's local[] (or localRateLimit).
	Index int `json:"index"`
	// Key is a keyed entry's CEL key.
	Key *string `json:"key,omitempty"`
	// MaxTokens is the bucket's size.
	MaxTokens uint64 `json:"maxTokens"`
	// Policy is a top-level policy's name.
	Policy string `json:"policy,omitempty"`
	// Refused: this entry refused the request.
	Refused bool `json:"refused,omitempty"`
	// Remaining and ResetSeconds: the bucket after the request (absent
	// for an entry of a conditional group that did not apply).
	Remaining    *int64 `json:"remaining,omitempty"`
	ResetSeconds *int64 `json:"resetSeconds,omitempty"`
	// Shadow: the entry counts but never refuses (it is in shadow mode).
	Shadow bool `json:"shadow,omitempty"`
	// TokensPerFill is what each fill adds.
	TokensPerFill uint64 `json:"tokensPerFill"`
	// Type is requests or tokens.
	Type string `json:"type"`
	// WouldRefuse: a shadow entry that would have refused the request.
	WouldRefuse bool `json:"wouldRefuse,omitempty"`
}

// Descriptor is one descriptor a global limit sent to its rate-limit
// service, and the service's answer.
type Descriptor struct {
	// Code is the service's answer: OK or OVER_LIMIT ("" when it did not
	// answer).
	Code string `json:"code"`
	// Entries are the descriptor's keys and the request's values (a
	// value that is a credential of the request shown as its marker).
	Entries map[string]string `json:"entries"`
	// Limit, Remaining, ResetSeconds and Unit are the limit the service
	// applied, when it told one.
	Limit        *uint64 `json:"limit,omitempty"`
	Remaining    *uint64 `json:"remaining,omitempty"`
	ResetSeconds *int64  `json:"resetSeconds,omitempty"`
	// Type is requests or tokens.
	Type string `json:"type"`
	Unit string `json:"unit,omitempty"`
}

// PolicyCharge is the message of the `policyEvent` refproxy traces when a
// response's usage was charged to the route's token limits: the tokens
// taken and what each limit has left (the reason of a later 429).
type PolicyCharge struct {
	Details string `json:"details"`
	// Entries are the token limits charged, each with its bucket after
	// the charge.
	Entries []LimitEntry `json:"entries"`
	// Kind is localRateLimit.
	Kind   string `json:"kind"`
	Tokens uint64 `json:"tokens"`
	// Type is the event's, "policyEvent".
	Type string `json:"type"`
	// Usage is the usage as the response gave it.
	Usage Usage `json:"usage"`
}

// Usage is an LLM response's usage, its input and output tokens apart.
type Usage struct {
	InputTokens  uint64 `json:"inputTokens"`
	OutputTokens uint64 `json:"outputTokens"`
}

// Nullable is a reason's field that is written as a value, written as
// null, or left out (its zero value, with the omitzero option): a
// conditional limit entry's condition is null for its group's fallback
// and absent from an entry of no group.
type Nullable[T any] struct {
	// Set: the field is there; Value is nil where it is null (or of
	// another type than T).
	Set   bool
	Value *T
	// other is a value of another type than T, as it was read: encoding/json
	// stops decoding at an error of an Unmarshaler, so a lenient reader
	// (DecodeReason) would lose every field after it; StrictReason refuses
	// it instead.
	other string
}

// Some is a Nullable of v.
func Some[T any](v T) Nullable[T] { return Nullable[T]{Set: true, Value: &v} }

// Null is a Nullable written as null.
func Null[T any]() Nullable[T] { return Nullable[T]{Set: true} }

// IsZero reports whether n is left out.
func (n Nullable[T]) IsZero() bool { return !n.Set }

// MarshalJSON writes n's value, or null.
func (n Nullable[T]) MarshalJSON() ([]byte, error) {
	if n.Value == nil {
		return []byte("null"), nil
	}
	return json.Marshal(*n.Value)
}

// UnmarshalJSON reads a value or null: n is then Set. A value of another
// type is read as null (and kept for StrictReason to refuse).
func (n *Nullable[T]) UnmarshalJSON(b []byte) error {
	*n = Nullable[T]{Set: true}
	if string(b) == "null" {
		return nil
	}
	v := new(T)
	if err := json.Unmarshal(b, v); err != nil {
		n.other = string(b)
		return nil
	}
	n.Value = v
	return nil
}

// otherType is the value of another type n was read from, if any.
func (n *Nullable[T]) otherType() string { return n.other }

// otherTypes finds, in a value decoded into a reason type, a Nullable read
// from a value of another type, and names its field.
func otherTypes(v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			return otherTypes(v.Elem(), path)
		}
	case reflect.Slice:
		for i := range v.Len() {
			if err := otherTypes(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Struct:
		if !v.CanAddr() {
			return nil
		}
		if n, ok := v.Addr().Interface().(interface{ otherType() string }); ok {
			if o := n.otherType(); o != "" {
				return fmt.Errorf("json: field %s: %s is not a value of its type", path, o)
			}
			return nil
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if err := otherTypes(v.Field(i), strings.TrimPrefix(path+"."+name, ".")); err != nil {
				return err
			}
		}
	}
	return nil
}

// Cause is requestFinished.cause: why the proxy answered a status the
// backend did not give.
type Cause struct {
	// Kind: noRoute, rateLimit, rateLimitServiceUnavailable, noBackend,
	// backendUnreachable, backendError, backendBody, clientBody,
	// authorization, authentication, directResponse, noModel.
	Kind string `json:"kind"`
	// Policy names the policy kind that answered, where one did.
	Policy string `json:"policy,omitempty"`
	Reason string `json:"reason"`
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
	if err := d.Decode(into); err != nil {
		return err
	}
	return otherTypes(reflect.ValueOf(into), "")
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
