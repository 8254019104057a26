package stepdefs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cucumber/godog"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/otlp/receiver"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/steps/bundle"
	"github.com/gwdiag/gwdiag/steps/targets"
)

// Config is what the step definitions need of a run.
type Config struct {
	// Target runs the proxy under test.
	Target targets.Target
	// RequestTimeout bounds one HTTP request, TraceTimeout a trace's
	// completion after its request, ReadyGrace the wait for a new trace
	// stream's ": ready" comment.
	RequestTimeout, TraceTimeout, ReadyGrace time.Duration
	// OnTrace, when set, receives every trace a scenario takes.
	OnTrace func(scenario string, events []trace.Event)
	// RateLimit gives the global-rate-limit scenarios their service.
	RateLimit RateLimitServices
	// Limits bound everything the steps read from the proxy: trace
	// streams, admin and data-plane bodies, header blocks. Past one, the
	// step fails with what was exceeded.
	Limits sse.Limits
	// Secrets are the credentials of the run, scrubbed from whatever it
	// writes (nil: none kept, nothing scrubbed).
	Secrets *Secrets
	// Record keeps every HTTP exchange of a scenario for its failure
	// bundle (Collect).
	Record bool
	// OTLPProtocol is how the proxy is told to reach the scenario's OTLP
	// collector: "grpc" (or empty) or "http".
	OTLPProtocol string
	// PlantCredentials sends a credential of the run's own (Secrets.Plant)
	// in every credential header of every request a step makes, unless the
	// step sets that header: a test then searches all the run wrote.
	PlantCredentials bool
}

// RateLimitServices are the global rate-limit services of a run.
type RateLimitServices interface {
	// Shared returns the gRPC address of the run's service, starting it on
	// first use.
	Shared(ctx context.Context) (string, error)
	// Own starts a service for one scenario, which may stop and restart it.
	Own(ctx context.Context) (OwnRateLimitService, error)
}

// OwnRateLimitService is a scenario's own rate-limit service.
type OwnRateLimitService interface {
	GRPCAddr() string
	// Kill stops it at once, as an outage would; Restart brings it back
	// on the same address; Stop ends it for good.
	Kill()
	Restart(ctx context.Context) error
	Stop()
	// Counted sums the service's own counters whose keys contain match.
	Counted(ctx context.Context, match string) (int64, error)
}

// state is everything one scenario knows; it travels in the step context
// under stateKey, so scenarios can run in parallel.
type state struct {
	cfg Config
	// optional is set for a scenario of an extended feature the proxy does
	// not claim: a failing step makes it unsupported, not failed.
	optional bool
	// scenario is the scenario's name.
	scenario string

	setup targets.Setup
	dep   targets.Deployment
	// replicas is how many proxies serve the setup (0 is one); deps are
	// all of them, dep the first. Requests go to each in turn (next).
	replicas int
	deps     []targets.Deployment
	next     int
	// ownRLS is the scenario's own rate-limit service, stopped at its end.
	ownRLS OwnRateLimitService
	// follows are the scenario's follow streams; cleanups run at its end.
	follows  []*followStream
	cleanups []func()

	client *http.Client
	// recorder keeps the client's exchanges (Config.Record).
	recorder *bundle.Recorder
	// configureEvidence is what a failed Configure kept of why.
	configureEvidence map[string][]byte
	responses         []*response
	admin             *response

	watchers []*watcher
	// trace is the trace the Then steps check: the last one completed.
	trace *sse.Trace

	recorded []trace.Event

	// creds are the credentials the scenario sends (redact_steps.go).
	creds credentials

	// otlp is the scenario's OTLP collector, spans the traced request's
	// spans it received, its request span first (otlp_steps.go).
	otlp  *receiver.Receiver
	spans []receiver.Span

	// streamTokens is the usage asked of the last streamed completion.
	streamTokens int
	// held are streams the mock backend holds open, by key.
	held map[string]*heldStream
	// streamErr is the refusal of the last trace stream opened with an expression.
	streamErr error

	failedStep string

	// unsupported is set when an @extended scenario found the proxy lacking.
	unsupported string
	// interrupted is set when a step failed after the run's context ended:
	// the scenario was cut short, which says nothing of the proxy.
	interrupted bool
	// missing is set when a step found the suite's own environment lacking
	// (a targets.EnvironmentError): not run, which says nothing of the
	// proxy either.
	missing, missingDetail string
	// inconclusive is set when a step's result could have come from a
	// rate-limit window that ended while the scenario's requests were on
	// their way (a loaded machine, a slow port-forward): this try says
	// nothing of the proxy, and the engine tries the scenario again.
	inconclusive string
}

type stateKey struct{}

// Begin puts a new scenario's state in ctx. optional marks a scenario of an
// extended feature the proxy does not claim.
func Begin(ctx context.Context, cfg Config, scenario string, optional bool) context.Context {
	s := &state{cfg: cfg, optional: optional, scenario: scenario,
		// A new connection per request: a proxy may close a connection
		// after any response (a 429, say), and reuse is not what the
		// suite tests.
		client: &http.Client{Transport: suiteTransport(cfg.Limits.Transport())}}
	if cfg.Record {
		s.recorder = &bundle.Recorder{Base: s.client.Transport}
		s.client.Transport = s.recorder
	}
	return context.WithValue(ctx, stateKey{}, s)
}

// Ending is how a scenario ended, as its steps saw it.
type Ending struct {
	// Unsupported is why the proxy lacks the scenario's extended feature
	// ("" when it does not).
	Unsupported string
	// Interrupted is set when the run was interrupted while the scenario
	// ran: a step failed after the run's context ended.
	Interrupted bool
	// Missing is what of the suite's own environment a step found lacking,
	// with the fix ("" when nothing was; targets.EnvironmentError.Summary),
	// and MissingDetail the whole error.
	Missing, MissingDetail string
	// Inconclusive says why the scenario's try said nothing of the proxy
	// ("" when it did): its requests outlasted a rate-limit window.
	Inconclusive string
	// FailedStep is the text of the first step that failed.
	FailedStep string
	// ProxyLogs is the end of the proxy's output, where the target keeps
	// it (targets.LogKeeper).
	ProxyLogs string
}

// End tears down the scenario of ctx (its deployment, trace streams and
// connections) and tells how it ended. ok is false when ctx holds no
// scenario.
func End(ctx context.Context) (e Ending, ok bool) {
	s := getState(ctx)
	if s == nil {
		return e, false
	}
	s.teardown()
	x := s.cfg.Secrets
	e = Ending{Unsupported: x.Scrub(s.unsupported), Interrupted: s.interrupted, Missing: x.Scrub(s.missing), MissingDetail: x.Scrub(s.missingDetail),
		Inconclusive: x.Scrub(s.inconclusive), FailedStep: x.Scrub(s.failedStep)}
	e.ProxyLogs = x.Scrub(s.proxyLogs())
	return e, true
}

// proxyLogs is the proxy's output where the target keeps it; with several
// replicas, the end of each replica's (its share of MaxProxyLogs) under a
// line naming it.
func (s *state) proxyLogs() string {
	n := len(s.deps)
	if n < 2 {
		if lk, ok := s.dep.(targets.LogKeeper); ok {
			return lk.ProxyLogs()
		}
		return ""
	}
	var b strings.Builder
	for i, d := range s.deps {
		lk, ok := d.(targets.LogKeeper)
		if !ok {
			continue
		}
		logs := targets.TailLogsWithin(lk.ProxyLogs(), targets.MaxProxyLogs/n)
		fmt.Fprintf(&b, "=== replica %d of %d ===\n%s", i+1, n, logs)
		if logs != "" && !strings.HasSuffix(logs, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func getState(ctx context.Context) *state {
	s, _ := ctx.Value(stateKey{}).(*state)
	return s
}

// response is one HTTP exchange a step made.
type response struct {
	status int
	header http.Header
	// sent and at: when the request was sent and its head arrived (an
	// absolute reset, Anthropic's, is read against them).
	sent, at time.Time
	body     []byte
	// chunks are the SSE data frames of a streamed body.
	chunks []string
	// broken is set when the response did not arrive whole: no head
	// (status 0), or a body cut short.
	broken error
}

// deployment configures the target with the scenario's setup on first use.
func (s *state) deployment(ctx context.Context) (targets.Deployment, error) {
	if s.dep != nil {
		return s.dep, nil
	}
	if len(s.setup.Listeners) == 0 {
		return nil, errors.New("the scenario configures no route")
	}
	for i := range max(s.replicas, 1) {
		d, err := s.cfg.Target.Configure(ctx, s.setup)
		if ce := (*targets.ConfigureError)(nil); errors.As(err, &ce) {
			s.configureEvidence = ce.Evidence
		}
		if err != nil {
			for _, d := range s.deps {
				d.Stop(context.WithoutCancel(ctx))
			}
			s.deps = nil
			if i > 0 {
				return nil, fmt.Errorf("configure %s target, replica %d: %w", s.cfg.Target.Name(), i+1, err)
			}
			return nil, fmt.Errorf("configure %s target: %w", s.cfg.Target.Name(), err)
		}
		s.deps = append(s.deps, d)
	}
	s.dep = s.deps[0]
	return s.dep, nil
}

// listenerAddr is the address of the scenario's default listener, the
// target configured first if it was not yet.
func (s *state) listenerAddr(ctx context.Context) (string, error) {
	d, err := s.deployment(ctx)
	if err != nil {
		return "", err
	}
	return d.ListenerAddr(targets.DefaultListener)
}

// replica returns the deployment the next request goes to: with several
// replicas, each in turn.
func (s *state) replica(ctx context.Context) (targets.Deployment, error) {
	d, err := s.deployment(ctx)
	if err != nil || len(s.deps) < 2 {
		return d, err
	}
	d = s.deps[s.next%len(s.deps)]
	s.next++
	return d, nil
}

func (s *state) teardown() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, w := range s.watchers {
		w.close()
	}
	for _, c := range s.cleanups {
		c()
	}
	// Before the proxies stop: a connection the client dialled but never
	// used would otherwise hold a proxy's graceful shutdown for the seconds
	// a server waits before it calls a new connection idle.
	s.client.CloseIdleConnections()
	for _, d := range s.deps {
		d.Stop(ctx)
	}
	if s.ownRLS != nil {
		s.ownRLS.Stop()
	}
	if s.otlp != nil {
		// After the proxies: what they flush on the way out is taken.
		s.otlp.Close()
	}
}

func (s *state) lastResponse() (*response, error) {
	if len(s.responses) == 0 {
		return nil, errors.New("no request was sent")
	}
	return s.responses[len(s.responses)-1], nil
}

// echoedHeaders are the request headers the echo backend says it
// received (its /headers or /anything answer), from the last response.
func (s *state) echoedHeaders() (map[string]string, error) {
	r, err := s.lastResponse()
	if err != nil {
		return nil, err
	}
	var echo struct {
		Headers map[string]string `json:"headers"`
	}
	if err := json.Unmarshal(r.body, &echo); err != nil {
		return nil, fmt.Errorf("the response is not the echo backend's JSON (status %d): %v", r.status, err)
	}
	return echo.Headers, nil
}

func (s *state) currentTrace() (*sse.Trace, error) {
	if s.trace == nil {
		return nil, errors.New("no trace was taken")
	}
	return s.trace, nil
}

// watcher is one open /debug/trace stream read in the background.
type watcher struct {
	stream *sse.Stream
	// secrets keeps the credentials the events show (a proxy that does
	// not redact), so that no error quoting an event carries them.
	secrets *Secrets
	ready   chan struct{} // closed at the first comment frame or the first event
	done    chan struct{} // closed at EOF or error
	cancel  context.CancelFunc

	mu       sync.Mutex
	frames   []sse.Frame
	err      error
	finished chan struct{} // closed at requestFinished
	once     sync.Once
}

func openWatcher(ctx context.Context, client *http.Client, admin, expression string, timeout time.Duration, limits sse.Limits, secrets *Secrets) (*watcher, error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	st, err := openBounded(ctx, cancel, timeout, func(ctx context.Context) (*sse.Stream, error) {
		return sse.Open(ctx, client, admin, expression)
	})
	if err != nil {
		return nil, err
	}
	st.SetLimits(limits)
	w := &watcher{stream: st, ready: make(chan struct{}), done: make(chan struct{}), finished: make(chan struct{}), cancel: cancel, secrets: secrets}
	go w.read()
	return w, nil
}

// openBounded opens a stream on ctx, which outlives the step, and bounds
// only the opening: cancel ends ctx if the opening takes longer than
// timeout. A stream that opened just as the bound fired was cancelled all
// the same; it is closed and the opening fails, rather than handing on a
// stream whose reads fail with the bound's cancellation, which a reader
// could take for the stream's end.
func openBounded(ctx context.Context, cancel context.CancelFunc, timeout time.Duration, open func(context.Context) (*sse.Stream, error)) (*sse.Stream, error) {
	stop := time.AfterFunc(timeout, cancel)
	st, err := open(ctx)
	if !stop.Stop() {
		if err == nil {
			st.Close()
		}
		cancel()
		return nil, fmt.Errorf("no answer within %s: %w", timeout, context.DeadlineExceeded)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return st, nil
}

func (w *watcher) read() {
	defer close(w.done)
	readyOnce := sync.Once{}
	events := 0
	for {
		f, err := w.stream.Next()
		if err != nil {
			w.mu.Lock()
			if !isEOF(err) {
				w.err = err
			}
			w.mu.Unlock()
			readyOnce.Do(func() { close(w.ready) })
			w.once.Do(func() { close(w.finished) })
			return
		}
		w.mu.Lock()
		w.frames = append(w.frames, f)
		w.mu.Unlock()
		readyOnce.Do(func() { close(w.ready) })
		if !f.IsComment {
			w.secrets.CollectEvent([]byte(f.Data))
			ev, err := trace.Parse([]byte(f.Data))
			if err != nil {
				// Named, not skipped: a trace that seems to have no
				// events hides what the proxy sent.
				w.mu.Lock()
				w.err = fmt.Errorf("trace event %d is not a JSON trace event: %v: %s", events+1, err, clip(f.Data))
				w.mu.Unlock()
				w.once.Do(func() { close(w.finished) })
				return
			}
			events++
			if ev.Type() == trace.RequestFinished {
				w.once.Do(func() { close(w.finished) })
			}
		}
	}
}

// awaitReady waits for the proxy to show the watcher is registered: the
// ": ready" comment of newer proxies. Older proxies send nothing before the
// first event, so after ReadyGrace the watcher is taken as registered.
func (w *watcher) awaitReady(grace time.Duration) {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-w.ready:
	case <-t.C:
	}
}

// result waits for the trace to complete (requestFinished then EOF, or EOF)
// and returns it.
func (w *watcher) result(timeout time.Duration) (*sse.Trace, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-w.finished:
	case <-t.C:
		w.close()
		return w.snapshot(), fmt.Errorf("the trace did not complete within %s (no requestFinished, stream still open); got %d events", timeout, len(w.snapshot().Events))
	}
	// The stream should end right after requestFinished; give it a moment
	// to reach EOF before judging EndedAfterFinished.
	eof := time.NewTimer(time.Second)
	defer eof.Stop()
	select {
	case <-w.done:
	case <-eof.C:
	}
	tr := w.snapshot()
	w.mu.Lock()
	err := w.err
	w.mu.Unlock()
	return tr, err
}

func (w *watcher) snapshot() *sse.Trace {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := &sse.Trace{}
	for _, f := range w.frames {
		if f.IsComment {
			t.Comments = append(t.Comments, f.Comment)
			continue
		}
		if ev, err := trace.Parse([]byte(f.Data)); err == nil {
			t.Events = append(t.Events, ev)
		}
	}
	select {
	case <-w.done:
		t.EndedAfterFinished = len(t.Events) > 0 && t.Events[len(t.Events)-1].Type() == trace.RequestFinished
	default:
	}
	return t
}

func (w *watcher) close() {
	w.cancel()
	w.stream.Close()
	<-w.done
}

// isEOF reports a clean end of a stream: EOF, or the suite's own close
// (openBounded never hands on a stream its opening bound cancelled).
func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, context.Canceled)
}

// stepErr is what a failing step tells godog. After the run was interrupted
// the scenario is cut short: not run, and skipped. In an @extended
// scenario of a feature the proxy does not claim, the proxy lacks the
// feature: unsupported, and skipped. Anywhere else it is the failure.
func (s *state) stepErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		// The run was interrupted (its context ended) while this step
		// ran: what failed is the step's own end, not the proxy. A skip,
		// so that godog's JUnit and Cucumber JSON do not count it failed.
		s.interrupted = true
		return godog.ErrSkip
	}
	// Whatever a step says goes to the report, JUnit, Cucumber JSON and
	// the progress view: no credential of the run may be in it.
	err = s.cfg.Secrets.ScrubError(err)
	if env := (*targets.EnvironmentError)(nil); errors.As(err, &env) {
		// The suite could not do its part: not run, in any scenario.
		s.missing, s.missingDetail = env.Summary(), env.Error()
		return godog.ErrSkip
	}
	if s.optional {
		s.unsupported = err.Error()
		return godog.ErrSkip
	}
	return err
}

// suiteTransport gives every request of a scenario its own connection, so
// a request never rides on one a previous step left in an odd state, and
// reaches the proxy under test directly, whatever HTTP_PROXY says.
func suiteTransport(t *http.Transport) *http.Transport {
	t.DisableKeepAlives = true
	t.Proxy = nil
	return t
}

// clip quotes at most the first 120 bytes of what a proxy sent, for an
// error message: a bad frame may be megabytes long.
func clip(s string) string {
	if len(s) > 120 {
		return fmt.Sprintf("%q... (%d bytes)", s[:120], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// followStream is an open follow stream, read to its end in the background.
type followStream struct {
	stream *sse.Stream
	opened time.Time
	// duration is the duration asked for (0: the proxy's default).
	duration time.Duration
	done     chan struct{}
	trace    sse.Trace
	err      error
	ended    time.Time
}

// credentials is what a scenario sent that a trace must not show.
type credentials struct {
	// headers are the credential headers each request carries (a new
	// credential each time).
	headers []string
	// cookie: each request asks the backend to set a cookie of its own.
	cookie bool
	// sent are the credentials sent so far, oldest first; lastSent those of
	// the last request, by header (lower case).
	sent     []string
	lastSent map[string]string
	// apiKey is the key the proxy sends an LLM backend.
	apiKey string
}

// heldStream is a streamed completion the mock backend holds before its end.
type heldStream struct {
	tokens int
	done   chan struct{}
	resp   *response
	err    error
}
