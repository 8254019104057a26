package stepdefs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cucumber/godog"

	"github.com/gwdiag/gwdiag/golden/trace/explain"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/steps/await"
	"github.com/gwdiag/gwdiag/steps/mock"
	"github.com/gwdiag/gwdiag/steps/targets"
)

func registerRequestSteps(sc *godog.ScenarioContext) {
	step(sc, `^I send a GET request to "([^"]*)"$`, (*state).sendGetRequest)
	step(sc, `^I send (\d+) GET requests to "([^"]*)"$`, (*state).sendGetRequests)
	step(sc, `^I send (\d+) GET requests? to "([^"]*)" with header "([^"]*)" "([^"]*)"$`, (*state).sendGetRequestsWithHeader)
	step(sc, `^I send (\d+) GET requests to "([^"]*)" on listener "([^"]*)"$`, (*state).sendGetRequestsOnListener)
	step(sc, `^I send a chat completion using (\d+) tokens$`, (*state).sendChatCompletionUsingTokens)
	step(sc, `^I send (\d+) chat completions using (\d+) tokens each$`, (*state).sendChatCompletionsUsingTokensEach)
	step(sc, `^I send (\d+) chat completions? using (\d+) tokens(?: each)? with header "([^"]*)" "([^"]*)"$`, (*state).sendChatCompletionsWithHeader)
	step(sc, `^I send a streaming chat completion using (\d+) tokens that (asks|does not ask) for usage$`, (*state).sendStreamingChatCompletionUsingTokens)
	step(sc, `^I start a streaming chat completion using (\d+) tokens held before its end at "([^"]*)"$`, (*state).startStreamingChatCompletionUsingTokens)
	step(sc, `^I release the held stream "([^"]*)" on backend "([^"]*)"$`, (*state).releaseHeldStreamOnBackend)
	step(sc, `^the held stream "([^"]*)" was delivered whole with its usage chunk$`, (*state).heldStreamDeliveredWhole)
	step(sc, `^within (\d+) seconds a GET request to "([^"]*)" succeeds$`, (*state).withinSecondsGETSucceeds)
	step(sc, `^within (\d+) seconds a chat completion using (\d+) tokens succeeds$`, (*state).withinSecondsChatSucceeds)
	step(sc, `^the response status is (\d+)$`, (*state).responseStatusIs)
	step(sc, `^the responses have statuses ([\d, ]+)$`, (*state).responsesHaveStatuses)
	step(sc, `^the response body is "([^"]*)"$`, (*state).responseBodyIs)
	step(sc, `^the response header "([^"]*)" is "([^"]*)"$`, (*state).responseHeaderIs)
	step(sc, `^the response header "([^"]*)" starts with "([^"]*)"$`, (*state).responseHeaderStartsWith)
	step(sc, `^the response header "([^"]*)" is a number of seconds at most (\d+)$`, (*state).responseHeaderIsSecondsAtMost)
	step(sc, `^the response header "([^"]*)" is a whole number of seconds at most (\d+)$`, (*state).responseHeaderIsWholeSecondsAtMost)
	step(sc, `^the response header "([^"]*)" equals the response header "([^"]*)"$`, (*state).responseHeaderEqualsResponseHeader)
	step(sc, `^the responses have header "([^"]*)" values ([\d, ]+)$`, (*state).responsesHaveHeaderValues)
	step(sc, `^the response body is an OpenAI error of type "([^"]*)"$`, (*state).responseBodyIsOpenAIError)
	step(sc, `^the response body is an Anthropic error of type "([^"]*)"$`, (*state).responseBodyIsAnthropicError)
	step(sc, `^the response has no header "([^"]*)"$`, (*state).responseHasNoHeader)
	step(sc, `^response (\d+) has header "([^"]*)" "([^"]*)" and header "([^"]*)" "([^"]*)"$`, (*state).nthResponseHasHeaders)
	step(sc, `^response (\d+) has no header "([^"]*)"$`, (*state).nthResponseHasNoHeader)
	step(sc, `^response (\d+) has the rate-limit headers limit (\d+), remaining (\d+), reset (\d+) to (\d+) seconds$`, (*state).nthResponseRateLimitHeaders)
	step(sc, `^the response has the rate-limit headers limit (\d+), remaining (\d+), reset (\d+) to (\d+) seconds$`, (*state).responseRateLimitHeaders)
	step(sc, `^the backend "([^"]*)" received (\d+) requests?$`, (*state).backendReceivedRequests)
	step(sc, `^the stream was delivered whole with its usage chunk$`, (*state).streamDeliveredWhole)
}

func (s *state) sendGetRequest(ctx context.Context, reqTarget string) error {
	_, err := s.send(ctx, targets.DefaultListener, http.MethodGet, reqTarget, nil, nil)
	return err
}

func (s *state) sendGetRequests(ctx context.Context, n int, reqTarget string) error {
	for range n {
		if _, err := s.send(ctx, targets.DefaultListener, http.MethodGet, reqTarget, nil, nil); err != nil {
			return err
		}
	}
	return nil
}

func (s *state) sendGetRequestsWithHeader(ctx context.Context, n int, reqTarget, name, value string) error {
	h := http.Header{}
	h.Set(name, value)
	for range n {
		if _, err := s.send(ctx, targets.DefaultListener, http.MethodGet, reqTarget, h, nil); err != nil {
			return err
		}
	}
	return nil
}

func (s *state) sendGetRequestsOnListener(ctx context.Context, n int, reqTarget, listener string) error {
	for range n {
		if _, err := s.send(ctx, listener, http.MethodGet, reqTarget, nil, nil); err != nil {
			return err
		}
	}
	return nil
}

func (s *state) sendChatCompletionUsingTokens(ctx context.Context, n int) error {
	_, err := s.chat(ctx, n, noStream)
	return err
}

func (s *state) sendChatCompletionsUsingTokensEach(ctx context.Context, count, n int) error {
	for range count {
		if _, err := s.chat(ctx, n, noStream); err != nil {
			return err
		}
	}
	return nil
}

func (s *state) sendChatCompletionsWithHeader(ctx context.Context, count, n int, name, value string) error {
	for range count {
		h := http.Header{}
		h.Set(name, value)
		if _, err := s.chatWith(ctx, n, noStream, h); err != nil {
			return err
		}
	}
	return nil
}

func (s *state) sendStreamingChatCompletionUsingTokens(ctx context.Context, n int, asks string) error {
	_, err := s.chat(ctx, n, streamAsking(asks == "asks"))
	return err
}

func (s *state) startStreamingChatCompletionUsingTokens(ctx context.Context, n int, key string) error {
	return s.startHeld(ctx, n, key)
}

func (s *state) releaseHeldStreamOnBackend(ctx context.Context, key, backend string) error {
	return s.release(ctx, key, backend)
}

func (s *state) heldStreamDeliveredWhole(ctx context.Context, key string) error {
	h, ok := s.held[key]
	if !ok {
		return fmt.Errorf("no held stream %q", key)
	}
	if h.err != nil {
		return h.err
	}
	return streamWhole(h.resp, h.tokens)
}

func (s *state) withinSecondsGETSucceeds(ctx context.Context, secs int, reqTarget string) error {
	return s.eventually(ctx, secs, func(ctx context.Context) (*response, error) {
		return s.send(ctx, targets.DefaultListener, http.MethodGet, reqTarget, nil, nil)
	})
}

func (s *state) withinSecondsChatSucceeds(ctx context.Context, secs, n int) error {
	return s.eventually(ctx, secs, func(ctx context.Context) (*response, error) { return s.chat(ctx, n, noStream) })
}

func (s *state) responseStatusIs(ctx context.Context, want int) error {
	r, err := s.lastResponse()
	if err != nil {
		return err
	}
	if r.status != want {
		if err := s.noVerdict([]int{r.status}, []int{want}); err != nil {
			return err
		}
		return fmt.Errorf("response status: got %d, want %d (body %q)", r.status, want, trim(r.body))
	}
	return nil
}

func (s *state) responsesHaveStatuses(ctx context.Context, list string) error {
	var want []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return err
		}
		want = append(want, n)
	}
	var got []int
	for _, r := range s.responses {
		got = append(got, r.status)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		if err := s.noVerdict(got, want); err != nil {
			return err
		}
		return fmt.Errorf("response statuses: got %v, want %v", got, want)
	}
	return nil
}

// noVerdict returns godog.ErrSkip, with the scenario marked inconclusive,
// when statuses got that are not those wanted may come from rate-limit
// windows that ended under the requests (windowEnded, onlyAdmittedMore);
// nil when the step's failure is a verdict.
func (s *state) noVerdict(got, want []int) error {
	why := s.windowEnded()
	if why == "" || !onlyAdmittedMore(got, want) {
		return nil
	}
	s.inconclusive = fmt.Sprintf("response statuses %v, want %v, but %s", got, want, why)
	return godog.ErrSkip
}

// onlyAdmittedMore reports whether got differs from want only by requests
// admitted (2xx) where a refusal (429) was wanted: what a window that ended
// between the requests explains. Anything else (a refusal not wanted, an
// error) is the proxy's, however slow the requests were.
func onlyAdmittedMore(got, want []int) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] && (want[i] != http.StatusTooManyRequests || got[i] < 200 || got[i] > 299) {
			return false
		}
	}
	return true
}

// windowEnded says why the scenario's responses may not have shared the
// rate-limit windows its steps meant them to ("" when they did): a status
// step judges requests sent in one window, and when every window of the
// scenario's limits may have ended between them (a slow machine, a slow
// port-forward), a request the proxy rightly admits is no verdict. Every
// window, so the longest: a request refused by a day's limit as well as a
// second's must be refused however slow the way. A local limit's window is
// taken to start with the first request (a proxy may start it sooner: that
// risk is the scenario's, as before); a global limit's windows are aligned
// with the clock, as the rate-limit service counts them.
func (s *state) windowEnded() string {
	var first, last time.Time
	n := 0
	for _, r := range s.responses {
		if r.sent.IsZero() || r.at.IsZero() {
			continue
		}
		if first.IsZero() || r.sent.Before(first) {
			first = r.sent
		}
		if r.at.After(last) {
			last = r.at
		}
		n++
	}
	if n < 2 {
		return ""
	}
	var local, global time.Duration
	for _, l := range s.setup.Listeners {
		for _, rt := range l.Routes {
			for _, lim := range rt.Limits {
				local = max(local, lim.Unit)
			}
			for _, g := range rt.Global {
				global = max(global, time.Duration(g.UnitSeconds())*time.Second)
			}
		}
	}
	span := last.Sub(first)
	if local == 0 && global == 0 || span < local || global > 0 && first.Truncate(global).Equal(last.Truncate(global)) {
		return ""
	}
	why := fmt.Sprintf("the %d requests took %s", n, span.Round(time.Millisecond))
	if local > 0 {
		why += fmt.Sprintf(", as long as the longest window of the route's limits (%s) or longer", local)
	}
	if global > 0 {
		why += fmt.Sprintf(", and a %s window of the rate-limit service ended between them", global)
	}
	return why + ": every limit may have reset between them"
}

func (s *state) responseBodyIs(ctx context.Context, want string) error {
	r, err := s.lastResponse()
	if err != nil {
		return err
	}
	if got := strings.TrimRight(string(r.body), "\r\n"); got != want {
		return fmt.Errorf("response body: got %q, want %q", got, want)
	}
	return nil
}

func (s *state) responseHeaderIs(ctx context.Context, name, want string) error {
	r, err := s.lastResponse()
	if err != nil {
		return err
	}
	return headerIs(r, name, want)
}

func (s *state) responseHeaderStartsWith(ctx context.Context, name, want string) error {
	r, err := s.lastResponse()
	if err != nil {
		return err
	}
	if got := r.header.Get(name); !strings.HasPrefix(got, want) {
		return fmt.Errorf("response header %s: got %q, want it to start with %q", name, got, want)
	}
	return nil
}

func (s *state) responseHeaderIsSecondsAtMost(ctx context.Context, name string, max int) error {
	r, err := s.lastResponse()
	if err != nil {
		return err
	}
	got := r.header.Get(name)
	n, err := strconv.ParseFloat(got, 64)
	if err != nil || n < 0 || n > float64(max) {
		return fmt.Errorf("response header %s: got %q, want a number of seconds from 0 to %d", name, got, max)
	}
	return nil
}

func (s *state) responseHeaderIsWholeSecondsAtMost(ctx context.Context, name string, max int) error {
	r, err := s.lastResponse()
	if err != nil {
		return err
	}
	got := r.header.Get(name)
	n, err := strconv.Atoi(got)
	if err != nil || n < 0 || n > max {
		return fmt.Errorf("response header %s: got %q, want a whole number of seconds from 0 to %d", name, got, max)
	}
	return nil
}

func (s *state) responseHeaderEqualsResponseHeader(ctx context.Context, name, other string) error {
	r, err := s.lastResponse()
	if err != nil {
		return err
	}
	got, want := r.header.Values(name), r.header.Values(other)
	switch {
	case len(got) == 0:
		return fmt.Errorf("response header %s: absent, want it equal to %s %q", name, other, want)
	case !slices.Equal(got, want):
		return fmt.Errorf("response header %s: got %q, want it equal to %s %q", name, got, other, want)
	}
	return nil
}

func (s *state) responsesHaveHeaderValues(ctx context.Context, name, list string) error {
	rs := s.responses
	var got []string
	for _, r := range rs {
		got = append(got, r.header.Get(name))
	}
	want := strings.Split(strings.ReplaceAll(list, " ", ""), ",")
	if !slices.Equal(got, want) {
		return fmt.Errorf("%s of the responses: got %q, want %q", name, got, want)
	}
	return nil
}

// responseBodyIsAnthropicError: the last response is JSON in Anthropic's
// error shape, {"type": "error", "error": {"type": T, "message": M}}.
func (s *state) responseBodyIsAnthropicError(ctx context.Context, typ string) error {
	r, err := s.lastJSONResponse()
	if err != nil {
		return err
	}
	var e struct {
		Type  string `json:"type"`
		Error *struct {
			Type    string  `json:"type"`
			Message *string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || e.Type != "error" || e.Error == nil {
		return fmt.Errorf("response body %q: want {\"type\": \"error\", \"error\": {...}} as Anthropic writes it (%v)", trim(r.body), err)
	}
	switch {
	case e.Error.Type != typ:
		return fmt.Errorf("error.type: got %q, want %q", e.Error.Type, typ)
	case e.Error.Message == nil || *e.Error.Message == "":
		return fmt.Errorf("error.message: absent or empty in %q", trim(r.body))
	}
	return nil
}

// lastJSONResponse is the last response, which must say its body is JSON.
func (s *state) lastJSONResponse() (*response, error) {
	r, err := s.lastResponse()
	if err != nil {
		return nil, err
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return nil, fmt.Errorf("response Content-Type: got %q, want application/json (body %q)", ct, trim(r.body))
	}
	return r, nil
}

func (s *state) responseBodyIsOpenAIError(ctx context.Context, typ string) error {
	r, err := s.lastJSONResponse()
	if err != nil {
		return err
	}
	var e struct {
		Error *struct {
			Message *string `json:"message"`
			Type    string  `json:"type"`
			Code    any     `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error == nil {
		return fmt.Errorf("response body %q: want {\"error\": {...}} as OpenAI writes it (%v)", trim(r.body), err)
	}
	switch {
	case e.Error.Type != typ:
		return fmt.Errorf("error.type: got %q, want %q", e.Error.Type, typ)
	case e.Error.Message == nil || *e.Error.Message == "":
		return fmt.Errorf("error.message: absent or empty in %q", trim(r.body))
	case e.Error.Code == nil:
		return fmt.Errorf("error.code: absent in %q", trim(r.body))
	}
	return nil
}

func (s *state) responseHasNoHeader(ctx context.Context, name string) error {
	r, err := s.lastResponse()
	if err != nil {
		return err
	}
	// "<proxy>" stands for any proxy name, as the spec writes
	// x-<proxy>-ratelimited.
	re := regexp.MustCompile("(?i)^" + strings.ReplaceAll(regexp.QuoteMeta(name), "<proxy>", ".+") + "$")
	for k, v := range r.header {
		if re.MatchString(k) {
			return fmt.Errorf("response header %s: got %q, want no header %s", k, v, name)
		}
	}
	return nil
}

func (s *state) nthResponseHasHeaders(ctx context.Context, i int, n1, v1, n2, v2 string) error {
	rs := s.responses
	if i < 1 || i > len(rs) {
		return fmt.Errorf("no response %d: %d were received", i, len(rs))
	}
	if err := headerIs(rs[i-1], n1, v1); err != nil {
		return fmt.Errorf("response %d: %w", i, err)
	}
	if err := headerIs(rs[i-1], n2, v2); err != nil {
		return fmt.Errorf("response %d: %w", i, err)
	}
	return nil
}

// nthResponse is the i-th response of the scenario, counted from 1.
func (s *state) nthResponse(i int) (*response, error) {
	if i < 1 || i > len(s.responses) {
		return nil, fmt.Errorf("no response %d: %d were received", i, len(s.responses))
	}
	return s.responses[i-1], nil
}

func (s *state) nthResponseHasNoHeader(ctx context.Context, i int, name string) error {
	r, err := s.nthResponse(i)
	if err != nil {
		return err
	}
	if v := r.header.Values(name); len(v) > 0 {
		return fmt.Errorf("response %d (status %d): header %s %q, want none", i, r.status, name, v)
	}
	return nil
}

func (s *state) nthResponseRateLimitHeaders(ctx context.Context, i, limit, remaining, lo, hi int) error {
	r, err := s.nthResponse(i)
	if err != nil {
		return err
	}
	if err := rateLimitHeaders(r, limit, remaining, lo, hi); err != nil {
		return fmt.Errorf("response %d: %w", i, err)
	}
	return nil
}

func (s *state) responseRateLimitHeaders(ctx context.Context, limit, remaining, lo, hi int) error {
	r, err := s.lastResponse()
	if err != nil {
		return err
	}
	return rateLimitHeaders(r, limit, remaining, lo, hi)
}

// rateLimitHeaders holds the three x-ratelimit-* fields of r to one limit:
// its ceiling, what is left of it (each one value: headerIs joins repeated
// ones), and a reset (seconds, a number) from lo to hi, the bounds of that
// limit's window.
func rateLimitHeaders(r *response, limit, remaining, lo, hi int) error {
	var errs []string
	for name, want := range map[string]int{"x-ratelimit-limit": limit, "x-ratelimit-remaining": remaining} {
		if err := headerIs(r, name, strconv.Itoa(want)); err != nil {
			errs = append(errs, err.Error())
		}
	}
	v := r.header.Values("x-ratelimit-reset")
	n, err := 0.0, error(nil)
	if len(v) == 1 {
		n, err = strconv.ParseFloat(v[0], 64)
	}
	if len(v) != 1 || err != nil || n < float64(lo) || n > float64(hi) {
		errs = append(errs, fmt.Sprintf("response header x-ratelimit-reset: got %q, want one number of seconds from %d to %d (the window of the limit of %d)", v, lo, hi, limit))
	}
	if len(errs) > 0 {
		slices.Sort(errs)
		return fmt.Errorf("status %d: the rate-limit headers do not describe the limit of %d: %s", r.status, limit, strings.Join(errs, "; "))
	}
	return nil
}

func (s *state) backendReceivedRequests(ctx context.Context, backend string, want int) error {
	if _, err := s.deployment(ctx); err != nil {
		return err
	}
	got, err := s.backendRequests(ctx, backend)
	if err != nil {
		return err
	}
	if got != int64(want) {
		return fmt.Errorf("requests counted by backend %q: got %d, want %d (refused requests must not be forwarded)", backend, got, want)
	}
	return nil
}

// backendRequests is how many requests the named backend of every
// replica received.
func (s *state) backendRequests(ctx context.Context, backend string) (int64, error) {
	var got int64
	for _, d := range s.deps {
		n, err := d.BackendRequests(ctx, backend)
		if err != nil {
			return 0, err
		}
		got += n
	}
	return got, nil
}

func (s *state) streamDeliveredWhole(ctx context.Context) error {
	r, err := s.lastResponse()
	if err != nil {
		return err
	}
	return streamWhole(r, s.streamTokens)
}

func headerIs(r *response, name, want string) error {
	if got, ok := r.header[http.CanonicalHeaderKey(name)]; !ok || strings.Join(got, ", ") != want {
		if !ok {
			return fmt.Errorf("response header %s: absent, want %q", name, want)
		}
		return fmt.Errorf("response header %s: got %q, want %q", name, strings.Join(got, ", "), want)
	}
	return nil
}

func streamAsking(usage bool) chatMode {
	if usage {
		return streamWithUsage
	}
	return streamWithoutUsage
}

// limitHeaders quotes the rate-limit headers of a refusal, which say
// whether the proxy's limiter refused it and when it meant to let the
// next request through: `, x-ratelimit-remaining: "0", ...`; empty when
// it has none.
func limitHeaders(r *response) string {
	var b strings.Builder
	for _, name := range []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "Retry-After"} {
		if v, ok := r.header[name]; ok {
			fmt.Fprintf(&b, ", %s: %q", strings.ToLower(name), strings.Join(v, ", "))
		}
	}
	return b.String()
}

// eventually retries try until it gets a 2xx status or secs pass. A try
// the deadline cuts counts for nothing (await.Until), so the error quotes
// the last status the proxy answered.
//
// The error also lists every answer the wait saw and when, counted from
// the last response before it: whether the tries came after the window
// was due and were refused all the same, or never reached past it.
func (s *state) eventually(ctx context.Context, secs int, try func(context.Context) (*response, error)) error {
	h := answers{since: time.Now()}
	if n := len(s.responses); n > 0 && !s.responses[n-1].at.IsZero() {
		h.since = s.responses[n-1].at
	}
	err := await.Until(ctx, time.Duration(secs)*time.Second, 50*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		r, err := try(ctx)
		if err != nil {
			return false, "", err
		}
		h.add(r)
		return r.status/100 == 2, fmt.Sprintf("status %d (body %q%s)", r.status, trim(r.body), limitHeaders(r)), nil
	})
	var late *await.Error
	if errors.As(err, &late) {
		return fmt.Errorf("no 2xx within %ds, want one once the window resets: %w; %s%s", secs, err, &h, s.forwarded(ctx))
	}
	return err
}

// forwardedTimeout bounds the counts forwarded asks of the backends.
var forwardedTimeout = 5 * time.Second

// forwarded compares what the scenario's backends received with the 2xx
// answers the suite got, for a wait that never saw its window reset: more
// received than answered says that requests the suite did not send (or
// whose answers it never got) were let through and took the budget; as
// many says that nothing else was, so the limit did not refill. It is ""
// before the scenario has a deployment.
func (s *state) forwarded(ctx context.Context) string {
	if len(s.deps) == 0 {
		return ""
	}
	// Evidence for an error already decided: a backend that does not
	// answer its count must not hold the scenario.
	ctx, cancel := context.WithTimeout(ctx, forwardedTimeout)
	defer cancel()
	answered := 0
	for _, r := range s.responses {
		if r.status/100 == 2 {
			answered++
		}
	}
	var received int64
	var each []string
	for _, b := range s.setup.Backends {
		if b.Kind == targets.BackendUnreachable {
			continue // nothing listens there, nothing counts
		}
		n, err := s.backendRequests(ctx, b.Name)
		if err != nil {
			return fmt.Sprintf("; the backends' counts: %v", err)
		}
		received += n
		each = append(each, fmt.Sprintf("%s %d", b.Name, n))
	}
	got := fmt.Sprintf("; the backends received %d %s (%s)", received, explain.Plural(int(received), "request", "requests"), strings.Join(each, ", "))
	switch extra := int(received) - answered; {
	case extra > 0:
		return fmt.Sprintf("%s, %d more than the 2xx answers the suite got (%d): requests it did not send, or whose answers it never got, were let through", got, extra, answered)
	case extra == 0:
		return fmt.Sprintf("%s, as many as the 2xx answers the suite got: nothing else was let through", got)
	}
	return fmt.Sprintf("%s, fewer than the 2xx answers the suite got (%d)", got, answered)
}

// answers are the statuses a wait saw, runs of one status with the times
// of their first and last answers, since a moment before the wait.
type answers struct {
	since time.Time
	runs  []answerRun
}

type answerRun struct {
	status      int
	n           int
	first, last time.Duration
}

func (h *answers) add(r *response) {
	at := r.at
	if at.IsZero() {
		at = time.Now()
	}
	d := at.Sub(h.since)
	if n := len(h.runs); n > 0 && h.runs[n-1].status == r.status {
		h.runs[n-1].n++
		h.runs[n-1].last = d
		return
	}
	h.runs = append(h.runs, answerRun{status: r.status, n: 1, first: d, last: d})
}

// String is "answers since the last response before the wait: 200 at
// +0.00s, 429 10 times from +0.31s to +2.95s" (or "no answers").
func (h *answers) String() string {
	if len(h.runs) == 0 {
		return "no answers"
	}
	var b strings.Builder
	b.WriteString("answers since the last response before the wait:")
	for i, r := range h.runs {
		if i > 0 {
			b.WriteByte(',')
		}
		if r.n == 1 {
			fmt.Fprintf(&b, " %d at +%.2fs", r.status, r.first.Seconds())
			continue
		}
		fmt.Fprintf(&b, " %d %d times from +%.2fs to +%.2fs", r.status, r.n, r.first.Seconds(), r.last.Seconds())
	}
	return b.String()
}

var usageRe = regexp.MustCompile(`"usage"\s*:\s*\{`)

// streamWhole checks a streamed chat completion arrived complete: content
// chunks, a usage chunk with the asked-for total, and [DONE] last.
func streamWhole(r *response, tokens int) error {
	if r.status != http.StatusOK {
		return fmt.Errorf("stream status: got %d, want 200", r.status)
	}
	if len(r.chunks) == 0 || r.chunks[len(r.chunks)-1] != "[DONE]" {
		return fmt.Errorf("stream cut: got %d chunks, the last %q, want [DONE] last", len(r.chunks), last(r.chunks))
	}
	for _, c := range r.chunks {
		if !usageRe.MatchString(c) {
			continue
		}
		var u struct {
			Usage struct {
				Total int `json:"total_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(c), &u); err != nil {
			return fmt.Errorf("usage chunk is not JSON: %q", c)
		}
		if u.Usage.Total != tokens {
			return fmt.Errorf("usage chunk total_tokens: got %d, want %d", u.Usage.Total, tokens)
		}
		return nil
	}
	return fmt.Errorf("no usage chunk among %d chunks", len(r.chunks))
}

// startHeld starts a streaming completion whose backend holds it after the
// usage chunk, before [DONE], and returns once the usage chunk has reached
// the client: the stream is then under way but has not ended.
func (s *state) startHeld(ctx context.Context, n int, key string) error {
	addr, err := s.listenerAddr(ctx)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, "http://"+addr+"/v1/chat/completions", bytes.NewReader(chatBody(streamWithUsage)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(mock.HeaderPromptTokens, strconv.Itoa(n/2))
	req.Header.Set(mock.HeaderCompletionTokens, strconv.Itoa(n-n/2))
	req.Header.Set(mock.HeaderHoldBeforeDone, key)
	h := &heldStream{tokens: n, done: make(chan struct{})}
	if s.held == nil {
		s.held = map[string]*heldStream{}
	}
	s.held[key] = h
	sawUsage := make(chan struct{})
	go func() {
		var once sync.Once
		// The stream's end first, then (if no usage came) sawUsage: the
		// step, woken by sawUsage, must find a stream that ended done.
		defer func() {
			close(h.done)
			once.Do(func() { close(sawUsage) })
		}()
		resp, err := s.client.Do(req)
		if err != nil {
			h.err = err
			return
		}
		defer resp.Body.Close()
		r := &response{status: resp.StatusCode, header: resp.Header}
		err = sse.EachData(resp.Body, s.cfg.Limits, func(d string) {
			r.chunks = append(r.chunks, strings.TrimSpace(d))
			if usageRe.MatchString(d) {
				once.Do(func() { close(sawUsage) })
			}
		})
		if err != nil {
			h.err = fmt.Errorf("held stream cut after %d chunks: %w", len(r.chunks), err)
		}
		h.resp = r
	}()
	t := time.NewTimer(s.cfg.RequestTimeout)
	defer t.Stop()
	select {
	case <-sawUsage:
	case <-t.C:
		return fmt.Errorf("the usage chunk of the held stream did not reach the client within %s: the proxy must pass chunks on as they come", s.cfg.RequestTimeout)
	}
	select {
	case <-h.done:
		if h.err != nil {
			return h.err
		}
		return fmt.Errorf("the held stream ended before it was released (status %d, %d chunks)", h.resp.status, len(h.resp.chunks))
	default:
		return nil
	}
}

// release lets the backend finish a held stream and waits for its end.
func (s *state) release(ctx context.Context, key, backend string) error {
	h, ok := s.held[key]
	if !ok {
		return fmt.Errorf("no held stream %q", key)
	}
	if err := s.dep.ReleaseHeld(ctx, backend, key); err != nil {
		return fmt.Errorf("release held stream %q on backend %q: %w", key, backend, err)
	}
	t := time.NewTimer(s.cfg.RequestTimeout)
	defer t.Stop()
	select {
	case <-h.done:
		return nil
	case <-t.C:
		return fmt.Errorf("held stream %q did not end within %s of its release", key, s.cfg.RequestTimeout)
	}
}
