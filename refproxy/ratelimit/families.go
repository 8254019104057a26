package ratelimit

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Family is a set of rate-limit response headers, as one kind of client
// reads them. A route writes the families its rateLimitHeaders policy
// lists (a refproxy extension); without one, x-ratelimit-* alone.
type Family string

// The header families refproxy writes (docs/rate-limits.md has the table).
const (
	// familyXRateLimit is x-ratelimit-{limit,remaining,reset}: the spec's,
	// of the most constrained limit (or the one that refused).
	familyXRateLimit Family = "xRateLimit"
	// familyIETF is draft-ietf-httpapi-ratelimit-headers' structured
	// fields RateLimit-Policy ("requests";q=10;w=60) and RateLimit
	// ("requests";r=9;t=42), one item per kind of limit.
	familyIETF Family = "ietf"
	// familyOpenAI is x-ratelimit-{limit,remaining,reset}-{requests,tokens},
	// resets written as Go durations ("6m0s", "1.5s"), as OpenAI sends them:
	// the time until the limit is back to its ceiling (Window.Full).
	familyOpenAI Family = "openai"
	// familyAnthropic is anthropic-ratelimit-{requests,tokens}-{limit,
	// remaining,reset}, resets as RFC 3339 times (UTC, whole seconds, rounded
	// up) of when the limit is back to its ceiling, as Anthropic sends them.
	familyAnthropic Family = "anthropic"
)

// families lists every Family, in the order a route writes them.
var families = []Family{familyXRateLimit, familyIETF, familyOpenAI, familyAnthropic}

// FamilySet is a set of header families, written in a fixed order
// (x-ratelimit-*, IETF, OpenAI, Anthropic); the zero set means
// x-ratelimit-* alone (the default).
type FamilySet uint8

// Has reports whether f is in s.
func (s FamilySet) Has(f Family) bool {
	if s == 0 {
		return f == familyXRateLimit
	}
	for i, g := range families {
		if g == f {
			return s&(1<<i) != 0
		}
	}
	return false
}

// ParseFamilies checks a rateLimitHeaders list: known families, each at
// most once, at least one.
func ParseFamilies(names []string) (FamilySet, error) {
	if len(names) == 0 {
		return 0, fmt.Errorf("must list at least one of %s", familyNames())
	}
	var set FamilySet
	for _, n := range names {
		i := slices.Index(families, Family(n))
		if i < 0 {
			return 0, fmt.Errorf("unknown header family %q: want one of %s", n, familyNames())
		}
		if set&(1<<i) != 0 {
			return 0, fmt.Errorf("header family %q is listed twice", n)
		}
		set |= 1 << i
	}
	return set, nil
}

func familyNames() string {
	s := make([]string, len(families))
	for i, f := range families {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

// Window is one limit as a response describes it: the most constrained
// limit of one kind (or the first of that kind that refused).
type Window struct {
	Set       bool
	Limit     uint64        // the ceiling: maxTokens (base + burst), or a global limit's
	Period    time.Duration // the limit's window: its fill interval, or a global unit
	Remaining uint64
	Reset     time.Duration // until the next refill
	// Full is the time until the limit is back to its ceiling: the next
	// refill for a fixed window; for a bucket with a burst, as many
	// refills as it takes. 0 when it is full.
	Full    time.Duration
	Refused bool
}

// take makes w describe a limit of its kind when that limit refused (and
// none refused before it) or has fewer remaining.
func (w *Window) take(b *Bucket, remaining uint64, reset time.Duration, refused bool) {
	if w.Refused || w.Set && !refused && remaining >= w.Remaining {
		return
	}
	*w = b.window(remaining, reset, refused)
}

// window is b's Window when it holds remaining and refills in reset.
func (b *Bucket) window(remaining uint64, reset time.Duration, refused bool) Window {
	w := Window{Set: true, Limit: b.spec.MaxTokens, Period: b.spec.FillInterval, Remaining: remaining, Reset: reset, Refused: refused}
	if missing := b.spec.MaxTokens - min(remaining, b.spec.MaxTokens); missing > 0 {
		w.Full = reset
		if per := b.spec.TokensPerFill; per > 0 && missing > per {
			w.Full += time.Duration((missing-1)/per) * b.spec.FillInterval
		}
	}
	return w
}

// Tighter is the window of a and b that a response describes: one that
// refused over one that did not; of two that refused, the one that resets
// later (the request passes only then); else the one with fewer remaining.
func (a Window) Tighter(b Window) Window {
	switch {
	case !b.Set:
		return a
	case !a.Set:
		return b
	case a.Refused != b.Refused:
		if b.Refused {
			return b
		}
		return a
	case a.Refused:
		if b.Reset > a.Reset {
			return b
		}
		return a
	case b.Remaining < a.Remaining:
		return b
	}
	return a
}

// window is d's window of kind k.
func (d *Decision) window(k Kind) *Window {
	if k == Tokens {
		return &d.Tokens
	}
	return &d.Requests
}

// Header names of the families beyond x-ratelimit-*.
const (
	headerPolicy    = "ratelimit-policy"
	headerRateLimit = "ratelimit"
)

// HeaderFunc sets or adds a response header. value is valid only during
// the call (it is a buffer the next value reuses): a header copies it, as
// fasthttp's SetBytesV and AddBytesV do.
type HeaderFunc func(name string, value []byte)

// scratch holds the buffers header values are written in, so that a
// response's rate-limit headers cost no allocation
// (TestWriteFamiliesAllocations).
var scratch = sync.Pool{New: func() any { return new([128]byte) }}

// WriteFamilies writes d's headers in each of d.Families (nothing when
// !d.Limited). now dates Anthropic's resets. peek, when not nil, reads
// what the backend's response already carries: a family's values for a
// kind of limit that the backend already says more strictly (fewer
// remaining) are left as the backend wrote them, and the IETF fields are
// added beside the backend's, so a response never looks more permissive
// than its upstream said.
func (d Decision) WriteFamilies(now time.Time, peek func(name string) string, set, add HeaderFunc) {
	if !d.Limited {
		return
	}
	buf := scratch.Get().(*[128]byte)
	defer scratch.Put(buf)
	b := buf[:0]
	for _, f := range families {
		if !d.Families.Has(f) {
			continue
		}
		switch f {
		case familyXRateLimit:
			if !upstreamStricter(peek, HeaderRemaining, d.Remaining) {
				b = d.eachHeader(b, set)
			}
		case familyIETF:
			if !d.Requests.Set && !d.Tokens.Set {
				continue
			}
			b = d.appendIETF(b[:0], true)
			add(headerPolicy, b)
			b = d.appendIETF(b[:0], false)
			add(headerRateLimit, b)
		case familyOpenAI, familyAnthropic:
			names := &openAINames
			if f == familyAnthropic {
				names = &anthropicNames
			}
			for i, k := range [...]Kind{Requests, Tokens} {
				w, n := d.window(k), &names[i]
				if !w.Set || upstreamStricter(peek, n.remaining, w.Remaining) {
					continue
				}
				set(n.limit, strconv.AppendUint(b[:0], w.Limit, 10))
				set(n.remaining, strconv.AppendUint(b[:0], w.Remaining, 10))
				if f == familyOpenAI {
					set(n.reset, append(b[:0], w.Full.Round(time.Millisecond).String()...))
				} else {
					set(n.reset, ceilSecond(now.Add(w.Full)).AppendFormat(b[:0], time.RFC3339))
				}
			}
		}
	}
}

// Header names written on every response of a limited route.
const (
	HeaderLimit     = "X-Ratelimit-Limit"
	HeaderRemaining = "X-Ratelimit-Remaining"
	HeaderReset     = "X-Ratelimit-Reset"
)

// EachHeader calls set with each x-ratelimit-* header of d (nothing when
// !d.Limited); x-ratelimit-reset is in whole seconds, truncated (so it may be 0).
func (d Decision) EachHeader(set HeaderFunc) {
	if !d.Limited {
		return
	}
	buf := scratch.Get().(*[128]byte)
	d.eachHeader(buf[:0], set)
	scratch.Put(buf)
}

// eachHeader is EachHeader for a limited d, its values written in b.
func (d Decision) eachHeader(b []byte, set HeaderFunc) []byte {
	if d.LimitHeader != "" {
		b = append(b[:0], d.LimitHeader...)
	} else {
		b = strconv.AppendUint(b[:0], d.Limit, 10)
	}
	set(HeaderLimit, b)
	b = strconv.AppendUint(b[:0], d.Remaining, 10)
	set(HeaderRemaining, b)
	b = strconv.AppendInt(b[:0], ResetSeconds(d.Reset), 10)
	set(HeaderReset, b)
	return b
}

// ResetSeconds is a time until a refill as every header and trace reason
// of refproxy writes it: whole seconds, rounded down (the reference's
// as_secs), so 0 for a refill under a second away.
func ResetSeconds(d time.Duration) int64 { return int64(d / time.Second) }

// headerRetryAfter is written on a 429 of a limited route: the seconds
// until the denying limit refills, as x-ratelimit-reset says them.
const headerRetryAfter = "Retry-After"

// RetryAfter calls set with Retry-After for a refused decision d (nothing
// when !d.Limited): whole seconds, the value of x-ratelimit-reset.
func (d Decision) RetryAfter(set HeaderFunc) {
	if !d.Limited {
		return
	}
	buf := scratch.Get().(*[128]byte)
	set(headerRetryAfter, strconv.AppendInt(buf[:0], ResetSeconds(d.Reset), 10))
	scratch.Put(buf)
}

// providerNames are a provider family's header names for one kind of
// limit; the arrays are indexed requests, tokens.
type providerNames struct{ limit, remaining, reset string }

var (
	openAINames = [2]providerNames{
		{"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"},
		{"x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"},
	}
	anthropicNames = [2]providerNames{
		{"anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset"},
		{"anthropic-ratelimit-tokens-limit", "anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset"},
	}
)

// ceilSecond is t in UTC, rounded up to a whole second: a reset written
// in seconds is never earlier than the refill.
func ceilSecond(t time.Time) time.Time {
	t = t.UTC()
	if s := t.Truncate(time.Second); s.Before(t) {
		return s.Add(time.Second)
	}
	return t
}

// upstreamStricter reports whether the backend's response already says
// fewer remaining in the header named than ours.
func upstreamStricter(peek func(string) string, name string, ours uint64) bool {
	if peek == nil {
		return false
	}
	v := peek(name)
	if v == "" {
		return false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
	return err == nil && n < ours
}

// appendIETF appends the value of RateLimit-Policy (policy) or of
// RateLimit: a structured-field List of an item per kind of limit,
// "requests" and "tokens" (with qu="tokens": LLM tokens have no registered
// quota unit), as RFC 9651 serializes it (TestIETFFieldsAsHTTPSFVWrites
// them, FuzzIETFFields holds them to github.com/dunglas/httpsfv). The item
// is a String with no character to escape; its parameters are Integers,
// the counts clamped to 15 digits, the seconds within them (a Duration is
// under 10^10 s). A field the backend sent stays: WriteFamilies adds these
// as lines of their own, which a List allows.
func (d *Decision) appendIETF(b []byte, policy bool) []byte {
	first := true
	for _, k := range [...]Kind{Requests, Tokens} {
		w := d.window(k)
		if !w.Set {
			continue
		}
		if !first {
			b = append(b, ", "...)
		}
		first = false
		b = append(b, '"')
		b = append(b, k...)
		b = append(b, '"')
		if policy {
			b = append(b, ";q="...)
			b = strconv.AppendInt(b, clampInt(w.Limit), 10)
			if k == Tokens {
				b = append(b, `;qu="tokens"`...)
			}
			b = append(b, ";w="...)
			b = strconv.AppendInt(b, int64(w.Period/time.Second), 10)
		} else {
			b = append(b, ";r="...)
			b = strconv.AppendInt(b, clampInt(w.Remaining), 10)
			b = append(b, ";t="...)
			b = strconv.AppendInt(b, ResetSeconds(w.Reset), 10)
		}
	}
	return b
}

// clampInt is n as a structured-field Integer (at most 15 digits).
func clampInt(n uint64) int64 {
	const maxInt = 999_999_999_999_999
	if n > maxInt {
		return maxInt
	}
	return int64(n)
}
