package stepdefs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/steps/tracecheck"
)

// The state's means of reading traces that more than one topic uses:
// watching for the next request, ending the watch, finding an event.

// scrubbedEvents are events with every credential the run knows
// redacted, for what leaves the run (OnTrace).
func (s *state) scrubbedEvents(events []trace.Event) []trace.Event {
	if s.cfg.Secrets == nil {
		return events
	}
	out := make([]trace.Event, 0, len(events))
	for _, e := range events {
		b, err := json.Marshal(e)
		if err != nil {
			continue
		}
		if ev, err := trace.Parse(s.cfg.Secrets.ScrubEvent(b)); err == nil {
			out = append(out, ev)
		}
	}
	return out
}

// watch opens a trace stream and waits until the proxy has registered it.
func (s *state) watch(ctx context.Context, expression string) (*watcher, error) {
	d, err := s.deployment(ctx)
	if err != nil {
		return nil, err
	}
	w, err := openWatcher(ctx, s.client, d.AdminAddr(), expression, s.cfg.RequestTimeout, s.cfg.Limits, s.cfg.Secrets)
	if err != nil {
		return nil, fmt.Errorf("open /debug/trace: %w", err)
	}
	s.watchers = append(s.watchers, w)
	w.awaitReady(s.cfg.ReadyGrace)
	return w, nil
}

// finish waits for w's trace and makes it the current trace.
func (s *state) finish(w *watcher) error {
	t, err := w.result(s.cfg.TraceTimeout)
	s.trace = t
	if err != nil {
		return err
	}
	if s.cfg.OnTrace != nil {
		s.cfg.OnTrace(s.scenario, s.scrubbedEvents(t.Events))
	}
	if len(t.Events) == 0 {
		return errors.New("the trace stream ended with no events")
	}
	return nil
}

func (s *state) event(name string) (trace.Event, error) {
	t, err := s.currentTrace()
	if err != nil {
		return trace.Event{}, err
	}
	if name == string(trace.PolicySelection) {
		// Newer proxies send one per phase; the spec's is the route's.
		for _, e := range t.Events {
			if p := tracecheck.Phase(e); e.Type() == trace.PolicySelection && (p == "" || p == "route") {
				return e, nil
			}
		}
	}
	e, ok := tracecheck.Find(t.Events, name)
	if !ok {
		return e, fmt.Errorf("trace has no %s event; got %s", name, names(t.Events))
	}
	return e, nil
}
