// Package otlp is a trace as OpenTelemetry sees it: the span tree of one
// request's /debug/trace events (Tree), and their export to an OTLP
// collector (Exporter). The reference proxy exports its requests through
// it (config.tracing), and `gwdiag trace --otlp` the traces it reads, so
// that a request traced on a proxy without telemetry lands beside the rest
// in an operator's tracing backend, as the same tree.
//
// The tree (docs/otlp.md): the request is a server span; its children are
// the route selection, one span per policy kind that ran (a `policy`
// event: from the event before it to it), and one client span per backend
// call attempt (backendCallResult's eventStart to its eventEnd). Other
// events (snapshots, policyEvent, cel, the reference's newer types) are
// span events of the request's span, at their time. Attributes follow
// OpenTelemetry's semantic conventions for HTTP (http.request.method,
// http.response.status_code, url.path, server.address, ...) and for
// generative AI where the trace says (gen_ai.request.model,
// gen_ai.provider.name, gen_ai.usage.*); what the conventions do not
// name is under gateway.* (route, listener, the rate-limit decision, the
// cause of a status the backend did not give, and gwdiag's verdict).
package otlp

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/explain"
)

// Span is one span of a request's tree. Times are the events': microseconds
// since the proxy took the request.
type Span struct {
	Name string
	Kind oteltrace.SpanKind
	// Parent is the index of the parent span in the tree; -1 for the
	// request's span, which is first.
	Parent     int
	Start, End int64
	Attrs      []attribute.KeyValue
	Events     []SpanEvent
	// Error: the span's status is Error, with Message.
	Error   bool
	Message string
	// Backend: the span is a backend call attempt, the one the request's
	// traceparent to the backend names when it is the last (BackendSpan).
	Backend bool
}

// SpanEvent is a point event of a span.
type SpanEvent struct {
	Name  string
	At    int64
	Attrs []attribute.KeyValue
}

// Attribute keys gwdiag's spans use beyond the semantic conventions'.
const (
	AttrRoute          = "gateway.route"
	AttrListener       = "gateway.listener"
	AttrRoutesSeen     = "gateway.routes.evaluated"
	AttrRequestID      = "gateway.request_id"
	AttrCauseKind      = "gateway.cause.kind"
	AttrCausePolicy    = "gateway.cause.policy"
	AttrCauseReason    = "gateway.cause.reason"
	AttrVerdict        = "gateway.verdict"
	AttrComplete       = "gateway.trace.complete"
	AttrPolicyKind     = "gateway.policy.kind"
	AttrPolicyResult   = "gateway.policy.result"
	AttrPolicyDecision = "gateway.policy.decision"
	AttrPolicyDetails  = "gateway.policy.details"
	AttrRateDecision   = "gateway.ratelimit.decision"
	AttrRateLimit      = "gateway.ratelimit.limit"
	AttrRateRemaining  = "gateway.ratelimit.remaining"
	AttrRateReset      = "gateway.ratelimit.reset_seconds"
	AttrRateRefusedBy  = "gateway.ratelimit.refused_by"
	AttrBackendTarget  = "gateway.backend.target"
	AttrBackendError   = "gateway.backend.error"
	AttrBackendRetry   = "gateway.backend.retried"
	AttrEventType      = "gateway.event.type"
	AttrEventSeverity  = "gateway.event.severity"
	AttrEventStage     = "gateway.event.stage"
	AttrEventDetails   = "gateway.event.details"
	AttrEventDecision  = "gateway.event.decision"
	AttrTokens         = "gateway.llm.tokens_charged"
)

// Span names of the tree's children.
const (
	NameRouteSelection = "route selection"
	NameBackendCall    = "backend call"
	NamePolicyPrefix   = "policy "
)

// Tree is the span tree of one request's events, in their order (a
// one-shot trace, or one request of a follow stream). The request's span
// is first; the others follow in the order their events came. A trace cut
// short (no requestFinished) still gives a tree, its request span ending
// at its last event and marked gateway.trace.complete=false. No events:
// no tree.
func Tree(events []trace.Event) []Span {
	if len(events) == 0 {
		return nil
	}
	b := builder{}
	root := Span{Kind: oteltrace.SpanKindServer, Parent: -1, Start: events[0].EventEnd, End: events[len(events)-1].EventEnd}
	b.spans = append(b.spans, root)
	prev := events[0].EventEnd
	for _, e := range events {
		b.add(e, prev)
		prev = e.EventEnd
	}
	return b.finish(events)
}

type builder struct {
	spans []Span
	// request is the first snapshot's request; status the client's.
	method, path, query, scheme, host, version, userAgent string
	route, listener, requestID, target                    string
	evaluated                                             int
	status, backendStatus, finalCode                      int
	finished                                              bool
	finishErr                                             string
	cause                                                 *trace.Cause
	model, provider                                       string
	rate                                                  []attribute.KeyValue
	tokens                                                int64
	usage                                                 []attribute.KeyValue
	callStart                                             int64
	callStarted                                           bool
}

func (b *builder) root() *Span { return &b.spans[0] }

func (b *builder) event(e trace.Event, attrs ...attribute.KeyValue) {
	attrs = append([]attribute.KeyValue{attribute.String(AttrEventSeverity, string(e.Severity))}, attrs...)
	if len(e.Scope) > 0 {
		attrs = append(attrs, attribute.StringSlice("gateway.event.scope", e.Scope))
	}
	name := string(e.Type())
	if name == "" {
		name = "event"
	}
	b.root().Events = append(b.root().Events, SpanEvent{Name: name, At: e.EventEnd, Attrs: attrs})
}

func (b *builder) add(e trace.Event, prev int64) {
	m := e.Message
	if b.requestID == "" {
		b.requestID = e.RequestID
	}
	switch e.Type() {
	case trace.RequestStarted:
		b.root().Start = e.EventEnd
	case trace.RequestSnapshot:
		if b.method == "" {
			req := trace.Object(trace.Object(m["requestState"])["request"])
			b.method, b.path, b.scheme, b.host = trace.String(req["method"]), trace.String(req["path"]), trace.String(req["scheme"]), trace.String(req["host"])
			b.version = trace.String(req["version"])
			if _, q, ok := strings.Cut(trace.String(req["pathAndQuery"]), "?"); ok {
				b.query = q
			}
			for k, v := range trace.Object(req["headers"]) {
				if strings.EqualFold(k, "user-agent") {
					b.userAgent = trace.String(v)
				}
			}
		}
		b.event(e, attribute.String(AttrEventStage, e.Stage()))
	case trace.RouteSelection:
		b.route, b.listener = trace.String(m["selectedRoute"]), trace.String(m["listener"])
		attrs := []attribute.KeyValue{attribute.Bool("gateway.route.selected", b.route != "")}
		if ev, ok := m["evaluatedRoutes"].([]any); ok {
			b.evaluated = len(ev)
			attrs = append(attrs, attribute.Int(AttrRoutesSeen, len(ev)))
		}
		if b.route != "" {
			attrs = append(attrs, attribute.String(AttrRoute, b.route))
		}
		if b.listener != "" {
			attrs = append(attrs, attribute.String(AttrListener, b.listener))
		}
		b.spans = append(b.spans, Span{Name: NameRouteSelection, Kind: oteltrace.SpanKindInternal, Start: b.root().Start, End: e.EventEnd, Attrs: attrs})
	case trace.PolicyResultType:
		b.policy(e, prev)
	case trace.BackendCallStart:
		b.target = trace.String(m["target"])
		b.callStart, b.callStarted = e.EventEnd, true
		b.event(e, attribute.String(AttrBackendTarget, b.target))
	case trace.BackendCallResult:
		b.call(e)
	case trace.ResponseSnapshot:
		resp := trace.Object(trace.Object(m["requestState"])["response"])
		if c := trace.Int(resp["code"]); c != 0 && (e.Stage() == trace.StageFinalResponse || b.finalCode == 0) {
			b.finalCode = c
		}
		b.event(e, attribute.String(AttrEventStage, e.Stage()))
	case trace.RequestFinished:
		b.finished = true
		b.status = trace.Int(m["status"])
		b.finishErr = trace.String(m["error"])
		if c := new(trace.Cause); trace.DecodeReason(m["cause"], c) {
			b.cause = c
		}
		b.root().End = e.EventEnd
	case trace.PolicyEvent:
		attrs := []attribute.KeyValue{attribute.String(AttrPolicyKind, trace.String(m["kind"])), attribute.String(AttrEventDetails, text(m["details"]))}
		if t, ok := m["tokens"].(float64); ok {
			b.tokens += int64(t)
			attrs = append(attrs, attribute.Int64(AttrTokens, int64(t)))
		}
		b.usageOf(m)
		b.event(e, attrs...)
	case trace.LLMRequestDetected:
		// The reference's (REFERENCE.md): provider, requestModel,
		// streaming, inputFormat.
		b.model, b.provider = trace.String(m["requestModel"]), trace.String(m["provider"])
		b.event(e, attribute.String("gen_ai.request.model", b.model), attribute.String("gen_ai.provider.name", b.provider))
	default:
		var attrs []attribute.KeyValue
		if s := e.Stage(); s != "" {
			attrs = append(attrs, attribute.String(AttrEventStage, s))
		}
		if d, ok := m["details"]; ok {
			attrs = append(attrs, attribute.String(AttrEventDetails, text(d)))
		}
		if d, ok := m["decision"]; ok {
			attrs = append(attrs, attribute.String(AttrEventDecision, text(d)))
		}
		b.usageOf(m)
		b.event(e, attrs...)
	}
}

// usageOf reads an LLM usage a proxy's event carries (inputTokens,
// outputTokens, as the reference's LLM events and refproxy's charge name
// them), for gen_ai.usage.* on the request.
func (b *builder) usageOf(m map[string]any) {
	u := trace.Object(m["usage"])
	if u == nil {
		return
	}
	for _, k := range [...][2]string{{"inputTokens", "gen_ai.usage.input_tokens"}, {"outputTokens", "gen_ai.usage.output_tokens"}} {
		if v, ok := u[k[0]].(float64); ok {
			b.usage = append(b.usage, attribute.Int64(k[1], int64(v)))
		}
	}
}

// policy is a `policy` event: a span from the event before it to it.
func (b *builder) policy(e trace.Event, prev int64) {
	var p trace.PolicyResult
	trace.DecodeReason(e.Message, &p)
	res := p.Result
	attrs := []attribute.KeyValue{attribute.String(AttrPolicyKind, p.Kind), attribute.String(AttrPolicyResult, res.Type)}
	if res.Decision != "" {
		attrs = append(attrs, attribute.String(AttrPolicyDecision, res.Decision))
	}
	details := res.Details
	if res.Type == "skip" {
		details = res.Reason
	}
	if details != "" {
		attrs = append(attrs, attribute.String(AttrPolicyDetails, details))
	}
	if rate := rateAttrs(p.Kind, res); len(rate) > 0 {
		attrs = append(attrs, rate...)
		// The request's span carries the decision of the limit that
		// refused it, else of the last limit that ran.
		if len(b.rate) == 0 || res.Decision == "refused" || res.Decision == "failed" {
			b.rate = rate
		}
	}
	s := Span{Name: NamePolicyPrefix + p.Kind, Kind: oteltrace.SpanKindInternal, Start: min(prev, e.EventEnd), End: e.EventEnd, Attrs: attrs}
	if res.Decision == "refused" || res.Decision == "failed" {
		s.Error, s.Message = true, details
	}
	b.spans = append(b.spans, s)
}

// rateAttrs are a rate-limit policy's decision: the entry that refused
// (else the most constrained), its limit, what it has left and when it
// refills: a local limit's entries (trace.LimitEntry), a global limit's
// descriptors with the service's answer (trace.Descriptor).
func rateAttrs(kind string, res trace.PolicyOutcome) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	if res.Decision != "" {
		attrs = append(attrs, attribute.String(AttrRateDecision, res.Decision))
	}
	switch kind {
	case "localRateLimit":
		var pick *trace.LimitEntry
		for i := range res.Entries {
			en := &res.Entries[i]
			if en.Remaining == nil {
				continue
			}
			if pick == nil || en.Refused && !pick.Refused || en.Refused == pick.Refused && *en.Remaining < *pick.Remaining {
				pick = en
			}
		}
		if pick == nil {
			return attrs
		}
		attrs = append(attrs, attribute.Int64(AttrRateLimit, int64(pick.MaxTokens)), attribute.Int64(AttrRateRemaining, *pick.Remaining))
		if pick.ResetSeconds != nil {
			attrs = append(attrs, attribute.Int64(AttrRateReset, *pick.ResetSeconds))
		}
		if pick.Refused {
			attrs = append(attrs, attribute.String(AttrRateRefusedBy, fmt.Sprintf("localRateLimit[%d] of %s", pick.Index, pick.From)))
		}
	case "remoteRateLimit":
		var pick *trace.Descriptor
		for i := range res.Descriptors {
			d := &res.Descriptors[i]
			if pick == nil || d.Code == "OVER_LIMIT" && pick.Code != "OVER_LIMIT" {
				pick = d
			}
		}
		if pick == nil {
			return attrs
		}
		if pick.Limit != nil {
			attrs = append(attrs, attribute.Int64(AttrRateLimit, int64(*pick.Limit)))
		}
		if pick.Remaining != nil {
			attrs = append(attrs, attribute.Int64(AttrRateRemaining, int64(*pick.Remaining)))
		}
		if pick.ResetSeconds != nil {
			attrs = append(attrs, attribute.Int64(AttrRateReset, *pick.ResetSeconds))
		}
		if pick.Code == "OVER_LIMIT" {
			var entries any
			if pick.Entries != nil {
				entries = pick.Entries
			}
			attrs = append(attrs, attribute.String(AttrRateRefusedBy, "remoteRateLimit "+text(entries)))
		}
	}
	return attrs
}

// call is a backendCallResult: a client span per attempt.
func (b *builder) call(e trace.Event) {
	m := e.Message
	start := b.callStart
	if e.EventStart != nil {
		start = *e.EventStart
	} else if !b.callStarted {
		start = e.EventEnd
	}
	attrs := []attribute.KeyValue{}
	if b.target != "" {
		attrs = append(attrs, attribute.String(AttrBackendTarget, b.target))
		host, port := splitHostPort(b.target)
		attrs = append(attrs, attribute.String("server.address", host))
		if port > 0 {
			attrs = append(attrs, attribute.Int("server.port", port))
		}
	}
	if b.method != "" {
		attrs = append(attrs, attribute.String("http.request.method", b.method))
	}
	status := trace.Int(m["status"])
	if status != 0 {
		attrs = append(attrs, attribute.Int("http.response.status_code", status))
	}
	if b.model != "" {
		// The backend call is the LLM call.
		attrs = append(attrs, attribute.String("gen_ai.request.model", b.model), attribute.String("gen_ai.provider.name", b.provider),
			attribute.String("gen_ai.operation.name", "chat"))
	}
	retry, _ := m["retry"].(bool)
	if retry {
		attrs = append(attrs, attribute.Bool(AttrBackendRetry, true))
	} else {
		b.backendStatus = status
	}
	s := Span{Name: NameBackendCall, Kind: oteltrace.SpanKindClient, Start: min(start, e.EventEnd), End: e.EventEnd, Attrs: attrs, Backend: true}
	if errText := trace.String(m["error"]); errText != "" {
		s.Attrs = append(s.Attrs, attribute.String(AttrBackendError, errText), attribute.String("error.type", "transport"))
		s.Error, s.Message = true, errText
	} else if status >= 400 {
		// A client span's 4xx and 5xx are errors (the HTTP conventions).
		s.Attrs = append(s.Attrs, attribute.String("error.type", strconv.Itoa(status)))
		s.Error, s.Message = true, "backend answered "+strconv.Itoa(status)
	}
	b.spans = append(b.spans, s)
	b.callStarted = false
}

// finish sets the request span's name and attributes from what the events
// said, and ends a backend call that never returned at the trace's end.
func (b *builder) finish(events []trace.Event) []Span {
	if b.callStarted {
		end := b.root().End
		b.spans = append(b.spans, Span{Name: NameBackendCall, Kind: oteltrace.SpanKindClient, Start: b.callStart, End: max(end, b.callStart), Backend: true,
			Attrs: []attribute.KeyValue{attribute.String(AttrBackendTarget, b.target), attribute.Bool("gateway.backend.unfinished", true)}})
	}
	r := b.root()
	status := b.status
	if status == 0 {
		status = b.finalCode
	}
	if status == 0 {
		status = b.backendStatus
	}
	r.Name = b.method
	if r.Name == "" {
		r.Name = "HTTP"
	}
	if b.route != "" {
		r.Name += " " + explain.ShortRoute(b.route)
	}
	var a []attribute.KeyValue
	add := func(k, v string) {
		if v != "" {
			a = append(a, attribute.String(k, v))
		}
	}
	add("http.request.method", b.method)
	add("url.path", b.path)
	add("url.query", b.query)
	add("url.scheme", b.scheme)
	host, port := splitHostPort(b.host)
	add("server.address", host)
	if port > 0 {
		a = append(a, attribute.Int("server.port", port))
	}
	add("network.protocol.version", strings.TrimPrefix(b.version, "HTTP/"))
	add("user_agent.original", b.userAgent)
	add("http.route", b.route)
	add(AttrRoute, b.route)
	add(AttrListener, b.listener)
	add(AttrRequestID, b.requestID)
	if status != 0 {
		a = append(a, attribute.Int("http.response.status_code", status))
	}
	if b.cause != nil {
		add(AttrCauseKind, b.cause.Kind)
		add(AttrCausePolicy, b.cause.Policy)
		add(AttrCauseReason, b.cause.Reason)
	}
	a = append(a, b.rate...)
	if b.model != "" {
		add("gen_ai.request.model", b.model)
		add("gen_ai.provider.name", b.provider)
	}
	if b.tokens > 0 {
		a = append(a, attribute.Int64(AttrTokens, b.tokens))
	}
	a = append(a, b.usage...)
	a = append(a, attribute.Bool(AttrComplete, b.finished))
	v := explain.Events(events)
	add(AttrVerdict, v.Line)
	r.Attrs = a
	switch {
	case b.finishErr != "":
		r.Error, r.Message = true, b.finishErr
	case status >= 500:
		// A server span's 5xx is an error; a 4xx is the client's.
		r.Error, r.Message = true, v.Line
		r.Attrs = append(r.Attrs, attribute.String("error.type", strconv.Itoa(status)))
	}
	return b.spans
}

// StartTime is when the request of a trace started, as its first request
// snapshot says (requestState.request.startTime, RFC 3339): the events'
// zero. false: no snapshot says.
func StartTime(events []trace.Event) (time.Time, bool) {
	for _, e := range events {
		if e.Type() != trace.RequestSnapshot {
			continue
		}
		st := trace.String(trace.Object(trace.Object(e.Message["requestState"])["request"])["startTime"])
		if t, err := time.Parse(time.RFC3339Nano, st); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// BackendSpan is the index of the span a request's traceparent to its
// backend names: its last backend call attempt; -1 when it made none.
func BackendSpan(spans []Span) int {
	for i := len(spans) - 1; i >= 0; i-- {
		if spans[i].Backend {
			return i
		}
	}
	return -1
}

func splitHostPort(hp string) (string, int) {
	i := strings.LastIndexByte(hp, ':')
	if i < 0 || strings.Contains(hp[i:], "]") {
		return strings.Trim(hp, "[]"), 0
	}
	p, err := strconv.Atoi(hp[i+1:])
	if err != nil {
		return hp, 0
	}
	return strings.Trim(hp[:i], "[]"), p
}

// text is a field as a string: itself, or its JSON.
func text(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
