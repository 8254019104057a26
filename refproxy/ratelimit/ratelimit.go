// Package ratelimit implements local rate limiting (spec parts 2.3, 7, 8):
// token buckets for requests and LLM tokens, the mapping from the policy
// resource's requests|tokens/unit/burst form to buckets, and the
// x-ratelimit-* response headers.
//
// A bucket starts full at MaxTokens and gains TokensPerFill every
// FillInterval in discrete steps, capped at MaxTokens. Refills are computed
// lazily from the whole intervals elapsed since the last fill, so there are
// no timers and an idle bucket costs nothing. The refill phase is anchored
// at the first time the bucket is used.
//
// Time is always passed in by the caller (Admit(now), Charge(now, n)), which
// is how tests inject a clock.
package ratelimit

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Kind is what a bucket counts.
type Kind string

// Bucket kinds of the standalone config (`type:`); requests is the default.
const (
	Requests Kind = "requests"
	Tokens   Kind = "tokens"
)

// RefusedBody is the body of a 429 answered by the local rate limiter, and
// RefusedContentType its Content-Type.
const (
	RefusedBody        = "rate limit exceeded"
	RefusedContentType = "text/plain"
)

// Spec configures one bucket: it starts full at MaxTokens and gains
// TokensPerFill every FillInterval, in discrete steps, capped at MaxTokens.
type Spec struct {
	MaxTokens     uint64
	TokensPerFill uint64
	FillInterval  time.Duration
	Type          Kind
	// Shadow: the bucket is evaluated and counted but never refuses; a
	// request it has nothing left for "would have been refused" (the
	// trace says so). Its headers are written only with ShadowHeaders.
	Shadow, ShadowHeaders bool
}

// Validate reports what is wrong with s, naming the field as the standalone
// config spells it (maxTokens, tokensPerFill, fillInterval, type). An empty
// Type means requests.
func (s Spec) Validate() error {
	switch {
	case s.MaxTokens < 1:
		return &FieldError{Field: "maxTokens", Msg: "must be >= 1, got 0"}
	case s.TokensPerFill < 1:
		return &FieldError{Field: "tokensPerFill", Msg: "must be >= 1, got 0"}
	case s.FillInterval <= 0:
		return &FieldError{Field: "fillInterval", Msg: fmt.Sprintf("must be a positive duration, got %s", s.FillInterval)}
	}
	switch s.Type {
	case "", Requests, Tokens:
	default:
		return &FieldError{Field: "type", Msg: fmt.Sprintf("must be %q or %q, got %q", Requests, Tokens, s.Type)}
	}
	return nil
}

// PolicyEntry is one spec.traffic.rateLimit.local[] entry of the policy resource.
type PolicyEntry struct {
	Requests *uint64 `json:"requests,omitempty"`
	Tokens   *uint64 `json:"tokens,omitempty"`
	Unit     string  `json:"unit"`
	Burst    *uint64 `json:"burst,omitempty"`
}

// FieldError is a validation error about one field of a PolicyEntry or Spec.
// Callers prefix it with where the entry came from (file, line, list index).
type FieldError struct {
	Field string // as spelled in the resource or config: requests, unit, maxTokens, ...
	Msg   string
}

// Error renders the error as "field: message".
func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Units of the policy resource and the fill interval each maps to.
var units = map[string]time.Duration{
	"Seconds": time.Second,
	"Minutes": time.Minute,
	"Hours":   time.Hour,
}

// FromPolicy maps a policy-resource entry to a bucket spec:
// maxTokens = requests|tokens + burst, tokensPerFill = requests|tokens,
// fillInterval = 1s/1m/1h. It is the one mapping used by the standalone
// config and the cluster controller.
//
// The formula is the reference implementation's for both kinds: its
// documentation says burst is meant for request limits, but a burst given on
// a tokens entry still raises that bucket's ceiling, and a suite that checks
// real proxies must expect what they do.
func FromPolicy(e PolicyEntry) (Spec, error) {
	var (
		base  uint64
		field string
		kind  Kind
	)
	switch {
	case e.Requests != nil && e.Tokens != nil:
		return Spec{}, &FieldError{Field: "requests", Msg: "exactly one of requests or tokens must be set, got both"}
	case e.Requests != nil:
		base, field, kind = *e.Requests, "requests", Requests
	case e.Tokens != nil:
		base, field, kind = *e.Tokens, "tokens", Tokens
	default:
		return Spec{}, &FieldError{Field: "requests", Msg: "exactly one of requests or tokens must be set, got neither"}
	}
	if base < 1 {
		return Spec{}, &FieldError{Field: field, Msg: "must be >= 1, got 0"}
	}
	if e.Unit == "" {
		return Spec{}, &FieldError{Field: "unit", Msg: "is required (Seconds, Minutes or Hours)"}
	}
	interval, ok := units[e.Unit]
	if !ok {
		return Spec{}, &FieldError{Field: "unit", Msg: fmt.Sprintf("must be Seconds, Minutes or Hours, got %q", e.Unit)}
	}
	var burst uint64
	if e.Burst != nil {
		burst = *e.Burst
	}
	if burst > math.MaxUint64-base {
		return Spec{}, &FieldError{Field: "burst", Msg: fmt.Sprintf("%s + burst overflows: %d + %d", field, base, burst)}
	}
	return Spec{MaxTokens: base + burst, TokensPerFill: base, FillInterval: interval, Type: kind}, nil
}

// epoch is the origin of the bucket clock. Subtracting it from now uses the
// monotonic clock when now carries one (time.Now), and wall time otherwise
// (injected test clocks).
var epoch = time.Now()

// nextID orders buckets for locking, so that Sets sharing buckets lock them
// in the same order and never deadlock.
var nextID atomic.Uint64

// Bucket is the shared, concurrency-safe state of one Spec. A gateway-wide
// bucket is one Bucket shared by the Sets of every route of that gateway.
type Bucket struct {
	spec     Spec
	id       uint64
	interval int64 // FillInterval in ns; <= 0 means the bucket never refills

	mu      sync.Mutex
	tokens  uint64
	last    int64 // time of the last fill, ns since epoch
	started bool  // last is set; the refill phase is anchored at first use

	// keyed and key: the keyed entry and key of a per-key bucket; prev
	// and next link it in its entry's LRU list (under keyed.mu).
	keyed      *Keyed
	key        string
	prev, next *Bucket
}

// NewBucket returns a full bucket. An invalid Spec (see Validate) does not
// panic: a zero FillInterval or TokensPerFill never refills, a zero
// MaxTokens refuses all.
func NewBucket(s Spec) *Bucket {
	if s.Type == "" {
		s.Type = Requests
	}
	return &Bucket{spec: s, id: nextID.Add(1), interval: int64(s.FillInterval), tokens: s.MaxTokens}
}

// Spec returns the configuration of b.
func (b *Bucket) Spec() Spec { return b.spec }

// Remaining returns the tokens left at time now (after any due refill).
func (b *Bucket) Remaining(now time.Time) uint64 {
	t := now.Sub(epoch).Nanoseconds()
	b.mu.Lock()
	b.refill(t)
	n := b.tokens
	b.mu.Unlock()
	return n
}

// refill adds the fills due at t. b.mu must be held.
func (b *Bucket) refill(t int64) {
	if !b.started {
		b.started, b.last = true, t
		return
	}
	if b.interval <= 0 || b.spec.TokensPerFill == 0 || t-b.last < b.interval {
		return // also covers a clock going backwards
	}
	k := uint64((t - b.last) / b.interval)
	b.last += int64(k) * b.interval
	room := b.spec.MaxTokens - min(b.tokens, b.spec.MaxTokens)
	if k >= room/b.spec.TokensPerFill+1 || k*b.spec.TokensPerFill >= room {
		b.tokens = b.spec.MaxTokens
		return
	}
	b.tokens += k * b.spec.TokensPerFill
}

// untilRefill is the time from t to the next fill. b.mu must be held, after refill(t).
func (b *Bucket) untilRefill(t int64) time.Duration {
	if b.interval <= 0 {
		return 0
	}
	d := b.last + b.interval - t
	if d < 0 {
		d = 0
	}
	return time.Duration(d)
}

// Set is every limit that applies to one route (gateway-wide ones first,
// then the route's own); a request must pass all of them. A limit is a
// bucket, or a keyed entry whose bucket depends on the request (Hold).
type Set struct {
	buckets   []*Bucket // in lock order (by id), without duplicates
	keyed     []*Keyed
	hasTokens bool
}

// NewKeyedSet groups buckets and keyed entries (nil and repeated ones dropped).
func NewKeyedSet(b []*Bucket, keyed []*Keyed) *Set {
	s := &Set{}
	for _, x := range b {
		if x == nil || slices.Contains(s.buckets, x) {
			continue
		}
		s.buckets = append(s.buckets, x)
		s.hasTokens = s.hasTokens || x.spec.Type == Tokens
	}
	for _, k := range keyed {
		if k == nil || slices.Contains(s.keyed, k) {
			continue
		}
		s.keyed = append(s.keyed, k)
		s.hasTokens = s.hasTokens || k.spec.Type == Tokens
	}
	slices.SortFunc(s.buckets, byID)
	return s
}

func byID(a, b *Bucket) int {
	switch {
	case a.id < b.id:
		return -1
	case a.id > b.id:
		return 1
	}
	return 0
}

// Buckets returns the plain buckets of s, in no particular order. The
// slice must not be modified.
func (s *Set) Buckets() []*Bucket {
	if s == nil {
		return nil
	}
	return s.buckets
}

// Keyed returns the keyed entries of s. The slice must not be modified.
func (s *Set) Keyed() []*Keyed {
	if s == nil {
		return nil
	}
	return s.keyed
}

// IsKeyed reports whether some limit of s has a bucket per key, so that
// the caller must give Hold what the key expressions read.
func (s *Set) IsKeyed() bool { return s != nil && len(s.keyed) > 0 }

// heldInline is how many buckets a Held keeps without allocating.
const heldInline = 8

// Held is the buckets of one request: a Set's plain buckets and, of each
// keyed entry, the bucket of the request's key. It is what admits the
// request and, after the response, is charged its tokens. Up to
// heldInline buckets it allocates nothing.
type Held struct {
	set    *Set
	n      int
	inline [heldInline]*Bucket
	more   []*Bucket
}

// Hold resolves the buckets of one request (act: what key expressions
// read, as cel.Program.Eval takes it; nil gives every keyed entry's
// shared bucket).
func (s *Set) Hold(act any) Held {
	h := Held{set: s}
	if s == nil || len(s.keyed) == 0 {
		return h
	}
	if n := len(s.buckets) + len(s.keyed); n > heldInline {
		h.more = s.resolve(make([]*Bucket, 0, n), act)
		h.n = len(h.more)
		return h
	}
	h.n = len(s.resolve(h.inline[:0], act))
	return h
}

// resolve appends the buckets of one request to bs, in lock order.
func (s *Set) resolve(bs []*Bucket, act any) []*Bucket {
	bs = append(bs, s.buckets...)
	for _, k := range s.keyed {
		b := k.For(act)
		if !slices.Contains(bs, b) {
			bs = append(bs, b)
		}
	}
	// Insertion sort by id (lock order): few buckets, no allocation.
	for i := 1; i < len(bs); i++ {
		for j := i; j > 0 && bs[j].id < bs[j-1].id; j-- {
			bs[j], bs[j-1] = bs[j-1], bs[j]
		}
	}
	return bs
}

// Set is the Set h was held from.
func (h *Held) Set() *Set { return h.set }

// Buckets are the buckets of h, in lock order.
func (h *Held) Buckets() []*Bucket {
	switch {
	case h.set == nil:
		return nil
	case len(h.set.keyed) == 0:
		return h.set.buckets
	case h.more != nil:
		return h.more
	}
	return h.inline[:h.n]
}

// Decision is the outcome of Admit, and the values of the x-ratelimit-* headers
// taken from the most constrained bucket (fewest remaining).
type Decision struct {
	Allowed   bool
	Limit     uint64        // x-ratelimit-limit: maxTokens (base + burst)
	Remaining uint64        // x-ratelimit-remaining, after this request
	Reset     time.Duration // x-ratelimit-reset, rounded to whole seconds on the wire
	Limited   bool          // false when the Set has no buckets: no headers
	// LimitHeader, when set, is x-ratelimit-limit as a global limit writes
	// it, with windows ("10, 10;w=60"); otherwise Limit is written.
	LimitHeader string
	// Requests and Tokens are the most constrained limit of each kind
	// (or the first of that kind that refused), for the header families
	// that describe each kind apart (WriteFamilies).
	Requests, Tokens Window
	// Families are the header families a response writes (WriteFamilies);
	// zero: x-ratelimit-* only. The route sets them, not the buckets.
	Families FamilySet
}

// Tighter returns the decision whose headers a response carries: one
// that refused over one that allowed (the headers of a 429 describe the
// limit that denied), else the one with fewer remaining; a decision
// without headers never wins.
func Tighter(a, b Decision) Decision {
	d := a
	switch {
	case !b.Limited:
		return a
	case !a.Limited:
		return b
	case a.Allowed != b.Allowed:
		if !b.Allowed {
			d = b
		}
	case b.Remaining < a.Remaining:
		d = b
	}
	d.Requests = a.Requests.Tighter(b.Requests)
	d.Tokens = a.Tokens.Tighter(b.Tokens)
	return d
}

// Admit decides one request at time now, for a Set without keyed
// entries (or giving their shared buckets): Hold(nil).Admit(now).
func (s *Set) Admit(now time.Time) Decision {
	h := s.Hold(nil)
	return h.Admit(now)
}

// Admit decides one request at time now: a requests bucket takes 1, a
// tokens bucket needs at least 1 token left and takes nothing yet. An
// allowed request's headers come from the bucket with the fewest
// remaining (on a tie, the one created first: gateway-wide buckets are
// created before route ones); a refused one's from the first bucket that
// refused it, so that they describe the limit that denied.
//
// All buckets are locked together (in a global order), checked, and only
// then taken from, so a refused request consumes nothing anywhere and
// concurrent requests never over-admit.
func (h *Held) Admit(now time.Time) Decision { return admit(h.Buckets(), now, nil) }

// BucketState is one bucket as a decision left it.
type BucketState struct {
	Bucket *Bucket
	// Remaining is what the bucket holds after the request, Reset the
	// time to its next refill.
	Remaining uint64
	Reset     time.Duration
	// Refused: the bucket had nothing left for the request (a shadow
	// bucket's request was let through: it would have been refused).
	Refused bool
}

// AdmitExplained is Admit that also tells how it left each bucket, taken
// under the same locks, for the reasons of a traced request.
func (h *Held) AdmitExplained(now time.Time) (Decision, []BucketState) {
	bs := h.Buckets()
	if len(bs) == 0 {
		return Decision{Allowed: true}, nil
	}
	states := make([]BucketState, 0, len(bs))
	d := admit(bs, now, &states)
	return d, states
}

// AdmitExplained is Hold(nil).AdmitExplained(now).
func (s *Set) AdmitExplained(now time.Time) (Decision, []BucketState) {
	h := s.Hold(nil)
	return h.AdmitExplained(now)
}

// admit is Admit over buckets in lock order, noting each bucket's state
// in states when it is not nil.
func admit(buckets []*Bucket, now time.Time, states *[]BucketState) Decision {
	if len(buckets) == 0 {
		return Decision{Allowed: true}
	}
	t := now.Sub(epoch).Nanoseconds()
	if len(buckets) == 1 {
		return buckets[0].admit(t, states)
	}
	for _, b := range buckets {
		b.mu.Lock()
		b.refill(t)
	}
	denier := -1
	for i, b := range buckets {
		if b.tokens < 1 && !b.spec.Shadow {
			denier = i
			break
		}
	}
	allowed := denier < 0
	d := Decision{Allowed: allowed}
	for i, b := range buckets {
		refused := b.tokens < 1 // a shadow bucket: would have refused
		if allowed && b.spec.Type == Requests && !refused {
			b.tokens--
		}
		reset := b.untilRefill(t)
		if b.headers() {
			if i == denier || allowed && (!d.Limited || b.tokens < d.Remaining) {
				d.Limit, d.Remaining, d.Reset = b.spec.MaxTokens, b.tokens, reset
			}
			d.Limited = true
			d.window(b.spec.Type).take(b, b.tokens, reset, refused && !b.spec.Shadow)
		}
		if states != nil {
			*states = append(*states, BucketState{Bucket: b, Remaining: b.tokens, Reset: reset, Refused: refused})
		}
	}
	for _, b := range buckets {
		b.mu.Unlock()
	}
	return d
}

// admit is Admit for a Set of one bucket: the common case, kept short.
func (b *Bucket) admit(t int64, states *[]BucketState) Decision {
	b.mu.Lock()
	b.refill(t)
	left := b.tokens >= 1
	if left && b.spec.Type == Requests {
		b.tokens--
	}
	allowed := left || b.spec.Shadow
	d := Decision{Allowed: allowed, Limit: b.spec.MaxTokens, Remaining: b.tokens, Reset: b.untilRefill(t), Limited: b.headers()}
	b.mu.Unlock()
	if states != nil {
		// As the lock left it: another request may take a token at once.
		*states = append(*states, BucketState{Bucket: b, Remaining: d.Remaining, Reset: d.Reset, Refused: !left})
	}
	if d.Limited {
		*d.window(b.spec.Type) = b.window(d.Remaining, d.Reset, !allowed)
	} else {
		d.Limit, d.Remaining, d.Reset = 0, 0, 0
	}
	return d
}

// headers reports whether b's state goes into the rate-limit headers: a
// shadow bucket's only with ShadowHeaders.
func (b *Bucket) headers() bool { return !b.spec.Shadow || b.spec.ShadowHeaders }

// Reset returns the time from now to the bucket's next refill.
func (b *Bucket) Reset(now time.Time) time.Duration {
	t := now.Sub(epoch).Nanoseconds()
	b.mu.Lock()
	b.refill(t)
	d := b.untilRefill(t)
	b.mu.Unlock()
	return d
}

// Charge is Hold(nil).Charge(now, n), for a Set without keyed entries.
func (s *Set) Charge(now time.Time, n uint64) {
	h := s.Hold(nil)
	h.Charge(now, n)
}

// Charge takes n LLM tokens (prompt + completion) from every tokens bucket
// of h after the response, flooring at 0: overage is not carried into the
// next window.
func (h *Held) Charge(now time.Time, n uint64) {
	if !h.set.HasTokens() || n == 0 {
		return
	}
	t := now.Sub(epoch).Nanoseconds()
	for _, b := range h.Buckets() {
		if b.spec.Type != Tokens {
			continue
		}
		b.mu.Lock()
		b.refill(t)
		b.tokens -= min(n, b.tokens)
		b.mu.Unlock()
	}
}

// Now is the headers' values of h at time now without taking anything:
// the bucket with the fewest remaining. It is how a response whose token
// charge is known before its headers go out shows that charge.
func (h *Held) Now(now time.Time) Decision {
	bs := h.Buckets()
	if len(bs) == 0 {
		return Decision{Allowed: true}
	}
	t := now.Sub(epoch).Nanoseconds()
	d := Decision{Allowed: true}
	for _, b := range bs {
		if !b.headers() {
			continue
		}
		b.mu.Lock()
		b.refill(t)
		reset := b.untilRefill(t)
		if !d.Limited || b.tokens < d.Remaining {
			d.Limit, d.Remaining, d.Reset = b.spec.MaxTokens, b.tokens, reset
		}
		d.Limited = true
		d.window(b.spec.Type).take(b, b.tokens, reset, false)
		b.mu.Unlock()
	}
	return d
}

// HasTokens reports whether any bucket counts LLM tokens, so that the data
// plane only inspects response bodies where it must.
func (s *Set) HasTokens() bool { return s != nil && s.hasTokens }
