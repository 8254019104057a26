package stepdefs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cucumber/godog"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/steps/tracecheck"
)

func registerFollowSteps(sc *godog.ScenarioContext) {
	step(sc, `^I follow the traces of at most (\d+) requests$`, (*state).followTraces)
	step(sc, `^I follow the traces of at most (\d+) requests for (\d+) seconds?$`, (*state).followTracesFor)
	step(sc, `^I send (\d+) GET requests to "([^"]*)" at once$`, (*state).sendGetRequestsAtOnce)
	step(sc, `^the followed stream ends after (\d+) traces?$`, (*state).followedStreamEndsAfterTraces)
	step(sc, `^the followed stream ends within (\d+) seconds with (\d+) traces$`, (*state).followedStreamEndsWithinSecondsWith)
	step(sc, `^each followed trace is one whole request that follows the spec$`, (*state).eachFollowedTraceIsWhole)
	step(sc, `^the followed traces have distinct request ids, each the x-request-id of its response, in order$`, (*state).followedTracesHaveDistinctRequestIds)
}

func (s *state) followTraces(ctx context.Context, n int) error {
	return s.openFollow(ctx, n, 0)
}

func (s *state) followTracesFor(ctx context.Context, n, secs int) error {
	return s.openFollow(ctx, n, time.Duration(secs)*time.Second)
}

func (s *state) sendGetRequestsAtOnce(ctx context.Context, n int, path string) error {
	addr, err := s.listenerAddr(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
			if err != nil {
				errs[i] = err
				return
			}
			resp, err := s.client.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (s *state) followedStreamEndsAfterTraces(ctx context.Context, n int) error {
	f, err := s.followEnd(ctx)
	if err != nil {
		return err
	}
	if ids, _ := trace.ByRequest(f.trace.Events); len(ids) != n {
		return fmt.Errorf("the followed stream ended with %d traces (request ids %q), want %d", len(ids), ids, n)
	}
	return nil
}

func (s *state) followedStreamEndsWithinSecondsWith(ctx context.Context, secs, n int) error {
	f, err := s.followEnd(ctx)
	if err != nil {
		return err
	}
	if took := f.ended.Sub(f.opened); took > time.Duration(secs)*time.Second {
		return fmt.Errorf("the followed stream ended after %v, want within %ds", took.Round(time.Millisecond), secs)
	}
	if ids, _ := trace.ByRequest(f.trace.Events); len(ids) != n {
		return fmt.Errorf("the followed stream ended with %d traces, want %d", len(ids), n)
	}
	return nil
}

func (s *state) eachFollowedTraceIsWhole(ctx context.Context) error {
	f, err := s.followEnd(ctx)
	if err != nil {
		return err
	}
	ids, traces := trace.ByRequest(f.trace.Events)
	for i, id := range ids {
		if id == "" {
			return fmt.Errorf("%d events have no requestId", len(traces[id]))
		}
		if vs := tracecheck.Check(traces[id]); len(vs) > 0 {
			return fmt.Errorf("followed trace %d (requestId %s): %s", i+1, id, vs[0])
		}
	}
	return nil
}

func (s *state) followedTracesHaveDistinctRequestIds(ctx context.Context) error {
	f, err := s.followEnd(ctx)
	if err != nil {
		return err
	}
	ids, _ := trace.ByRequest(f.trace.Events)
	var sent []string
	for _, r := range s.responses {
		sent = append(sent, r.header.Get("x-request-id"))
	}
	if len(sent) < len(ids) || strings.Join(ids, ",") != strings.Join(sent[:len(ids)], ",") {
		return fmt.Errorf("request ids on the stream %q; the responses carried x-request-id %q", ids, sent)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			return fmt.Errorf("request id %s names two traces", id)
		}
		seen[id] = true
	}
	return nil
}

// openFollow opens a follow stream (duration 0: the proxy's default) and
// reads it to its end in the background.
func (s *state) openFollow(ctx context.Context, n int, duration time.Duration) error {
	d, err := s.deployment(ctx)
	if err != nil {
		return err
	}
	q := url.Values{"follow": {"true"}, "max": {strconv.Itoa(n)}}
	if duration > 0 {
		q.Set("duration", duration.String())
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	st, err := openBounded(sctx, cancel, s.cfg.RequestTimeout, func(ctx context.Context) (*sse.Stream, error) {
		return sse.OpenQuery(ctx, s.client, "http://"+d.AdminAddr(), q)
	})
	if err != nil {
		return fmt.Errorf("follow stream: %w", err)
	}
	st.SetLimits(s.cfg.Limits)
	f := &followStream{stream: st, opened: time.Now(), duration: duration, done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		defer close(f.done)
		var once sync.Once
		defer once.Do(func() { close(ready) })
		for {
			fr, err := st.Next()
			once.Do(func() { close(ready) })
			if err != nil {
				if !errors.Is(err, io.EOF) {
					f.err = err
				}
				f.ended = time.Now()
				return
			}
			if fr.IsComment {
				f.trace.Comments = append(f.trace.Comments, fr.Comment)
				continue
			}
			s.cfg.Secrets.CollectEvent([]byte(fr.Data))
			ev, err := trace.Parse([]byte(fr.Data))
			if err != nil {
				f.err = fmt.Errorf("frame %q is not a JSON trace event: %w", fr.Data, err)
				f.ended = time.Now()
				return
			}
			f.trace.Events = append(f.trace.Events, ev)
			if ev.Type() == trace.RequestFinished {
				st.Reader().EndTrace()
			}
		}
	}()
	// The watcher is registered once the stream has sent something (": ready"
	// on the reference) or, from a proxy that sends nothing first, after a grace.
	select {
	case <-ready:
	case <-time.After(s.cfg.ReadyGrace):
	}
	s.follows = append(s.follows, f)
	s.cleanups = append(s.cleanups, func() { cancel(); st.Close() })
	return nil
}

// followEnd waits for the last follow stream to end: a stream bounded by
// max ends once its last trace has (the requests were sent before this
// step), one bounded by a duration at its end; both get the trace timeout.
func (s *state) followEnd(ctx context.Context) (*followStream, error) {
	if len(s.follows) == 0 {
		return nil, errors.New("no follow stream was opened")
	}
	f := s.follows[len(s.follows)-1]
	wait := s.cfg.TraceTimeout
	if f.duration > 0 {
		wait += max(time.Until(f.opened.Add(f.duration)), 0)
	}
	select {
	case <-f.done:
	case <-time.After(wait):
		return nil, fmt.Errorf("the followed stream did not end within %v of its bound (max traces, or the duration asked)", wait.Round(time.Millisecond))
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if f.err != nil {
		return nil, fmt.Errorf("the followed stream: %w", f.err)
	}
	return f, nil
}
