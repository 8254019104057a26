package tracecmd

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"

	"cel.dev/cel-go/cel"

	"github.com/gwdiag/gwdiag/cli/admin"
	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/explain"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/golden/trace/watch"
)

// followCheck stands between a follow stream and what shows it, because a
// proxy may not follow: the real proxy's releases trace one request and end
// the stream, ignoring follow=true and the filter parameters they do not
// know. It finds that out (events without a requestId, a trace that fails
// the user's filter, a stream that ends after one request), never passes on
// a trace that fails the filter, and says what happened when the stream ends.
type followCheck struct {
	emit func(admin.Event)
	// outcome is the user's filter, checked again here; nil without one.
	outcome cel.Program
	// filter is the user's filter in their words, for messages.
	filter string
	// max and duration are the bounds asked for (0: the proxy's defaults).
	max      int
	duration time.Duration
	warn     io.Writer
	opened   time.Time
	// stop ends the stream: once a proxy that does not follow has sent its
	// one trace, an older one may keep the stream open forever.
	stop func()

	held       map[string][]admin.Event // with a filter: each request's events until it ends
	traces     int                      // traces passed on
	rejected   int                      // traces that failed the filter
	examples   []string                 // the first maxExamples of them, described
	unfollowed bool                     // an event came without a requestId
	// overflow is set when more requests than sse.MaxOpenTraces were held
	// at once: a proxy that starts requests and never finishes them would
	// otherwise grow held without bound (each trace's own bounds reset at
	// every requestFinished).
	overflow bool
}

// maxExamples bounds the rejected traces the final message describes: a
// proxy that ignores the filter for ten minutes sends thousands.
const maxExamples = 5

func newFollowCheck(s session, emit func(admin.Event), stop func()) *followCheck {
	if emit == nil {
		emit = func(admin.Event) {}
	}
	c := &followCheck{emit: emit, stop: stop, filter: s.filterDesc, max: s.max, duration: s.duration,
		warn: s.stderr, opened: time.Now(), held: map[string][]admin.Event{}}
	if s.outcome != "" {
		// The proxy compiles the same expression; one it refuses never gets here.
		if p, err := watch.CompileOutcome(s.outcome); err == nil {
			c.outcome = p
		}
	}
	return c
}

// event takes one event of the stream. With a filter, a request's events
// are held until its requestFinished and passed on only if the trace
// passes; a proxy that applies the filter holds them the same way, so
// nothing comes later than it would.
func (c *followCheck) event(ev admin.Event) {
	id := ev.Header.RequestID
	if id == "" {
		c.unfollowed = true
	}
	finished := ev.Header.Type == trace.RequestFinished
	if finished && id == "" {
		defer c.stop()
	}
	if c.outcome == nil {
		c.emit(ev)
		if finished {
			c.traces++
		}
		return
	}
	if _, open := c.held[id]; !open && !finished && len(c.held) >= sse.MaxOpenTraces {
		if !c.overflow {
			c.overflow = true
			c.stop()
		}
		return
	}
	// Raw may be the reader's buffer (admin.Handler.BorrowRaw): a held
	// event keeps a copy.
	ev.Raw = bytes.Clone(ev.Raw)
	c.held[id] = append(c.held[id], ev)
	if !finished {
		return
	}
	events := c.held[id]
	delete(c.held, id)
	code, latency := outcomeOf(events)
	if !watch.OutcomeAccepts(c.outcome, code, latency) {
		c.rejected++
		if len(c.examples) < maxExamples {
			c.examples = append(c.examples, fmt.Sprintf("status %d after %s", code, time.Duration(latency)*time.Microsecond))
		}
		return
	}
	for _, e := range events {
		c.emit(e)
	}
	c.traces++
}

// outcomeOf is what an outcome filter looks at: the status the client got
// (the last response snapshot's, else requestFinished's or the backend's)
// and the request's latency (requestFinished's time). It reads only the
// events' Headers: gwdiag trace --follow --raw decodes nothing else.
func outcomeOf(events []admin.Event) (code, latencyMicros int64) {
	for _, e := range events {
		h := e.Header
		switch h.Type {
		case trace.ResponseSnapshot:
			if h.HasResponseCode {
				code = int64(int(h.ResponseCode))
			}
		case trace.BackendCallResult, trace.RequestFinished:
			if h.HasStatus && (code == 0 || h.Type == trace.RequestFinished) {
				code = int64(h.Status)
			}
			if h.Type == trace.RequestFinished {
				latencyMicros = h.EventEnd
			}
		}
	}
	return code, latencyMicros
}

// finish says, once the stream has ended, whether the proxy followed. It
// returns an error unless the proxy did what was asked, or the user asked
// for exactly one request and got it (then it warns).
func (c *followCheck) finish() error {
	incomplete := 0
	for _, evs := range c.held {
		if len(evs) > 0 {
			incomplete++
		}
	}
	total := c.traces + c.rejected + incomplete
	var what []string
	switch {
	case c.unfollowed:
		what = append(what, fmt.Sprintf("the proxy does not follow: it ignored follow=true (its events carry no requestId) and sent %s", plural(total, "trace")))
	case total == 1 && c.max != 1 && c.endedEarly():
		what = append(what, "the proxy may not follow: it ended the stream after one request, before --max-requests and --duration")
	}
	if c.rejected > 0 {
		shown := strings.Join(c.examples, ", ")
		if c.rejected > len(c.examples) {
			shown += ", ..."
		}
		what = append(what, fmt.Sprintf("it ignored the filter (%s): %s failing it not shown (%s)",
			c.filter, plural(c.rejected, "trace"), shown))
	}
	if c.overflow {
		what = append(what, fmt.Sprintf("more than %d requests were under way at once (started, not finished): stopped reading", sse.MaxOpenTraces))
	}
	if incomplete > 0 {
		what = append(what, fmt.Sprintf("%s cut short not shown", plural(incomplete, "trace")))
	}
	if len(what) == 0 {
		return nil
	}
	msg := strings.Join(what, "; ")
	if c.max == 1 && c.traces == 1 && c.rejected == 0 && !c.overflow {
		if c.warn != nil {
			fmt.Fprintf(c.warn, "warning: %s\n", msg)
		}
		return nil
	}
	if c.unfollowed || c.rejected > 0 {
		msg += "; to trace one request with such a proxy, run without --follow (--expression picks which)"
	}
	return fmt.Errorf("%s", msg)
}

// endedEarly reports whether the stream ended well before the duration it
// was asked to last (the proxy's default, 30s, when none was asked).
func (c *followCheck) endedEarly() bool {
	d := c.duration
	if d == 0 {
		d = watch.DefaultFollowDuration
	}
	return time.Since(c.opened) < d*9/10
}

// plural counts what: "1 trace", "3 traces".
func plural(n int, what string) string {
	return fmt.Sprintf("%d %s", n, explain.Plural(n, what, what+"s"))
}
