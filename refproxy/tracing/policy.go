package tracing

import "github.com/gwdiag/gwdiag/golden/trace"

// PolicyResult is what one policy kind did for a traced request, in the
// reference's `policy` event: applied, with details (a sentence, and
// structured fields beside it), or skipped, with why.
type PolicyResult struct {
	skip    bool
	reason  string
	details string
	fields  map[string]any
}

// Applied is a policy that ran: details says what it did ("refused by
// local[1]: ..."), fields add structured values (nil for none).
func Applied(details string, fields map[string]any) PolicyResult {
	return PolicyResult{details: details, fields: fields}
}

// Skipped is a policy that exists for the request's gateway or route but
// did not run on it, and why.
func Skipped(reason string) PolicyResult { return PolicyResult{skip: true, reason: reason} }

// Policy traces one policy kind's result as a `policy` event
// (`{kind, result: {type: apply, details, ...}}` or `{kind, result: {type:
// skip, reason}}`). It is the one place where a policy kind reports, so a
// new kind needs only to call it; severity is warn when the policy refused
// the request (refused is set).
func (t *Tracer) Policy(kind string, r PolicyResult, refused bool) {
	if t == nil {
		return
	}
	result := map[string]any{}
	if r.skip {
		result["type"], result["reason"] = "skip", r.reason
	} else {
		result["type"], result["details"] = "apply", r.details
		for k, v := range r.fields {
			result[k] = v
		}
	}
	sev := trace.SeverityInfo
	if refused {
		sev = trace.SeverityWarn
	}
	t.Emit(sev, trace.PolicyResultType, map[string]any{"kind": kind, "result": result})
}
