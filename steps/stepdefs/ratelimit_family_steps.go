package stepdefs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cucumber/godog"
	"github.com/dunglas/httpsfv"

	"github.com/gwdiag/gwdiag/steps/mock"
)

// The header families of rate limits beyond the spec's x-ratelimit-*
// (docs/rate-limits.md has the table and the source of each): the IETF
// draft's structured fields, OpenAI's and Anthropic's headers. Each is read
// strictly: a value of the wrong form fails the step, as a client that
// parses it would fail.
func registerRateLimitFamilySteps(sc *godog.ScenarioContext) {
	step(sc, `^response (\d+) has the IETF (request|token) policy of (\d+) per (\d+) seconds with (\d+) remaining, reset (\d+) to (\d+) seconds$`, (*state).nthResponseIETFPolicy)
	step(sc, `^response (\d+) has the (OpenAI|Anthropic) (request|token) headers limit (\d+), remaining (\d+), reset (\d+) to (\d+) seconds$`, (*state).nthResponseProviderHeaders)
	step(sc, `^I send a chat completion using (\d+) tokens whose backend answers with the headers:$`, (*state).sendChatCompletionBackendHeaders)
}

// sendChatCompletionBackendHeaders sends a chat completion whose backend
// (the suite's mock) adds the table's headers (name | value) to its
// answer: a provider's own rate-limit headers.
func (s *state) sendChatCompletionBackendHeaders(ctx context.Context, n int, table *godog.Table) error {
	h := http.Header{}
	for _, row := range table.Rows {
		if len(row.Cells) != 2 {
			return fmt.Errorf("headers table: want rows of name | value, got %d cells", len(row.Cells))
		}
		h.Add(mock.HeaderResponseHeader, row.Cells[0].Value+": "+row.Cells[1].Value)
	}
	_, err := s.chatWith(ctx, n, noStream, h)
	return err
}

// ietfPolicy is one quota policy of RateLimit-Policy with its state in
// RateLimit.
type ietfPolicy struct {
	name       string
	quota      int64
	unit       string // qu; "" when absent (the draft's default, "request")
	window     int64  // w; -1 when absent
	remaining  int64  // r
	reset      int64  // t; -1 when absent
	hasCurrent bool   // RateLimit has an item of this name
}

// parseIETF reads the RateLimit-Policy and RateLimit fields of h as the
// draft defines them (draft-ietf-httpapi-ratelimit-headers): Lists of
// Items whose value is a Token or String naming the policy; q (quota) an
// Integer >= 0, required; w (window) an Integer > 0; qu (quota unit) a
// String; r (remaining) an Integer >= 0, required; t (reset) an Integer
// >= 0. A field of another form is an error, as is a name given twice.
func parseIETF(h http.Header) ([]ietfPolicy, error) {
	policies, err := sfvItems(h, "RateLimit-Policy")
	if err != nil {
		return nil, err
	}
	current, err := sfvItems(h, "RateLimit")
	if err != nil {
		return nil, err
	}
	var out []ietfPolicy
	index := map[string]int{}
	for _, it := range policies {
		name, err := policyName(it, "RateLimit-Policy")
		if err != nil {
			return nil, err
		}
		if _, dup := index[name]; dup {
			return nil, fmt.Errorf("RateLimit-Policy names %q twice", name)
		}
		p := ietfPolicy{name: name, window: -1, reset: -1}
		if p.quota, err = intParam(it, "RateLimit-Policy", name, "q", true, 0); err != nil {
			return nil, err
		}
		if p.window, err = intParam(it, "RateLimit-Policy", name, "w", false, 1); err != nil {
			return nil, err
		}
		if v, ok := it.Params.Get("qu"); ok {
			s, isString := v.(string)
			if !isString {
				return nil, fmt.Errorf("RateLimit-Policy %q: qu is %T, want a String", name, v)
			}
			p.unit = s
		}
		index[name] = len(out)
		out = append(out, p)
	}
	seen := map[string]bool{}
	for _, it := range current {
		name, err := policyName(it, "RateLimit")
		if err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, fmt.Errorf("RateLimit names %q twice", name)
		}
		seen[name] = true
		i, ok := index[name]
		if !ok {
			return nil, fmt.Errorf("RateLimit names %q, which RateLimit-Policy does not", name)
		}
		p := &out[i]
		p.hasCurrent = true
		if p.remaining, err = intParam(it, "RateLimit", name, "r", true, 0); err != nil {
			return nil, err
		}
		if p.reset, err = intParam(it, "RateLimit", name, "t", false, 0); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sfvItems is the field named as a structured List of Items (none when
// the response has no such field).
func sfvItems(h http.Header, name string) ([]httpsfv.Item, error) {
	vs := h.Values(name)
	if len(vs) == 0 {
		return nil, nil
	}
	l, err := httpsfv.UnmarshalList(vs)
	if err != nil {
		return nil, fmt.Errorf("%s %q is not a structured-field List: %w", name, strings.Join(vs, ", "), err)
	}
	items := make([]httpsfv.Item, 0, len(l))
	for _, m := range l {
		it, ok := m.(httpsfv.Item)
		if !ok {
			return nil, fmt.Errorf("%s %q has an inner list, want Items", name, strings.Join(vs, ", "))
		}
		items = append(items, it)
	}
	return items, nil
}

func policyName(it httpsfv.Item, field string) (string, error) {
	switch v := it.Value.(type) {
	case string:
		return v, nil
	case httpsfv.Token:
		return string(v), nil
	}
	return "", fmt.Errorf("%s has an item named by %T %v, want a Token or a String", field, it.Value, it.Value)
}

// intParam is the Integer parameter key of it, at least min; -1 when it
// is absent and not required.
func intParam(it httpsfv.Item, field, name, key string, required bool, min int64) (int64, error) {
	v, ok := it.Params.Get(key)
	if !ok {
		if required {
			return 0, fmt.Errorf("%s %q has no %s", field, name, key)
		}
		return -1, nil
	}
	n, isInt := v.(int64)
	if !isInt {
		return 0, fmt.Errorf("%s %q: %s is %T %v, want an Integer", field, name, key, v, v)
	}
	if n < min {
		return 0, fmt.Errorf("%s %q: %s is %d, want at least %d", field, name, key, n, min)
	}
	return n, nil
}

// nthResponseIETFPolicy: response i describes, in the IETF fields, one
// policy of quota q per w seconds of that kind (qu "tokens" for LLM
// tokens, absent or "request" for requests), with r remaining and a reset
// from lo to hi seconds; a 429 that policy refused carries a Retry-After
// no earlier than that reset.
func (s *state) nthResponseIETFPolicy(ctx context.Context, i int, kind string, q, w, r, lo, hi int) error {
	resp, err := s.nthResponse(i)
	if err != nil {
		return err
	}
	ps, err := parseIETF(resp.header)
	if err != nil {
		return fmt.Errorf("response %d: %w", i, err)
	}
	wantUnit := func(u string) bool {
		if kind == "token" {
			return u == "tokens"
		}
		return u == "" || u == "request"
	}
	var match []ietfPolicy
	var seen []string
	for _, p := range ps {
		seen = append(seen, fmt.Sprintf("%q q=%d qu=%q w=%d", p.name, p.quota, p.unit, p.window))
		if p.quota == int64(q) && p.window == int64(w) && wantUnit(p.unit) {
			match = append(match, p)
		}
	}
	switch len(match) {
	case 0:
		return fmt.Errorf("response %d: no IETF %s policy of %d per %d seconds; RateLimit-Policy has %s", i, kind, q, w, orNone(seen))
	case 1:
	default:
		return fmt.Errorf("response %d: %d IETF %s policies of %d per %d seconds, want one", i, len(match), kind, q, w)
	}
	p := match[0]
	var errs []error
	switch {
	case !p.hasCurrent:
		errs = append(errs, fmt.Errorf("RateLimit has no item %q", p.name))
	default:
		if p.remaining != int64(r) {
			errs = append(errs, fmt.Errorf("policy %q: r=%d, want %d", p.name, p.remaining, r))
		}
		if p.reset < int64(lo) || p.reset > int64(hi) {
			errs = append(errs, fmt.Errorf("policy %q: t=%d, want %d to %d", p.name, p.reset, lo, hi))
		}
	}
	if resp.status == http.StatusTooManyRequests && p.hasCurrent && p.remaining == 0 {
		// The draft: a client told to retry is not told to do so before
		// the quota comes back.
		ra := resp.header.Get("Retry-After")
		if n, err := strconv.ParseInt(ra, 10, 64); err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("429 of policy %q: Retry-After %q, want whole seconds", p.name, ra))
		} else if n < p.reset {
			errs = append(errs, fmt.Errorf("429 of policy %q: Retry-After %d is earlier than its reset t=%d", p.name, n, p.reset))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("response %d: %w", i, err)
	}
	return nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// providerHeaders names the three headers of a provider family for a kind
// of limit: OpenAI's x-ratelimit-{limit,remaining,reset}-{requests,tokens},
// Anthropic's anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}.
func providerHeaders(family, kind string) (limit, remaining, reset string) {
	k := kind + "s"
	if family == "OpenAI" {
		return "x-ratelimit-limit-" + k, "x-ratelimit-remaining-" + k, "x-ratelimit-reset-" + k
	}
	p := "anthropic-ratelimit-" + k + "-"
	return p + "limit", p + "remaining", p + "reset"
}

// nthResponseProviderHeaders: response i has the family's three headers
// for the kind, each one value of its documented form: the limit and
// remaining whole numbers, remaining not above the limit; the reset
// (OpenAI: a duration such as "6m0s" or "12ms"; Anthropic: an RFC 3339
// time, read against when the request went and its answer came, to the
// second) from lo to hi seconds away.
func (s *state) nthResponseProviderHeaders(ctx context.Context, i int, family, kind string, limit, remaining, lo, hi int) error {
	resp, err := s.nthResponse(i)
	if err != nil {
		return err
	}
	ln, rn, tn := providerHeaders(family, kind)
	var errs []error
	one := func(name string) (string, bool) {
		vs := resp.header.Values(name)
		if len(vs) != 1 {
			errs = append(errs, fmt.Errorf("%s: %d values %q, want one", name, len(vs), vs))
			return "", false
		}
		return vs[0], true
	}
	whole := func(name string, want int) {
		v, ok := one(name)
		if !ok {
			return
		}
		n, err := strconv.ParseUint(v, 10, 64)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %q is not a whole number", name, v))
		case n != uint64(want):
			errs = append(errs, fmt.Errorf("%s: got %d, want %d", name, n, want))
		}
	}
	whole(ln, limit)
	whole(rn, remaining)
	if v, ok := one(tn); ok {
		if family == "OpenAI" {
			d, err := time.ParseDuration(v)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("%s: %q is not a duration such as 6m0s or 12ms", tn, v))
			case d < 0:
				errs = append(errs, fmt.Errorf("%s: %q is negative", tn, v))
			case d < time.Duration(lo)*time.Second || d > time.Duration(hi)*time.Second:
				errs = append(errs, fmt.Errorf("%s: %s, want %d to %d seconds", tn, v, lo, hi))
			}
		} else {
			at, err := time.Parse(time.RFC3339, v)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("%s: %q is not an RFC 3339 time", tn, v))
			case at.Before(resp.sent.Add(time.Duration(lo-1) * time.Second)):
				errs = append(errs, fmt.Errorf("%s: %s is %s after the request was sent, want at least %d seconds", tn, v, at.Sub(resp.sent).Round(time.Millisecond), lo))
			case at.After(resp.at.Add(time.Duration(hi+1) * time.Second)):
				errs = append(errs, fmt.Errorf("%s: %s is %s after the response came, want at most %d seconds", tn, v, at.Sub(resp.at).Round(time.Millisecond), hi))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("response %d: %w", i, err)
	}
	return nil
}
