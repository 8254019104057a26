package stepdefs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/cucumber/godog"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/steps/targets"
	"github.com/gwdiag/gwdiag/steps/tracecheck"
)

func registerTraceSteps(sc *godog.ScenarioContext) {
	step(sc, `^I trace a GET request to "([^"]*)"$`, (*state).traceGetRequest)
	step(sc, `^I trace a GET request to "([^"]*)", whatever comes back$`, (*state).traceGetRequestWhateverComesBack)
	step(sc, `^the trace does not claim a response the client never received$`, (*state).traceClaimsNoUnreceivedResponse)
	step(sc, `^the trace reports the transport error unless the client received the backend's status (\d+)$`, (*state).traceReportsTransportErrorUnlessClient)
	step(sc, `^the trace reports the error in backendCallResult or requestFinished with severity "([^"]*)"$`, (*state).traceReportsErrorWithSeverity)
	step(sc, `^I trace a GET request to "([^"]*)" on listener "([^"]*)"$`, (*state).traceGetRequestOnListener)
	step(sc, `^I watch for the next request$`, (*state).watchForNextRequest)
	step(sc, `^I watch for the next request matching '([^']*)'$`, (*state).watchForNextRequestMatching)
	step(sc, `^two watchers wait for the next request$`, (*state).twoWatchersWaitForNextRequest)
	step(sc, `^I send GET requests to "([^"]*)" and "([^"]*)" back to back$`, (*state).sendBackToBack)
	step(sc, `^I open a trace stream$`, (*state).openTraceStream)
	step(sc, `^I open a trace stream with expression '([^']*)'$`, (*state).openTraceStreamWithExpression)
	step(sc, `^the trace stream is refused with status (\d+) and a body containing "([^"]*)"$`, (*state).traceStreamIsRefusedWithStatus)
	step(sc, `^the first frame of the trace stream is the comment "([^"]*)"$`, (*state).firstFrameTraceStreamIsComment)
	step(sc, `^the trace stream has content type "([^"]*)"$`, (*state).traceStreamHasContentType)
	step(sc, `^the trace stream has header "([^"]*)" "([^"]*)"$`, (*state).traceStreamHasHeader)
	step(sc, `^the first watcher traces "([^"]*)" and the second traces "([^"]*)"$`, (*state).watchersTraceInOrder)
	step(sc, `^the traced response status is (\d+)$`, (*state).tracedResponseStatusIs)
	step(sc, `^the traced response status is at least (\d+)$`, (*state).tracedResponseStatusIsAtLeast)
	step(sc, `^the trace events follow the order of the spec$`, traceRule(tracecheck.CheckOrder))
	step(sc, `^eventEnd never decreases$`, traceRule(tracecheck.CheckEventEnd))
	step(sc, `^eventStart is set only on timed events$`, traceRule(tracecheck.CheckEventStart))
	step(sc, `^the trace covers exactly one request$`, traceRule(checkOneWholeRequest))
	step(sc, `^the trace has the events ([\w, ]+)$`, (*state).traceHasEvents)
	step(sc, `^the trace has no "([^"]*)" event$`, (*state).traceHasNoEvent)
	step(sc, `^the trace has a "([^"]*)" response snapshot with code (\d+)$`, (*state).traceHasResponseSnapshotWithCode)
	step(sc, `^the trace has a "([^"]*)" response snapshot with the status the client received$`, (*state).traceHasResponseSnapshotWithClientStatus)
	step(sc, `^the "backendCallResult" event has status (\d+) and no error$`, (*state).backendCallResultHasStatus)
	step(sc, `^every event has the fields of spec part 2\.1$`, traceRule(tracecheck.CheckShape))
	step(sc, `^the "([^"]*)" event has severity "([^"]*)"$`, (*state).eventHasSeverity)
	step(sc, `^the "backendCallResult" event has a transport error$`, (*state).backendCallResultHasTransportError)
	step(sc, `^the trace stream ends after requestFinished$`, (*state).traceStreamEndsAfterRequestFinished)
	step(sc, `^the "([^"]*)" request snapshot has (path|host|method) "([^"]*)"$`, (*state).requestSnapshotHasField)
	step(sc, `^the "([^"]*)" request snapshot has path "([^"]*)" and method "([^"]*)"$`, (*state).requestSnapshotHasPathAndMethod)
	step(sc, `^every request snapshot has request method, uri, path, pathAndQuery, host, scheme, version, headers and startTime$`, (*state).everyRequestSnapshotHasRequestFields)
	step(sc, `^every request snapshot has the source address and port$`, (*state).everyRequestSnapshotHasSourceAddress)
	step(sc, `^every response snapshot has the response code and headers$`, (*state).everyResponseSnapshotHasCodeAndHeaders)
	step(sc, `^the routeSelection selects a route among the evaluated routes$`, (*state).routeSelectionAmongEvaluated)
	step(sc, `^the policySelection carries every effectivePolicy key$`, (*state).policySelectionCarriesEveryKey)
	step(sc, `^the policySelection shows a localRateLimit policy$`, (*state).policySelectionShowsLocalRateLimit)
	step(sc, `^the backendCallStart target is the backend address$`, (*state).backendCallStartTargetIsBackend)
}

func (s *state) traceGetRequest(ctx context.Context, reqTarget string) error {
	return s.traceGetRequestOnListener(ctx, reqTarget, targets.DefaultListener)
}

func (s *state) traceGetRequestWhateverComesBack(ctx context.Context, reqTarget string) error {
	return s.traceWith(ctx, (*state).exchange, reqTarget, targets.DefaultListener)
}

func (s *state) traceClaimsNoUnreceivedResponse(ctx context.Context) error {
	r, t, err := s.responseAndTrace()
	if err != nil {
		return err
	}
	e, ok := tracecheck.Find(t.Events, "responseSnapshot ("+trace.StageFinalResponse+")")
	var code any
	if ok {
		code, _ = tracecheck.Lookup(tracecheck.State(e), "response.code")
	}
	f, _ := code.(float64)
	switch {
	case r.status == 0 && ok && f >= 200 && f < 300:
		return fmt.Errorf("the client received no response (%v), but the final response snapshot claims %v", r.broken, code)
	case r.status != 0 && (!ok || int(f) != r.status):
		return fmt.Errorf("the client received %d, but the final response snapshot says %v", r.status, code)
	}
	return nil
}

func (s *state) traceReportsTransportErrorUnlessClient(ctx context.Context, backendStatus int) error {
	r, err := s.lastResponse()
	if err != nil {
		return err
	}
	if r.status == backendStatus {
		// The answer went on as the backend began it; where a streaming
		// proxy reports what it learns later is not the spec's.
		return nil
	}
	e, err := s.event(string(trace.BackendCallResult))
	if err != nil {
		return err
	}
	if v := e.Message["error"]; v == nil || v == "" {
		got := fmt.Sprintf("status %d", r.status)
		if r.status == 0 {
			got = fmt.Sprintf("no response (%v)", r.broken)
		}
		return fmt.Errorf("the backend answered %d and cut its body short, the client got %s, but backendCallResult.error is %v: the trace must say why", backendStatus, got, v)
	}
	return nil
}

func (s *state) traceReportsErrorWithSeverity(ctx context.Context, severity string) error {
	t, err := s.currentTrace()
	if err != nil {
		return err
	}
	for _, e := range t.Events {
		if (e.Type() == trace.BackendCallResult || e.Type() == trace.RequestFinished) && e.Message["error"] != nil && e.Message["error"] != "" {
			if string(e.Severity) != severity {
				return fmt.Errorf("%s reports %v with severity %q, want %q", e.Type(), e.Message["error"], e.Severity, severity)
			}
			return nil
		}
	}
	return fmt.Errorf("neither backendCallResult nor requestFinished carries an error; got %s", names(t.Events))
}

func (s *state) watchForNextRequest(ctx context.Context) error {
	_, err := s.watch(ctx, "")
	return err
}

func (s *state) watchForNextRequestMatching(ctx context.Context, expr string) error {
	_, err := s.watch(ctx, expr)
	return err
}

func (s *state) twoWatchersWaitForNextRequest(ctx context.Context) error {
	for range 2 {
		if _, err := s.watch(ctx, ""); err != nil {
			return err
		}
	}
	return nil
}

func (s *state) sendBackToBack(ctx context.Context, a, b string) error {
	for _, p := range []string{a, b} {
		if _, err := s.send(ctx, targets.DefaultListener, http.MethodGet, p, nil, nil); err != nil {
			return err
		}
	}
	if len(s.watchers) == 1 {
		return s.finish(s.watchers[0])
	}
	return nil
}

func (s *state) openTraceStream(ctx context.Context) error {
	_, err := s.watch(ctx, "")
	return err
}

func (s *state) openTraceStreamWithExpression(ctx context.Context, expr string) error {
	_, err := s.watch(ctx, expr)
	s.streamErr = err
	return nil
}

func (s *state) traceStreamIsRefusedWithStatus(ctx context.Context, status int, text string) error {
	var se *sse.StatusError
	if err := s.streamErr; !errors.As(err, &se) {
		return fmt.Errorf("trace stream with a bad expression: got %v, want status %d", err, status)
	}
	if se.Status != status || !strings.Contains(se.Body, text) {
		return fmt.Errorf("trace stream refusal: got %d %q, want %d with %q", se.Status, se.Body, status, text)
	}
	return nil
}

func (s *state) firstFrameTraceStreamIsComment(ctx context.Context, want string) error {
	if len(s.watchers) == 0 {
		return errors.New("no trace stream is open")
	}
	w := s.watchers[len(s.watchers)-1]
	w.awaitReady(s.cfg.TraceTimeout)
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.frames) == 0 || !w.frames[0].IsComment || strings.TrimSpace(w.frames[0].Comment) != want {
		got := "nothing"
		if len(w.frames) > 0 {
			got = fmt.Sprintf("%+v", w.frames[0])
		}
		return fmt.Errorf("first trace frame: got %s, want the comment %q", got, want)
	}
	return nil
}

func (s *state) traceStreamHasContentType(ctx context.Context, want string) error {
	if len(s.watchers) == 0 {
		return errors.New("no trace stream is open")
	}
	w := s.watchers[len(s.watchers)-1]
	if got := w.stream.Response.Header.Get("Content-Type"); !strings.HasPrefix(got, want) {
		return fmt.Errorf("trace stream Content-Type: got %q, want %q", got, want)
	}
	return nil
}

func (s *state) traceStreamHasHeader(ctx context.Context, name, want string) error {
	if len(s.watchers) == 0 {
		return errors.New("no trace stream is open")
	}
	if got := s.watchers[len(s.watchers)-1].stream.Response.Header.Get(name); got != want {
		return fmt.Errorf("trace stream header %s: got %q, want %q", name, got, want)
	}
	return nil
}

func (s *state) watchersTraceInOrder(ctx context.Context, a, b string) error {
	if len(s.watchers) < 2 {
		return fmt.Errorf("%d watchers are open, want 2", len(s.watchers))
	}
	for i, want := range []string{a, b} {
		if err := s.finish(s.watchers[i]); err != nil {
			return fmt.Errorf("watcher %d: %w", i+1, err)
		}
		if err := snapshotHas(s.trace, trace.StageInitialRequest, "request.path", want); err != nil {
			return fmt.Errorf("watcher %d: %w", i+1, err)
		}
	}
	return nil
}

func (s *state) tracedResponseStatusIs(ctx context.Context, want int) error {
	r, err := s.lastResponse()
	if err != nil {
		return err
	}
	if r.status != want {
		return fmt.Errorf("traced response status: got %d, want %d", r.status, want)
	}
	return nil
}

func (s *state) tracedResponseStatusIsAtLeast(ctx context.Context, want int) error {
	r, err := s.lastResponse()
	if err != nil {
		return err
	}
	if r.status < want {
		return fmt.Errorf("traced response status: got %d, want %d or more", r.status, want)
	}
	return nil
}

func (s *state) traceHasEvents(ctx context.Context, list string) error {
	t, err := s.currentTrace()
	if err != nil {
		return err
	}
	var missing []string
	for _, name := range strings.Split(list, ",") {
		if _, ok := tracecheck.Find(t.Events, strings.TrimSpace(name)); !ok {
			missing = append(missing, strings.TrimSpace(name))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("trace lacks %s; got %s", strings.Join(missing, ", "), names(t.Events))
	}
	return nil
}

func (s *state) traceHasNoEvent(ctx context.Context, name string) error {
	t, err := s.currentTrace()
	if err != nil {
		return err
	}
	if _, ok := tracecheck.Find(t.Events, name); ok {
		return fmt.Errorf("trace has a %s event, want none; got %s", name, names(t.Events))
	}
	return nil
}

func (s *state) traceHasResponseSnapshotWithCode(ctx context.Context, stage string, code int) error {
	t, err := s.currentTrace()
	if err != nil {
		return err
	}
	e, ok := tracecheck.Find(t.Events, "responseSnapshot ("+stage+")")
	if !ok {
		return fmt.Errorf("trace has no responseSnapshot (%s); got %s", stage, names(t.Events))
	}
	got, _ := tracecheck.Lookup(tracecheck.State(e), "response.code")
	if f, ok := got.(float64); !ok || int(f) != code {
		return fmt.Errorf("responseSnapshot (%s) response.code: got %v, want %d", stage, got, code)
	}
	return nil
}

func (s *state) traceHasResponseSnapshotWithClientStatus(ctx context.Context, stage string) error {
	r, t, err := s.responseAndTrace()
	if err != nil {
		return err
	}
	e, ok := tracecheck.Find(t.Events, "responseSnapshot ("+stage+")")
	if !ok {
		return fmt.Errorf("trace has no responseSnapshot (%s); got %s", stage, names(t.Events))
	}
	got, _ := tracecheck.Lookup(tracecheck.State(e), "response.code")
	if f, ok := got.(float64); !ok || int(f) != r.status {
		return fmt.Errorf("responseSnapshot (%s) response.code: got %v, but the client received %d", stage, got, r.status)
	}
	return nil
}

func (s *state) backendCallResultHasStatus(ctx context.Context, want int) error {
	e, err := s.event(string(trace.BackendCallResult))
	if err != nil {
		return err
	}
	if got, ok := e.Message["status"].(float64); !ok || int(got) != want {
		return fmt.Errorf("backendCallResult.status: got %v, want %d, what the backend answered", e.Message["status"], want)
	}
	if v, ok := e.Message["error"]; !ok || v != nil {
		return fmt.Errorf("backendCallResult.error: got %v, want null on success", describe(v, ok))
	}
	return nil
}

func (s *state) eventHasSeverity(ctx context.Context, name, want string) error {
	e, err := s.event(name)
	if err != nil {
		return err
	}
	if string(e.Severity) != want {
		return fmt.Errorf("%s severity: got %q, want %q", name, e.Severity, want)
	}
	return nil
}

func (s *state) backendCallResultHasTransportError(ctx context.Context) error {
	e, err := s.event(string(trace.BackendCallResult))
	if err != nil {
		return err
	}
	if v := e.Message["error"]; v == nil || v == "" {
		return fmt.Errorf("backendCallResult.error: got %v, want the transport error", v)
	}
	return nil
}

func (s *state) traceStreamEndsAfterRequestFinished(ctx context.Context) error {
	t, err := s.currentTrace()
	if err != nil {
		return err
	}
	if !t.EndedAfterFinished {
		return fmt.Errorf("trace stream: want EOF right after requestFinished; got events %s and the stream still open or ended elsewhere", names(t.Events))
	}
	return nil
}

func (s *state) requestSnapshotHasField(ctx context.Context, stage, field, want string) error {
	t, err := s.currentTrace()
	if err != nil {
		return err
	}
	return snapshotHas(t, stage, "request."+field, want)
}

func (s *state) requestSnapshotHasPathAndMethod(ctx context.Context, stage, path, method string) error {
	t, err := s.currentTrace()
	if err != nil {
		return err
	}
	if err := snapshotHas(t, stage, "request.path", path); err != nil {
		return err
	}
	return snapshotHas(t, stage, "request.method", method)
}

func (s *state) everyRequestSnapshotHasRequestFields(ctx context.Context) error {
	return s.everySnapshot(trace.RequestSnapshot, requestFields)
}

func (s *state) everyRequestSnapshotHasSourceAddress(ctx context.Context) error {
	return s.everySnapshot(trace.RequestSnapshot, sourceFields)
}

func (s *state) everyResponseSnapshotHasCodeAndHeaders(ctx context.Context) error {
	return s.everySnapshot(trace.ResponseSnapshot, responseFields)
}

func (s *state) routeSelectionAmongEvaluated(ctx context.Context) error {
	e, err := s.event(string(trace.RouteSelection))
	if err != nil {
		return err
	}
	sel, _ := e.Message["selectedRoute"].(string)
	ev, _ := e.Message["evaluatedRoutes"].([]any)
	for _, r := range ev {
		if r == sel && sel != "" {
			return nil
		}
	}
	return fmt.Errorf("routeSelection: selectedRoute %q is not among evaluatedRoutes %v", sel, ev)
}

func (s *state) policySelectionCarriesEveryKey(ctx context.Context) error {
	e, err := s.event(string(trace.PolicySelection))
	if err != nil {
		return err
	}
	p, _ := e.Message["effectivePolicy"].(map[string]any)
	var missing []string
	for _, k := range policyKeys {
		if _, ok := p[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("policySelection.effectivePolicy lacks %s (each key is null when no such policy applies)", strings.Join(missing, ", "))
	}
	return nil
}

func (s *state) policySelectionShowsLocalRateLimit(ctx context.Context) error {
	e, err := s.event(string(trace.PolicySelection))
	if err != nil {
		return err
	}
	p, _ := e.Message["effectivePolicy"].(map[string]any)
	if p["localRateLimit"] == nil {
		return fmt.Errorf("policySelection.effectivePolicy.localRateLimit: got null, want the route's limit")
	}
	return nil
}

func (s *state) backendCallStartTargetIsBackend(ctx context.Context) error {
	e, err := s.event(string(trace.BackendCallStart))
	if err != nil {
		return err
	}
	want, err := s.dep.BackendAddr(s.setup.Listeners[0].Routes[0].Backend)
	if err != nil {
		return err
	}
	if got := e.Message["target"]; got != want {
		return fmt.Errorf("backendCallStart.target: got %v, want %q", got, want)
	}
	return nil
}

var (
	requestFields  = []string{"request.method", "request.uri", "request.path", "request.pathAndQuery", "request.host", "request.scheme", "request.version", "request.headers", "request.startTime"}
	sourceFields   = []string{"source.address", "source.port", "source.rawAddress", "source.rawPort"}
	responseFields = []string{"response.code", "response.headers"}
	policyKeys     = []string{"localRateLimit", "remoteRateLimit", "authorization", "jwt", "oidc", "basicAuth", "apiKey", "extAuthz", "extProc", "transformation", "csrf", "directResponse", "requestHeaderModifier", "responseHeaderModifier", "requestRedirect", "urlRewrite", "cors"}
)

// responseAndTrace is the last response and the trace taken of it.
func (s *state) responseAndTrace() (*response, *sse.Trace, error) {
	r, err := s.lastResponse()
	if err != nil {
		return nil, nil, err
	}
	t, err := s.currentTrace()
	return r, t, err
}

func (s *state) everySnapshot(typ trace.MessageType, fields []string) error {
	t, err := s.currentTrace()
	if err != nil {
		return err
	}
	n := 0
	for i, e := range t.Events {
		if e.Type() != typ {
			continue
		}
		n++
		st := tracecheck.State(e)
		for _, f := range fields {
			if v, ok := tracecheck.Lookup(st, f); !ok || v == nil {
				return fmt.Errorf("event %d %s: requestState lacks %s", i+1, tracecheck.Name(e), f)
			}
		}
	}
	if n == 0 {
		return fmt.Errorf("trace has no %s; got %s", typ, names(t.Events))
	}
	return nil
}

func snapshotHas(t *sse.Trace, stage, field, want string) error {
	e, ok := tracecheck.Find(t.Events, "requestSnapshot ("+stage+")")
	if !ok {
		return fmt.Errorf("trace has no requestSnapshot (%s); got %s", stage, names(t.Events))
	}
	got, _ := tracecheck.Lookup(tracecheck.State(e), field)
	if s, _ := got.(string); s != want {
		return fmt.Errorf("requestSnapshot (%s) %s: got %v, want %q", stage, field, got, want)
	}
	return nil
}

// sender sends one request: send (which wants a whole response) or
// exchange (which records a broken one).
type sender func(s *state, ctx context.Context, listener, method, reqTarget string, header http.Header, body []byte) (*response, error)

// traceWith traces one GET sent with send.
func (s *state) traceWith(ctx context.Context, send sender, reqTarget, listener string) error {
	w, err := s.watch(ctx, "")
	if err != nil {
		return err
	}
	if _, err := send(s, ctx, listener, http.MethodGet, reqTarget, nil, nil); err != nil {
		return err
	}
	return s.finish(w)
}

func (s *state) traceGetRequestOnListener(ctx context.Context, reqTarget, listener string) error {
	return s.traceWith(ctx, (*state).send, reqTarget, listener)
}

// traceRule is the step that holds the current trace to one of the trace
// rules of tracecheck.
func traceRule(check func([]trace.Event) []tracecheck.Violation) func(*state, context.Context) error {
	return func(s *state, ctx context.Context) error {
		t, err := s.currentTrace()
		if err != nil {
			return err
		}
		return violations(check(t.Events), t.Events)
	}
}

// checkOneWholeRequest: the trace covers one request, with every required
// event.
func checkOneWholeRequest(ev []trace.Event) []tracecheck.Violation {
	return append(tracecheck.CheckOneRequest(ev), tracecheck.CheckRequired(ev)...)
}
