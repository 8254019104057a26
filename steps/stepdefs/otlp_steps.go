package stepdefs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/otlp"
	"github.com/gwdiag/gwdiag/golden/trace/otlp/receiver"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/steps/targets"
	"github.com/gwdiag/gwdiag/steps/tracecheck"
)

// Steps of the feature otlp-export: the proxy's OpenTelemetry spans of a
// request, received by a collector of the scenario's own, held to the
// request's /debug/trace (docs/otlp.md says the tree).
func registerOTLPSteps(sc *godog.ScenarioContext) {
	step(sc, `^the proxy exports OpenTelemetry spans of every request to the suite's collector$`, (*state).exportToCollector)
	step(sc, `^I trace a GET request to "([^"]*)" in the client's trace "([0-9a-f]{32})" from span "([0-9a-f]{16})"$`, (*state).traceInClientTrace)
	step(sc, `^the collector receives the traced request's spans$`, (*state).collectorReceivesSpans)
	step(sc, `^the spans agree with the trace on route, status and backend target$`, (*state).spansAgreeWithTrace)
	step(sc, `^the spans nest in the request's span, in the trace's order$`, (*state).spansNest)
	step(sc, `^the request's span names the limit entry that refused it, as the trace does$`, (*state).spanNamesRefusingLimit)
	step(sc, `^the request's span continues the client's trace "([0-9a-f]{32})" from span "([0-9a-f]{16})"$`, (*state).spanContinuesClientTrace)
	step(sc, `^the backend received a traceparent naming the backend call's span$`, (*state).backendGotTraceparent)
	step(sc, `^the request's span carries the tokens the trace says the response charged$`, (*state).spanCarriesCharge)
}

// spanCarriesCharge: the request span's gateway.llm.tokens_charged is what
// the trace's charge (a localRateLimit policyEvent) says the response took,
// and its gen_ai.usage.* are the charge's usage, input and output apart.
func (s *state) spanCarriesCharge(context.Context) error {
	root, t, err := s.spanAndTrace()
	if err != nil {
		return err
	}
	var charged float64
	var usage map[string]any
	found := false
	for _, e := range t.Events {
		if e.Type() != trace.PolicyEvent {
			continue
		}
		if n, ok := e.Message["tokens"].(float64); ok {
			charged, found = charged+n, true
			usage, _ = e.Message["usage"].(map[string]any)
		}
	}
	if !found {
		return errors.New("the trace shows no charge of the response's tokens (a policyEvent with tokens)")
	}
	if got, _ := root.Attrs[otlp.AttrTokens].(int64); float64(got) != charged {
		return fmt.Errorf("the request span's %s is %d, the trace charged %v tokens", otlp.AttrTokens, got, charged)
	}
	for k, attr := range map[string]string{"inputTokens": "gen_ai.usage.input_tokens", "outputTokens": "gen_ai.usage.output_tokens"} {
		want, ok := usage[k].(float64)
		if !ok {
			continue
		}
		if got, _ := root.Attrs[attr].(int64); float64(got) != want {
			return fmt.Errorf("the request span's %s is %d, the trace's usage says %v", attr, got, want)
		}
	}
	return nil
}

// exportToCollector starts the scenario's collector where the target's
// proxy reaches it, and tells the proxy to export every request to it.
func (s *state) exportToCollector(context.Context) error {
	host := "127.0.0.1"
	if sh, ok := s.cfg.Target.(targets.ServiceHost); ok {
		var reachable bool
		if host, reachable = sh.ServiceAddr(); !reachable {
			return targets.Missing("an OTLP collector the proxy can reach", "run the container target on a local Docker daemon",
				fmt.Errorf("the %s target's proxy cannot reach a service on this machine", s.cfg.Target.Name()))
		}
	}
	r, err := receiver.StartOn(host)
	if err != nil {
		return targets.Missing("an OTLP collector of the suite's own", "free a port on "+host, err)
	}
	s.otlp = r
	s.setup.OTLPEndpoint = "http://" + r.GRPC
	if s.cfg.OTLPProtocol == otlp.HTTP {
		s.setup.OTLPEndpoint, s.setup.OTLPProtocol = r.HTTP, otlp.HTTP
	}
	return nil
}

func (s *state) traceInClientTrace(ctx context.Context, reqTarget, traceID, spanID string) error {
	w, err := s.watch(ctx, "")
	if err != nil {
		return err
	}
	h := http.Header{}
	h.Set("traceparent", "00-"+traceID+"-"+spanID+"-01")
	if _, err := s.send(ctx, targets.DefaultListener, http.MethodGet, reqTarget, h, nil); err != nil {
		return err
	}
	return s.finish(w)
}

// otlpWait bounds the wait for a request's spans: the proxy batches them
// (refproxy every second) before it sends them.
const otlpWait = 15 * time.Second

// collectorReceivesSpans waits for a request span of each request the
// scenario sent, and keeps the trace of the last one (the traced request,
// the scenario's last): its request span first, the others by start.
func (s *state) collectorReceivesSpans(ctx context.Context) error {
	if s.otlp == nil {
		return errors.New("the scenario has no collector: add the step that exports to it")
	}
	want := len(s.responses)
	ctx, cancel := context.WithTimeout(ctx, otlpWait)
	defer cancel()
	spans, err := s.otlp.Wait(ctx, func(spans []receiver.Span) bool { return len(requestSpans(spans)) >= want })
	if err != nil {
		return fmt.Errorf("the collector received %d request spans (of %d spans) within %s, want one for each of the %d requests: %w",
			len(requestSpans(spans)), len(spans), otlpWait, want, err)
	}
	roots := requestSpans(spans)
	root := roots[0]
	for _, r := range roots[1:] {
		if r.Start.After(root.Start) {
			root = r
		}
	}
	mine := []receiver.Span{root}
	var rest []receiver.Span
	for _, sp := range receiver.Trace(spans, root.TraceID) {
		if sp.SpanID != root.SpanID {
			rest = append(rest, sp)
		}
	}
	slices.SortStableFunc(rest, func(a, b receiver.Span) int { return a.Start.Compare(b.Start) })
	s.spans = append(mine, rest...)
	return nil
}

// requestSpans are the server spans: one per request.
func requestSpans(spans []receiver.Span) []receiver.Span {
	var out []receiver.Span
	for _, sp := range spans {
		if sp.Kind == "SPAN_KIND_SERVER" {
			out = append(out, sp)
		}
	}
	return out
}

func (s *state) requestSpan() (receiver.Span, error) {
	if len(s.spans) == 0 {
		return receiver.Span{}, errors.New("no spans were received: add the step that waits for them")
	}
	return s.spans[0], nil
}

// spanAndTrace are the request span and the trace the spans are held to.
func (s *state) spanAndTrace() (receiver.Span, *sse.Trace, error) {
	root, err := s.requestSpan()
	if err != nil {
		return root, nil, err
	}
	t, err := s.currentTrace()
	return root, t, err
}

// spansAgreeWithTrace: the request span's route and status are the
// trace's, and there is one backend call span per backend call the trace
// shows, to its target.
func (s *state) spansAgreeWithTrace(context.Context) error {
	root, t, err := s.spanAndTrace()
	if err != nil {
		return err
	}
	var route, finished string
	var targetsSeen []string
	results := 0
	status := 0
	for _, e := range t.Events {
		switch e.Type() {
		case trace.RouteSelection:
			route, _ = e.Message["selectedRoute"].(string)
		case trace.BackendCallStart:
			tg, _ := e.Message["target"].(string)
			targetsSeen = append(targetsSeen, tg)
		case trace.BackendCallResult:
			results++
		case trace.ResponseSnapshot:
			if e.Stage() == trace.StageFinalResponse {
				if c, ok := tracecheck.Lookup(tracecheck.State(e), "response.code"); ok {
					if f, ok := c.(float64); ok {
						status = int(f)
					}
				}
			}
		case trace.RequestFinished:
			if c, ok := e.Message["status"].(float64); ok {
				status, finished = int(c), " (requestFinished.status)"
			}
		}
	}
	if got, _ := root.Attrs["http.route"].(string); got != route {
		return fmt.Errorf("the request span's http.route is %q, the trace selected %q", got, route)
	}
	if got, _ := root.Attrs["http.response.status_code"].(int64); int(got) != status {
		return fmt.Errorf("the request span's http.response.status_code is %d, the trace says %d%s", got, status, finished)
	}
	var calls []receiver.Span
	for _, sp := range s.spans {
		if sp.Kind == "SPAN_KIND_CLIENT" {
			calls = append(calls, sp)
		}
	}
	if len(calls) != results {
		return fmt.Errorf("%d backend call spans, the trace shows %d backend calls", len(calls), results)
	}
	for i, c := range calls {
		if i < len(targetsSeen) && c.Attrs[otlp.AttrBackendTarget] != targetsSeen[i] {
			return fmt.Errorf("backend call span %d is to %v, the trace's call to %q", i+1, c.Attrs[otlp.AttrBackendTarget], targetsSeen[i])
		}
	}
	return nil
}

// spansNest: every span of the trace is under the request's span and
// inside its time; the route selection, policy and backend call spans end
// in the order of the trace's events.
func (s *state) spansNest(context.Context) error {
	root, t, err := s.spanAndTrace()
	if err != nil {
		return err
	}
	ids := map[string]bool{root.SpanID: true}
	for _, sp := range s.spans[1:] {
		ids[sp.SpanID] = true
	}
	for _, sp := range s.spans[1:] {
		if !ids[sp.ParentSpanID] {
			return fmt.Errorf("span %q has parent %s, not a span of the request", sp.Name, sp.ParentSpanID)
		}
		if sp.Start.Before(root.Start) || sp.End.After(root.End) || sp.End.Before(sp.Start) {
			return fmt.Errorf("span %q [%s, %s] is not inside the request's [%s, %s]", sp.Name,
				sp.Start.Format(time.RFC3339Nano), sp.End.Format(time.RFC3339Nano), root.Start.Format(time.RFC3339Nano), root.End.Format(time.RFC3339Nano))
		}
	}
	var want []string
	for _, e := range t.Events {
		switch e.Type() {
		case trace.RouteSelection:
			want = append(want, otlp.NameRouteSelection)
		case trace.PolicyResultType:
			kind, _ := e.Message["kind"].(string)
			want = append(want, otlp.NamePolicyPrefix+kind)
		case trace.BackendCallResult:
			want = append(want, otlp.NameBackendCall)
		}
	}
	byEnd := slices.Clone(s.spans[1:])
	slices.SortStableFunc(byEnd, func(a, b receiver.Span) int { return a.End.Compare(b.End) })
	var got []string
	for _, sp := range byEnd {
		got = append(got, sp.Name)
	}
	// Ties (spans ending in the same microsecond) may come in either order.
	if !sameMultiset(got, want) || !orderedUpToTies(byEnd, want) {
		return fmt.Errorf("spans by end %q, the trace's steps %q", got, want)
	}
	return nil
}

func sameMultiset(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// orderedUpToTies: spans sorted by end follow want, spans with the same end
// in any order among themselves.
func orderedUpToTies(spans []receiver.Span, want []string) bool {
	for i := 0; i < len(spans); {
		j := i
		for j < len(spans) && spans[j].End.Equal(spans[i].End) {
			j++
		}
		var group []string
		for _, sp := range spans[i:j] {
			group = append(group, sp.Name)
		}
		if j > len(want) || !sameMultiset(group, want[i:j]) {
			return false
		}
		i = j
	}
	return true
}

// spanNamesRefusingLimit: the request span names the local limit entry the
// trace's policy event says refused, and the limit's span is an error.
func (s *state) spanNamesRefusingLimit(context.Context) error {
	root, t, err := s.spanAndTrace()
	if err != nil {
		return err
	}
	want := ""
	for _, e := range t.Events {
		var p trace.PolicyResult
		if e.Type() != trace.PolicyResultType || !trace.DecodeReason(e.Message, &p) {
			continue
		}
		for _, en := range p.Result.Entries {
			if en.Refused {
				want = fmt.Sprintf("%s[%d] of %s", p.Kind, en.Index, en.From)
			}
		}
	}
	if want == "" {
		return errors.New("the trace names no entry that refused the request")
	}
	if got, _ := root.Attrs[otlp.AttrRateRefusedBy].(string); got != want {
		return fmt.Errorf("the request span's %s is %q, the trace says %q", otlp.AttrRateRefusedBy, got, want)
	}
	for _, sp := range s.spans[1:] {
		if strings.HasPrefix(sp.Name, otlp.NamePolicyPrefix) && sp.Attrs[otlp.AttrRateRefusedBy] == want && sp.Error {
			return nil
		}
	}
	return fmt.Errorf("no policy span with status Error names %q", want)
}

func (s *state) spanContinuesClientTrace(_ context.Context, traceID, spanID string) error {
	root, err := s.requestSpan()
	if err != nil {
		return err
	}
	if root.TraceID != traceID || root.ParentSpanID != spanID {
		return fmt.Errorf("the request span is in trace %s under span %q, the client's traceparent named trace %s, span %s", root.TraceID, root.ParentSpanID, traceID, spanID)
	}
	return nil
}

// backendGotTraceparent: the echo backend's answer shows the traceparent
// it received; it names the request's trace and its backend call span.
func (s *state) backendGotTraceparent(context.Context) error {
	root, err := s.requestSpan()
	if err != nil {
		return err
	}
	echoed, err := s.echoedHeaders()
	if err != nil {
		return err
	}
	tp := echoed["Traceparent"]
	sc := otlp.ParseTraceparent(tp)
	if !sc.IsValid() {
		return fmt.Errorf("the backend received traceparent %q, not a valid one", tp)
	}
	var call string
	for _, sp := range s.spans {
		if sp.Kind == "SPAN_KIND_CLIENT" {
			call = sp.SpanID
		}
	}
	if sc.TraceID().String() != root.TraceID || sc.SpanID().String() != call {
		return fmt.Errorf("the backend received traceparent %s, want trace %s and the backend call span %q", tp, root.TraceID, call)
	}
	return nil
}
