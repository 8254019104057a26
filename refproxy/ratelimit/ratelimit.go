// Package ratelimit implements local rate limiting (spec parts 2.3, 7, 8):
// token buckets for requests and LLM tokens, the mapping from the policy
// resource's requests|tokens/unit/burst form to buckets, and the
// x-ratelimit-* response headers.
//
// SKELETON: the signatures below are the contract the data plane is written
// against; the bodies are placeholders to be replaced (issue 3).
package ratelimit

import (
	"net/http"
	"time"
)

// Kind is what a bucket counts.
type Kind string

// Bucket kinds of the standalone config (`type:`); requests is the default.
const (
	Requests Kind = "requests"
	Tokens   Kind = "tokens"
)

// Spec configures one bucket: it starts full at MaxTokens and gains
// TokensPerFill every FillInterval, in discrete steps, capped at MaxTokens.
type Spec struct {
	MaxTokens     uint64
	TokensPerFill uint64
	FillInterval  time.Duration
	Type          Kind
}

// PolicyEntry is one spec.traffic.rateLimit.local[] entry of the policy resource.
type PolicyEntry struct {
	Requests *uint64 `json:"requests,omitempty"`
	Tokens   *uint64 `json:"tokens,omitempty"`
	Unit     string  `json:"unit"`
	Burst    *uint64 `json:"burst,omitempty"`
}

// FromPolicy maps a policy-resource entry to a bucket spec:
// maxTokens = requests|tokens + burst, tokensPerFill = requests|tokens,
// fillInterval = 1s/1m/1h. It is the one mapping used by the standalone
// config and the cluster controller.
func FromPolicy(e PolicyEntry) (Spec, error) { panic("ratelimit: not implemented") }

// Bucket is the shared, concurrency-safe state of one Spec. A gateway-wide
// bucket is one Bucket shared by the Sets of every route of that gateway.
type Bucket struct{ spec Spec }

// NewBucket returns a full bucket.
func NewBucket(s Spec) *Bucket { return &Bucket{spec: s} }

// Set is every bucket that applies to one route (gateway-wide ones first,
// then the route's own); a request must pass all of them.
type Set struct{ buckets []*Bucket }

// NewSet groups buckets; a nil or empty Set admits everything and sets no headers.
func NewSet(b ...*Bucket) *Set { return &Set{buckets: b} }

// Decision is the outcome of Admit, and the values of the x-ratelimit-* headers
// taken from the most constrained bucket (fewest remaining).
type Decision struct {
	Allowed   bool
	Limit     uint64        // x-ratelimit-limit: maxTokens (base + burst)
	Remaining uint64        // x-ratelimit-remaining, after this request
	Reset     time.Duration // x-ratelimit-reset, rounded to whole seconds on the wire
	Limited   bool          // false when the Set has no buckets: no headers
}

// Admit decides one request at time now: a requests bucket takes 1, a tokens
// bucket needs at least 1 token left and takes nothing yet.
func (s *Set) Admit(now time.Time) Decision { panic("ratelimit: not implemented") }

// Charge takes n LLM tokens (prompt + completion) from every tokens bucket
// after the response, flooring at 0.
func (s *Set) Charge(now time.Time, n uint64) { panic("ratelimit: not implemented") }

// HasTokens reports whether any bucket counts LLM tokens, so that the data
// plane only inspects response bodies where it must.
func (s *Set) HasTokens() bool { panic("ratelimit: not implemented") }

// WriteHeaders sets the x-ratelimit-* headers of d on h (nothing when !d.Limited).
func (d Decision) WriteHeaders(h http.Header) { panic("ratelimit: not implemented") }

// Refuse writes the 429 response: text/plain, body "rate limit exceeded", headers of d.
func (d Decision) Refuse(w http.ResponseWriter) { panic("ratelimit: not implemented") }
