package proxy

import (
	"context"
	"net/http"

	"github.com/gwdiag/gwdiag/refproxy/ratelimit"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit/remote"
)

// headerRateLimited marks a 429 that a global rate-limit service decided,
// as Envoy marks it; local 429s never carry it (spec part 7).
const headerRateLimited = "x-envoy-ratelimited"

// remoteResult is what the global limits decided for one request.
type remoteResult struct {
	verdicts []remote.Verdict
	// asked is how many of the route's limits were asked (the first
	// refusal or closed failure ends the checks).
	asked int
	// d is the most constrained decision, for the headers.
	d ratelimit.Decision
	// refused: a service said over limit; failed: one could not answer
	// and its policy fails closed.
	refused, failed bool
	// warnings tell, in the trace, of services that could not answer and
	// whose policy let the request through.
	warnings []any
}

// checkRemote asks every global limit of the route, in order, and stops at
// the first refusal.
func (dp *Dataplane) checkRemote(rt *route, act *celActivation) remoteResult {
	var r remoteResult
	r.verdicts = make([]remote.Verdict, len(rt.remote))
	for i, l := range rt.remote {
		v := l.Check(context.Background(), act)
		r.verdicts[i] = v
		r.asked = i + 1
		r.d = ratelimit.Tighter(r.d, v.Decision)
		for _, err := range v.Skipped {
			r.warnings = append(r.warnings, "global rate limit not checked, request let through (failOpen): "+err.Error())
		}
		switch v.Outcome {
		case remote.OverLimit:
			r.refused = true
			return r
		case remote.Failed:
			dp.log.Warn("global rate limit not checked", "route", rt.key, "err", v.Err, "failureMode", l.Policy().FailureMode)
			if l.Policy().FailureMode == remote.FailClosed {
				r.failed = true
				r.warnings = append(r.warnings, "global rate limit not checked, request refused (failClosed): "+v.Err.Error())
				return r
			}
			r.warnings = append(r.warnings, "global rate limit not checked, request let through (failOpen): "+v.Err.Error())
		}
	}
	return r
}

// chargeRemote takes a response's tokens from the global token budgets its
// request matched; what cannot be charged is a warning.
func (c *call) chargeRemote(tokens uint64) {
	for i, l := range c.rt.remote {
		if i >= len(c.remote.verdicts) {
			return
		}
		if err := l.Charge(context.Background(), &c.remote.verdicts[i], tokens); err != nil {
			msg := "global token usage not charged: " + err.Error()
			c.dp.log.Warn(msg, "route", c.rt.key)
			c.warnMu.Lock()
			c.warnings = append(c.warnings, msg)
			c.warnMu.Unlock()
		}
	}
}

// statusRateLimitServiceDown is the answer when a failClosed service
// cannot answer, as in the reference.
const statusRateLimitServiceDown = http.StatusInternalServerError
