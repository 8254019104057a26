package stepdefs

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/steps/targets"
)

// TestWindowEnded: a 2xx where a 429 was wanted is no verdict only when
// every limit of the scenario may have reset under its requests; a day's
// limit beside a second's keeps the verdict (the spec-minimal proxy, with
// no global limits, admitted the third request of "Where several global
// limits refuse" across a second's boundary: that is its failure).
func TestWindowEnded(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 900e6, time.UTC)
	responses := func(span time.Duration) []*response {
		return []*response{{status: 200, sent: at, at: at.Add(10 * time.Millisecond)}, {status: 200, sent: at.Add(span - 10*time.Millisecond), at: at.Add(span)}}
	}
	route := func(local []time.Duration, global ...string) targets.Setup {
		r := targets.Route{Name: "r"}
		for _, u := range local {
			r.Limits = append(r.Limits, targets.Limit{Kind: targets.LimitRequests, Amount: 1, Unit: u})
		}
		for _, u := range global {
			r.Global = append(r.Global, targets.GlobalLimit{Kind: targets.LimitRequests, Amount: 2, Unit: u})
		}
		return targets.Setup{Listeners: []targets.Listener{{Name: "l", Routes: []targets.Route{r}}}}
	}
	tests := []struct {
		name  string
		setup targets.Setup
		span  time.Duration
		want  bool
	}{
		{"a second's local limit, 1.5 s", route([]time.Duration{time.Second}), 1500 * time.Millisecond, true},
		{"a second's local limit, 0.5 s", route([]time.Duration{time.Second}), 500 * time.Millisecond, false},
		{"a second's and an hour's local limits, 1.5 s", route([]time.Duration{time.Second, time.Hour}), 1500 * time.Millisecond, false},
		{"a second's global limit across a second's boundary", route(nil, "second"), 200 * time.Millisecond, true},
		{"a second's global limit within a second", route(nil, "second"), 50 * time.Millisecond, false},
		{"a second's and a day's global limits across a second's boundary", route(nil, "second", "day"), 200 * time.Millisecond, false},
		{"a second's local limit and a day's global limit, 1.5 s", route([]time.Duration{time.Second}, "day"), 1500 * time.Millisecond, false},
		{"no limit", route(nil), 5 * time.Second, false},
	}
	for _, tt := range tests {
		s := &state{setup: tt.setup, responses: responses(tt.span)}
		if got := s.windowEnded(); (got != "") != tt.want {
			t.Errorf("%s: windowEnded() = %q, want a reason: %v", tt.name, got, tt.want)
		}
	}
}

// TestEventuallyQuotesTheLimitHeaders: when the window never resets, the
// error quotes the last refusal's rate-limit headers, which tell whether
// the limiter refused it and when it meant to let a request through; a
// refusal without them (another layer's) quotes none.
func TestEventuallyQuotesTheLimitHeaders(t *testing.T) {
	answersRe := regexp.MustCompile(`; answers since the last response before the wait: 429 ([2-9]|[1-9][0-9]) times from \+0\.[0-9]{2}s to \+[01]\.[0-9]{2}s$`)
	limited := &response{status: 429, body: []byte("rate limit exceeded"), header: http.Header{
		"X-Ratelimit-Limit": {"100"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1"}, "Retry-After": {"1"}}}
	bare := &response{status: 429, body: []byte("rate limit exceeded"), header: http.Header{}}
	for name, tc := range map[string]struct {
		r    *response
		want string
	}{
		"limiter": {limited, `last seen: status 429 (body "rate limit exceeded", x-ratelimit-limit: "100", x-ratelimit-remaining: "0", x-ratelimit-reset: "1", retry-after: "1")`},
		"bare":    {bare, `last seen: status 429 (body "rate limit exceeded")`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each waits out its second
			err := (&state{}).eventually(context.Background(), 1, func(context.Context) (*response, error) {
				r := *tc.r
				r.at = time.Now()
				return &r, nil
			})
			if err == nil || !strings.HasPrefix(err.Error(), "no 2xx within 1s, want one once the window resets: not within 1s") || !strings.Contains(err.Error(), tc.want+"; ") {
				t.Errorf("got %v\nwant it to quote %s", err, tc.want)
			}
			// Every answer, and when: about twenty 429s over the second.
			if err != nil && !answersRe.MatchString(err.Error()) {
				t.Errorf("got %v\nwant it to end with the answers seen, matching %s", err, answersRe)
			}
		})
	}
}

// TestAnswersString: a wait's answers read as runs of one status, each
// with when it began and ended, counted from the response before the wait.
func TestAnswersString(t *testing.T) {
	since := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	at := func(ms ...int) []*response {
		var rs []*response
		for i, m := range ms {
			status := 429
			if i == 1 {
				status = 503
			}
			rs = append(rs, &response{status: status, at: since.Add(time.Duration(m) * time.Millisecond)})
		}
		return rs
	}
	for name, tc := range map[string]struct {
		rs   []*response
		want string
	}{
		"none":  {nil, "no answers"},
		"one":   {at(40), "answers since the last response before the wait: 429 at +0.04s"},
		"mixed": {at(0, 300, 600, 1250, 2950), "answers since the last response before the wait: 429 at +0.00s, 503 at +0.30s, 429 3 times from +0.60s to +2.95s"},
	} {
		t.Run(name, func(t *testing.T) {
			h := answers{since: since}
			for _, r := range tc.rs {
				h.add(r)
			}
			if got := h.String(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// countingDeployment is a replica whose backends counted what they received.
type countingDeployment struct {
	targets.Deployment
	counts map[string]int64
}

func (d countingDeployment) BackendRequests(ctx context.Context, backend string) (int64, error) {
	if d.counts == nil { // a backend that never answers its count
		<-ctx.Done()
		return 0, ctx.Err()
	}
	n, ok := d.counts[backend]
	if !ok {
		return 0, errors.New("no counting backend " + backend)
	}
	return n, nil
}

// TestForwarded: what the backends of every replica received, against the
// 2xx answers the suite got; an unreachable backend counts nothing and is
// left out, and a count that cannot be read, or does not come in time,
// says so.
func TestForwarded(t *testing.T) {
	defer func(d time.Duration) { forwardedTimeout = d }(forwardedTimeout)
	forwardedTimeout = 50 * time.Millisecond
	setup := targets.Setup{Backends: []targets.Backend{{Name: "httpbin"}, {Name: "down", Kind: targets.BackendUnreachable}, {Name: "openai", Kind: targets.BackendLLM}}}
	answers := []*response{{status: 200}, {status: 429}, {status: 429}}
	for name, tc := range map[string]struct {
		deps []targets.Deployment
		want string
	}{
		"none":  {nil, ""},
		"equal": {[]targets.Deployment{countingDeployment{counts: map[string]int64{"httpbin": 1, "openai": 0}}}, "; the backends received 1 request (httpbin 1, openai 0), as many as the 2xx answers the suite got: nothing else was let through"},
		"more": {[]targets.Deployment{countingDeployment{counts: map[string]int64{"httpbin": 1, "openai": 0}}, countingDeployment{counts: map[string]int64{"httpbin": 2, "openai": 1}}},
			"; the backends received 4 requests (httpbin 3, openai 1), 3 more than the 2xx answers the suite got (1): requests it did not send, or whose answers it never got, were let through"},
		"fewer":     {[]targets.Deployment{countingDeployment{counts: map[string]int64{"httpbin": 0, "openai": 0}}}, "; the backends received 0 requests (httpbin 0, openai 0), fewer than the 2xx answers the suite got (1)"},
		"no count":  {[]targets.Deployment{countingDeployment{counts: map[string]int64{"httpbin": 1}}}, "; the backends' counts: no counting backend openai"},
		"no answer": {[]targets.Deployment{countingDeployment{}}, "; the backends' counts: context deadline exceeded"},
	} {
		t.Run(name, func(t *testing.T) {
			s := &state{setup: setup, deps: tc.deps, responses: answers}
			if got := s.forwarded(context.Background()); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
