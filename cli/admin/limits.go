package admin

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/gwdiag/gwdiag/golden/duration"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
)

// LimitFlags are the bounds a command puts on what it reads from a proxy,
// as flags; zero values mean the defaults (sse.DefaultLimits).
type LimitFlags struct {
	Limits    sse.Limits
	frameTime time.Duration
	// Timeout bounds a one-shot admin request (Client.Timeout).
	Timeout time.Duration
}

// AddStreamFlags adds the bounds of a trace stream to fs.
func (l *LimitFlags) AddStreamFlags(fs *pflag.FlagSet) {
	d := sse.DefaultLimits()
	fs.Int64Var(&l.Limits.EventBytes, "max-event-bytes", d.EventBytes, "bound on one trace event (SSE frame) read from the proxy, in bytes")
	fs.IntVar(&l.Limits.TraceEvents, "max-trace-events", d.TraceEvents, "bound on the events of one trace")
	fs.Int64Var(&l.Limits.TraceBytes, "max-trace-bytes", d.TraceBytes, "bound on the bytes of one trace stream, comments included")
	fs.DurationVar(&l.frameTime, "frame-timeout", time.Duration(d.FrameTime), "bound on the time one trace event may take to arrive once it has begun")
	fs.Int64Var(&l.Limits.HeaderBytes, "max-header-bytes", d.HeaderBytes, "bound on a response's header block, in bytes")
}

// AddBodyFlags adds the bounds of a one-shot admin response to fs.
func (l *LimitFlags) AddBodyFlags(fs *pflag.FlagSet) {
	d := sse.DefaultLimits()
	fs.Int64Var(&l.Limits.BodyBytes, "max-body-bytes", d.BodyBytes, "bound on an admin response body (the config dump), in bytes")
	fs.Int64Var(&l.Limits.HeaderBytes, "max-header-bytes", d.HeaderBytes, "bound on a response's header block, in bytes")
	fs.DurationVar(&l.Timeout, "timeout", defaultTimeout, "bound on the time an admin response may take, body included")
}

// Check refuses a bound that is not positive: a zero would silently mean
// the default, and a negative nothing at all. Flags not added keep their
// zero and are not checked.
func (l *LimitFlags) Check(fs *pflag.FlagSet) error {
	for _, name := range []string{"max-event-bytes", "max-trace-events", "max-trace-bytes", "frame-timeout", "max-body-bytes", "max-header-bytes", "timeout"} {
		f := fs.Lookup(name)
		if f == nil || !f.Changed {
			continue
		}
		if strings.HasPrefix(f.Value.String(), "-") || f.Value.String() == "0" || f.Value.String() == "0s" {
			return fmt.Errorf("--%s %s: want a positive bound", name, f.Value)
		}
	}
	return nil
}

// Client returns a client of the admin server at baseURL within these
// bounds.
func (l *LimitFlags) Client(baseURL, hint string) *Client {
	lim := l.Limits
	lim.FrameTime = duration.Duration(l.frameTime)
	return &Client{BaseURL: baseURL, Hint: hint, Limits: lim, Timeout: l.Timeout}
}
