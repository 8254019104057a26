// Reasons: why a traced request ended as it did (spec part 6: "The trace
// tells why a request matched or did not match a route, why a policy
// applied or not, and why an unexpected status was returned"), built in
// this one place and only for traced requests:
//
//   - routeSelection carries `listener` and `reasons`, one per route of
//     the bind: selected, shadowed (matches too, but another goes first),
//     or noMatch with the first condition that failed (`condition`,
//     `name`, `want`, `got`, `missing`) and a `reason` sentence;
//   - a `policy` event per policy kind (the reference's newer event: result
//     {type: apply, details, ...} or {type: skip, reason}) through
//     tracePolicy (below), the hook every policy kind reports through;
//   - requestFinished carries `status` and, for a status the backend did
//     not give, `cause` {kind, reason, ...}.
//
// Nothing here runs for an untraced request.
package proxy

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gwdiag/gwdiag/golden/routing"
	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/explain"
	"github.com/gwdiag/gwdiag/refproxy/celexpr"
	"github.com/gwdiag/gwdiag/refproxy/config"
	"github.com/gwdiag/gwdiag/refproxy/internal/llm"
	"github.com/gwdiag/gwdiag/refproxy/internal/tracing"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit/remote"
)

// policySource is where a route's policy comes from: a top-level policy
// (by name) and what it targets, or the route's inline policies.
type policySource struct {
	policy int    // index in config.Policies; -1 for inline policies
	name   string // namespace/name of a top-level policy
	target string // "gateway bind/3000", "route default/api rule a"
}

// String names the source for a reason.
func (s policySource) String() string {
	if s.policy < 0 {
		return "the inline policies of " + s.target
	}
	return "policy " + s.name + " (" + s.target + ")"
}

// limitEntry is one local limit of a route with its source: the index
// in the source's localRateLimit list (the policy resource's local[]), and
// for an entry of the conditional form, its condition ("" for the
// fallback).
type limitEntry struct {
	lim         limit
	spec        config.RateLimit
	src         policySource
	index       int
	conditional bool
	condition   string
}

// policyTarget is a configured policy that targets the route's gateway
// or name, with why it does not apply (skip), or "" when it does.
type policyTarget struct {
	src   policySource
	kinds []string
	skip  string
}

// policyKinds are the effectivePolicy keys a policy block sets.
func policyKinds(p config.Policies) []string {
	var out []string
	for _, k := range []struct {
		name string
		set  bool
	}{
		{"localRateLimit", len(p.LocalRateLimit) > 0 || len(p.LocalRateLimitConditional) > 0},
		{"remoteRateLimit", p.RemoteRateLimit != nil},
		{"authorization", p.Authorization != nil},
		{kindJWT, p.JWTAuth != nil},
		{kindBasicAuth, p.BasicAuth != nil},
		{kindAPIKey, p.APIKey != nil},
		{kindBackendAuth, p.BackendAuth != nil},
		{"cors", p.CORS != nil},
		{"directResponse", p.DirectResponse != nil},
		{"requestHeaderModifier", p.RequestHeaderModifier != nil},
		{"responseHeaderModifier", p.ResponseHeaderModifier != nil},
	} {
		if k.set {
			out = append(out, k.name)
		}
	}
	return out
}

// maxRouteReasons bounds the reasons routeSelection carries: a bind of
// thousands of routes would make one event larger than a reader takes
// (gwdiag's bound is 1 MiB). The selected route's reason and the closest
// miss's are always kept; the others past the bound are counted in
// reasonsOmitted.
const maxRouteReasons = 100

// traceRouteSelection emits routeSelection for a request no route took
// (the selected route's is captured: renderRouteSelection).
func traceRouteSelection(tr *tracing.Tracer, sel routing.Selection) {
	c := tracing.Capture{Render: renderSelection}
	c.Refs[0] = &sel
	sev := trace.SeverityInfo
	if sel.Route == nil {
		sev = trace.SeverityError
	}
	tr.Record(sev, trace.RouteSelection, nil, c)
}

// renderSelection is routeSelection's members for the selection in
// c.Refs[0].
func renderSelection(b []byte, _ *tracing.Tracer, c tracing.Capture) []byte {
	return appendRouteSelection(b, *c.Refs[0].(*routing.Selection))
}

// appendRouteSelection appends routeSelection's members for sel, in key
// order: the evaluated routes as the reference lists them (those
// registered for the request's host), the listener, a reason per route
// of the bind (appendRouteReasons) and how many were left out, and the
// selected route (or null). TestRouteReasonsMatchMaps holds them to the
// maps they stand for.
func appendRouteSelection(b []byte, sel routing.Selection) []byte {
	b = append(b, `"evaluatedRoutes":[`...)
	for i, r := range sel.Evaluated {
		if i > 0 {
			b = append(b, ',')
		}
		b = tracing.AppendString(b, r)
	}
	b = append(b, ']')
	if sel.Listener != nil {
		b = append(b, `,"listener":`...)
		b = tracing.AppendString(b, sel.Listener.Key)
	}
	b = append(b, `,"reasons":`...)
	b, omitted := appendRouteReasons(b, sel)
	if omitted > 0 {
		b = append(b, `,"reasonsOmitted":`...)
		b = strconv.AppendInt(b, int64(omitted), 10)
	}
	b = append(b, `,"selectedRoute":`...)
	if sel.Route == nil {
		return append(b, "null"...)
	}
	return tracing.AppendString(b, sel.Route.Key)
}

// appendRouteReasons appends routeSelection's reasons as JSON: for each route (at
// most maxRouteReasons, besides the selected one and the closest miss,
// the others counted in omitted), its key, result and reason; the index
// of its closest match when it has several; for a miss, the condition it
// failed on (kind, want, got, and the header or parameter and whether it
// was missing). Keys in encoding/json's order.
func appendRouteReasons(b []byte, sel routing.Selection) (_ []byte, omitted int) {
	closest, _ := sel.Closest()
	b = append(b, '[')
	n := 0
	for i, v := range sel.Verdicts {
		if i >= maxRouteReasons && v.Result != routing.Selected && &sel.Verdicts[i] != closest {
			omitted++
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, '{')
		miss := v.Result == routing.NoMatch
		c := v.Failed
		if miss {
			b = append(b, `"condition":`...)
			b = tracing.AppendString(b, string(c.Kind))
			b = append(b, `,"got":`...)
			b = tracing.AppendString(b, c.Got)
			b = append(b, ',')
		}
		if len(v.Route.Matches) > 1 {
			b = append(b, `"match":`...)
			b = strconv.AppendInt(b, int64(v.Match), 10)
			b = append(b, ',')
		}
		if miss && c.Missing {
			b = append(b, `"missing":true,`...)
		}
		if miss && c.Name != "" {
			b = append(b, `"name":`...)
			b = tracing.AppendString(b, c.Name)
			b = append(b, ',')
		}
		b = append(b, `"reason":`...)
		b = tracing.AppendString(b, v.Reason())
		b = append(b, `,"result":`...)
		b = tracing.AppendString(b, string(v.Result))
		b = append(b, `,"route":`...)
		b = tracing.AppendString(b, v.Route.Key)
		if miss {
			b = append(b, `,"want":`...)
			b = tracing.AppendString(b, c.Want)
		}
		b = append(b, '}')
	}
	return append(b, ']'), omitted
}

// redactSelection shows the request's values of the headers rd redacts
// as the trace shows them (redact's value rules: the scheme of an
// authorization kept, its credential a fingerprint) in sel's reasons: the
// value a header condition got, and so the reason that quotes it. What a
// route wants is its config, shown as /config_dump shows it; a route that
// took the request wants what the request carried, which the scrubbing
// pass finds.
func redactSelection(sel *routing.Selection, rd *tracing.Redaction) {
	for i := range sel.Verdicts {
		c := &sel.Verdicts[i].Failed
		if c.Kind != routing.KindHeader || c.Missing || c.Got == "" {
			continue
		}
		if name, ok := rd.Sensitive(c.Name); ok {
			c.Got = rd.Redactor().Value(name, c.Got)
		}
	}
}

// applied is a policy that ran, in the reference's `policy` event: details
// says what it did ("refused by local[1]: ..."), o holds the kind's
// structured fields beside it (trace.PolicyOutcome).
func applied(details string, o trace.PolicyOutcome) trace.PolicyOutcome {
	o.Type, o.Details = "apply", details
	return o
}

// skipped is a policy that exists for the request's gateway or route but
// did not run on it, and why.
func skipped(reason string) trace.PolicyOutcome {
	return trace.PolicyOutcome{Type: "skip", Reason: reason}
}

// tracePolicy traces one policy kind's result as a `policy` event
// (`{kind, result: {type: apply, details, ...}}` or `{kind, result: {type:
// skip, reason}}`, trace.PolicyResult). It is the one place where a policy
// kind reports, so a new kind needs only to call it; severity is warn when
// the policy refused the request (refused is set). The result is written
// from its type, whose fields are in key order: the bytes a map of them
// would give.
func tracePolicy(tr *tracing.Tracer, kind string, r trace.PolicyOutcome, refused bool) {
	if tr == nil {
		return
	}
	sev := trace.SeverityInfo
	if refused {
		sev = trace.SeverityWarn
	}
	tr.Emit(sev, trace.PolicyResultType, map[string]any{"kind": kind, "result": r})
}

// traceSkippedPolicies reports the policies that target the route's
// gateway or name but not this request (another listener, port or rule).
func traceSkippedPolicies(tr *tracing.Tracer, rt *route) {
	for _, p := range rt.policies {
		if p.skip == "" {
			continue
		}
		for _, k := range p.kinds {
			tracePolicy(tr, k, skipped(p.src.String()+" "+p.skip), false)
		}
	}
}

// traceLocalLimit reports the local limits' decision: each entry with its
// source, what it holds and when it refills, and the entries that
// refused, which it returns in words.
func traceLocalLimit(tr *tracing.Tracer, rt *route, d ratelimit.Decision, states []ratelimit.BucketState) string {
	entries := make([]trace.LimitEntry, 0, len(rt.limits))
	var refusedBy, wouldRefuse []string
	nApplied := 0
	for i, le := range rt.limits {
		e := limitFields(le)
		e.Entry = &i
		if le.conditional {
			// An entry of the conditional form applies when its condition
			// is the first of its group to hold (none: the fallback).
			e.Condition = trace.Null[string]()
			if le.condition != "" {
				e.Condition = trace.Some(le.condition)
			}
			e.Applies = new(bool)
		}
		for _, st := range states {
			if !le.lim.holds(st.Bucket) {
				continue
			}
			nApplied++
			if le.conditional {
				*e.Applies = true
			}
			e.Remaining, e.ResetSeconds = remaining(st.Remaining), seconds(st.Reset)
			bucket := keyFields(tr, &e, le, st.Bucket)
			if st.Refused {
				why := fmt.Sprintf("localRateLimit[%d] of %s (%s)%s: %s, refills in %s",
					le.index, le.src, describeLimit(le.spec), bucket, describeLeft(le.spec, st.Remaining), inSeconds(st.Reset))
				if le.spec.Shadow {
					// Counted, never refusing: what it would have done.
					e.WouldRefuse = true
					wouldRefuse = append(wouldRefuse, why)
				} else {
					e.Refused = true
					refusedBy = append(refusedBy, why)
				}
			}
		}
		entries = append(entries, e)
	}
	details := fmt.Sprintf("allowed by %d %s", nApplied, explain.Plural(nApplied, "entry", "entries"))
	if !d.Allowed {
		details = "refused by " + strings.Join(refusedBy, "; ")
	}
	if len(wouldRefuse) > 0 {
		details += "; would have been refused by the shadow " + strings.Join(wouldRefuse, "; ")
	}
	decision := "allowed"
	if !d.Allowed {
		decision = "refused"
	}
	tracePolicy(tr, "localRateLimit", applied(details, trace.PolicyOutcome{Decision: decision, Entries: entries}), !d.Allowed)
	return details
}

// traceTokenCharge reports the tokens a response's usage took from the
// route's local token limits (spec part 7: counted after the response),
// and what each limit has left: the reason of a later 429. usage is the
// response's, its input and output tokens apart (an OTLP span's
// gen_ai.usage.*).
func traceTokenCharge(tr *tracing.Tracer, rt *route, held *ratelimit.Held, tokens uint64, usage llm.Usage) {
	now := time.Now()
	var entries []trace.LimitEntry
	var left []string
	for i, le := range rt.limits {
		if le.spec.Type != string(ratelimit.Tokens) {
			continue
		}
		for _, b := range held.Buckets() {
			if !le.lim.holds(b) {
				continue
			}
			rem, reset := b.Remaining(now), b.Reset(now)
			e := limitFields(le)
			e.Entry, e.Remaining, e.ResetSeconds = &i, remaining(rem), seconds(reset)
			bucket := keyFields(tr, &e, le, b)
			entries = append(entries, e)
			left = append(left, fmt.Sprintf("localRateLimit[%d] of %s (%s)%s: %s, refills in %s",
				le.index, le.src, describeLimit(le.spec), bucket, describeLeft(le.spec, rem), inSeconds(reset)))
		}
	}
	if len(entries) == 0 {
		return
	}
	tr.Emit(trace.SeverityInfo, trace.PolicyEvent, map[string]any{"kind": "localRateLimit",
		"details": fmt.Sprintf("the response's usage took %d tokens; %s", tokens, strings.Join(left, "; ")),
		"tokens":  tokens, "entries": entries,
		"usage": trace.Usage{InputTokens: usage.PromptTokens, OutputTokens: usage.CompletionTokens}})
}

// keyFields adds, for an entry with a key, its key expression and the
// bucket b of the request (its key, or the shared bucket of requests
// without one) to e, and returns the bucket in words (" for key
// \"alice\"", " in the bucket of requests without a key"); "" for an
// entry without a key. A key that is a credential of the request (an
// x-api-key) is shown as its marker: in the sentence too, where the
// scrubbing pass would not find a short one.
func keyFields(tr *tracing.Tracer, e *trace.LimitEntry, le limitEntry, b *ratelimit.Bucket) string {
	if le.lim.keyed == nil {
		return ""
	}
	e.Key = &le.spec.Key
	if b.Key() == "" {
		e.Bucket = trace.Null[string]()
		return " in the bucket of requests without a key"
	}
	key := tr.Shown(b.Key())
	e.Bucket = trace.Some(key)
	return fmt.Sprintf(" for key %q", key)
}

// limitFields are a limit entry's configuration and source.
func limitFields(le limitEntry) trace.LimitEntry {
	typ := le.spec.Type
	if typ == "" {
		typ = string(ratelimit.Requests)
	}
	e := trace.LimitEntry{Index: le.index, From: le.src.String(), Type: typ, MaxTokens: le.spec.MaxTokens,
		TokensPerFill: le.spec.TokensPerFill, FillInterval: le.spec.FillInterval.String(), Shadow: le.spec.Shadow}
	if le.src.policy >= 0 {
		e.Policy = le.src.name
	}
	return e
}

// remaining is what a bucket holds, as a limit entry writes it.
func remaining(n uint64) *int64 {
	v := int64(min(n, math.MaxInt64))
	return &v
}

// seconds is a reset as x-ratelimit-reset says it (ratelimit.ResetSeconds),
// for a reason's resetSeconds.
func seconds(d time.Duration) *int64 {
	v := ratelimit.ResetSeconds(d)
	return &v
}

// describeLimit is a limit entry in words: "1000 tokens per minute",
// "3 requests per second (bucket of 6)".
func describeLimit(rl config.RateLimit) string {
	typ := rl.Type
	if typ == "" {
		typ = string(ratelimit.Requests)
	}
	if rl.TokensPerFill == 1 {
		typ = strings.TrimSuffix(typ, "s")
	}
	s := fmt.Sprintf("%d %s per %s", rl.TokensPerFill, typ, explain.Per(time.Duration(rl.FillInterval)))
	if rl.MaxTokens != rl.TokensPerFill {
		s += fmt.Sprintf(" (bucket of %d)", rl.MaxTokens)
	}
	return s
}

func describeLeft(rl config.RateLimit, remaining uint64) string {
	if remaining == 0 {
		return "exhausted"
	}
	return fmt.Sprintf("%d of %d left", remaining, rl.MaxTokens)
}

// inSeconds is a reset in a reason's words ("42 s"): the number the
// client's x-ratelimit-reset and the entry's resetSeconds say, so that a
// trace, its explanation and the headers agree.
func inSeconds(d time.Duration) string {
	return strconv.FormatInt(ratelimit.ResetSeconds(d), 10) + " s"
}

// traceRemoteLimits reports each global limit of the route: the
// descriptors sent and the service's answer, or its failure and what the
// failure mode made of it. It returns the details of the limit that
// refused the request or failed it.
func traceRemoteLimits(tr *tracing.Tracer, rt *route, r remoteResult) string {
	decided := ""
	for i, l := range rt.remote {
		p := l.Policy()
		src := ""
		if i < len(rt.remoteFrom) {
			src = rt.remoteFrom[i].String()
		}
		if i >= r.asked {
			tracePolicy(tr, "remoteRateLimit", skipped(fmt.Sprintf("%s: not asked, an earlier global limit decided", src)), false)
			continue
		}
		v := &r.verdicts[i]
		sent := v.Sent()
		base := trace.PolicyOutcome{Service: p.Addr, Domain: p.Domain, From: src, FailureMode: string(p.FailureMode)}
		switch {
		case v.Outcome == remote.Failed:
			action := "request let through (failOpen)"
			if p.FailureMode == remote.FailClosed {
				action = "request refused with 500 (failClosed)"
			}
			base.Decision, base.Error, base.Descriptors = "failed", v.Err.Error(), descriptorFields(tr, sent)
			details := fmt.Sprintf("the rate limit service %s could not answer (%v): %s", p.Addr, v.Err, action)
			tracePolicy(tr, "remoteRateLimit", applied(details, base), p.FailureMode == remote.FailClosed)
			if p.FailureMode == remote.FailClosed {
				decided = details
			}
		case len(sent) == 0:
			tracePolicy(tr, "remoteRateLimit", skipped(fmt.Sprintf("%s: no descriptor applies to the request (each has an expression that failed or gave no string)", src)), false)
		default:
			decision, verb := "allowed", "allowed"
			if v.Outcome == remote.OverLimit {
				decision, verb = "refused", "refused"
			}
			base.Decision, base.Descriptors = decision, descriptorFields(tr, sent)
			details := fmt.Sprintf("%s by the rate limit service %s (domain %s): %s", verb, p.Addr, p.Domain, describeSent(tr, sent))
			tracePolicy(tr, "remoteRateLimit", applied(details, base), v.Outcome == remote.OverLimit)
			if v.Outcome == remote.OverLimit {
				decided = details
			}
		}
	}
	return decided
}

// descriptorFields are the descriptors sent, an entry's value that is a
// credential of the request (a descriptor of an x-api-key) shown as its
// marker.
func descriptorFields(tr *tracing.Tracer, sent []remote.DescriptorResult) []trace.Descriptor {
	out := make([]trace.Descriptor, 0, len(sent))
	for _, d := range sent {
		entries := make(map[string]string, len(d.Entries))
		for _, e := range d.Entries {
			entries[e.Key] = tr.Shown(e.Value)
		}
		typ := "requests"
		if d.Tokens {
			typ = "tokens"
		}
		td := trace.Descriptor{Entries: entries, Type: typ, Code: d.Code}
		if d.HasLimit {
			limit, rem := uint64(d.Limit), uint64(d.Remaining)
			td.Limit, td.Unit, td.Remaining, td.ResetSeconds = &limit, d.Unit, &rem, seconds(d.Reset)
		}
		out = append(out, td)
	}
	return out
}

// describeSent is each descriptor and the service's answer:
// "{generic_key=a} 2 requests per day, 0 left, resets in 86399 s
// (OVER_LIMIT)", a value that is a credential of the request shown as its
// marker.
func describeSent(tr *tracing.Tracer, sent []remote.DescriptorResult) string {
	parts := make([]string, 0, len(sent))
	for _, d := range sent {
		kv := make([]string, 0, len(d.Entries))
		for _, e := range d.Entries {
			kv = append(kv, e.Key+"="+tr.Shown(e.Value))
		}
		s := "{" + strings.Join(kv, ", ") + "}"
		typ := "requests"
		if d.Tokens {
			typ = "tokens"
		}
		if d.HasLimit {
			if d.Limit == 1 {
				typ = strings.TrimSuffix(typ, "s")
			}
			s += fmt.Sprintf(" %d %s per %s, %d left, resets in %s", d.Limit, typ, d.Unit, d.Remaining, inSeconds(d.Reset))
		}
		if d.Code != "" {
			s += " (" + d.Code + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// traceAuthzRefusal reports why the route's authorization refused the
// request: the first deny rule that holds, else the first require rule
// that does not, else that no allow rule holds; it returns it in words.
func traceAuthzRefusal(tr *tracing.Tracer, sets []*authzPolicy, act *celActivation) string {
	why := ""
	for _, s := range sets {
		for i, p := range s.deny {
			if why == "" && celexpr.Holds(p, act) {
				why = fmt.Sprintf("deny rule %q holds", s.denyExpr[i])
			}
		}
	}
	for _, s := range sets {
		for i, p := range s.require {
			if why == "" && !celexpr.Holds(p, act) {
				why = fmt.Sprintf("require rule %q does not hold", s.requireExpr[i])
			}
		}
	}
	if why == "" {
		var allow []string
		for _, s := range sets {
			allow = append(allow, s.allowExpr...)
		}
		why = fmt.Sprintf("no allow rule holds (%s)", strings.Join(quoteAll(allow), ", "))
	}
	tracePolicy(tr, "authorization", applied("refused: "+why, trace.PolicyOutcome{Decision: "refused"}), true)
	return why
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// Cause kinds of requestFinished.cause: why the proxy answered a status
// the backend did not give.
const (
	causeNoRoute     = "noRoute"
	causeRateLimit   = "rateLimit"
	causeLimitDown   = "rateLimitServiceUnavailable"
	causeNoBackend   = "noBackend"
	causeUnreachable = "backendUnreachable"
	causeBackend     = "backendError"
	causeBody        = "backendBody"
	causeClientBody  = "clientBody"
	causeAuthz       = "authorization"
	causeDirect      = "directResponse"
	causeNoModel     = "noModel"
)

// cause is why the proxy answered as it did.
type cause struct {
	kind   string
	policy string // the policy kind that refused, for rateLimit
	reason string
}

// fields are requestFinished's status and cause.
func (c cause) fields(status int) map[string]any {
	m := map[string]any{"status": status}
	if c.kind != "" {
		m["cause"] = trace.Cause{Kind: c.kind, Policy: c.policy, Reason: c.reason}
	}
	return m
}

// noRouteCause says why no route took the request: the closest route's
// failed condition, or the path when every route failed on it.
func noRouteCause(sel routing.Selection, host, path string) cause {
	if sel.Listener == nil {
		return cause{kind: causeNoRoute, reason: fmt.Sprintf("no listener of the port serves host %q", host)}
	}
	best, n := sel.Closest()
	switch {
	case best == nil:
		return cause{kind: causeNoRoute, reason: "listener " + sel.Listener.Key + " has no route for host " + strconv.Quote(host)}
	case best.Failed.Kind == routing.KindPath && n > 1:
		return cause{kind: causeNoRoute, reason: fmt.Sprintf("no route of listener %s matches path %q (%d routes)", sel.Listener.Key, path, n)}
	}
	return cause{kind: causeNoRoute, reason: fmt.Sprintf("no route of listener %s matches (%d %s); closest, %s: %s",
		sel.Listener.Key, n, explain.Plural(n, "route", "routes"), best.Route.Key, best.Reason())}
}

// backendCause says why a forwarded request failed: the backend could
// not be reached (503), answered wrongly or cut its body short (502), or
// the client's body was malformed (400).
func backendCause(c *call) cause {
	be := "backend " + c.be.addr
	if c.be.name != c.be.addr {
		be = fmt.Sprintf("backend %s (%s)", c.be.name, c.be.addr)
	}
	switch {
	case c.err == nil:
		return cause{}
	case c.clientFault:
		return cause{kind: causeClientBody, reason: c.err.Error()}
	case isBodyError(c.err):
		// "backend body cut short: unexpected EOF"
		return cause{kind: causeBody, reason: be + " " + strings.TrimPrefix(c.err.Error(), "backend ")}
	case unreachable(c.err):
		return cause{kind: causeUnreachable, reason: fmt.Sprintf("%s could not be reached: %v", be, c.err)}
	}
	return cause{kind: causeBackend, reason: fmt.Sprintf("%s answered wrongly: %v", be, c.err)}
}
