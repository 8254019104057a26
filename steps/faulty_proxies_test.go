package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dunglas/httpsfv"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/refproxy"
	"github.com/gwdiag/gwdiag/steps/mock"
	"github.com/gwdiag/gwdiag/steps/targets"
	"github.com/gwdiag/gwdiag/steps/tracecheck"
)

// A fault makes the in-process reference proxy misbehave in one precise
// way, by changing its configuration or by sitting in front of its
// listeners and admin server. The suite must catch each one.
type fault struct {
	// setup changes the configuration the proxy is given.
	setup func(*targets.Setup)
	// listener and admin wrap the real proxy's data plane and admin server.
	listener func(d *faultyDeployment, next http.Handler) http.Handler
	admin    func(d *faultyDeployment, next http.Handler) http.Handler
	// frames rewrites a trace stream; it gets a fresh state per stream.
	frames func() func(sse.Frame) []sse.Frame
	// reopen keeps a trace stream going after requestFinished, with the
	// trace of the next request: one stream, several requests.
	reopen bool
	// noComments drops comment frames (": ready").
	noComments bool
	// singleSlot keeps one watcher at a time, as older proxies do: a new
	// trace stream ends the previous one at once, with no events.
	singleSlot bool
	// proxyOptions start the in-process reference proxy with these
	// options (the in-process fault runs only).
	proxyOptions []refproxy.Option
}

// faultyTarget wraps a target (the in-process one, or the container one
// with the reference proxy's image) with a fault.
type faultyTarget struct {
	inner targets.Target
	fault fault
	// last is the last deployment configured, for tests that look at it;
	// scenarios configure concurrently.
	mu   sync.Mutex
	last *faultyDeployment
}

func (t *faultyTarget) Name() string                    { return "faulty-" + t.inner.Name() }
func (t *faultyTarget) Start(ctx context.Context) error { return t.inner.Start(ctx) }
func (t *faultyTarget) Stop(ctx context.Context) error  { return t.inner.Stop(ctx) }
func (t *faultyTarget) Capabilities() []string          { return t.inner.Capabilities() }
func (t *faultyTarget) ServiceAddr() (string, bool) {
	if sh, ok := t.inner.(targets.ServiceHost); ok {
		return sh.ServiceAddr()
	}
	return "", false
}

func (t *faultyTarget) Configure(ctx context.Context, setup targets.Setup) (targets.Deployment, error) {
	if t.fault.setup != nil {
		setup = cloneSetup(setup)
		t.fault.setup(&setup)
	}
	inner, err := t.inner.Configure(ctx, setup)
	if err != nil {
		return nil, err
	}
	d := &faultyDeployment{Deployment: inner, setup: setup, fault: t.fault, listeners: map[string]*httptest.Server{}}
	for _, l := range setup.Listeners {
		addr, _ := inner.ListenerAddr(l.Name)
		rp := reverseProxy(addr)
		d.transports = append(d.transports, rp.Transport.(*http.Transport))
		var h http.Handler = rp
		if t.fault.listener != nil {
			h = t.fault.listener(d, h)
		}
		d.listeners[l.Name] = httptest.NewServer(h)
	}
	var admin http.Handler = http.HandlerFunc(d.serveAdmin)
	if t.fault.admin != nil {
		admin = t.fault.admin(d, admin)
	}
	d.adminSrv = httptest.NewServer(admin)
	t.mu.Lock()
	t.last = d
	t.mu.Unlock()
	return d, nil
}

func cloneSetup(s targets.Setup) targets.Setup {
	b, _ := json.Marshal(s)
	var c targets.Setup
	json.Unmarshal(b, &c)
	return c
}

func reverseProxy(addr string) *httputil.ReverseProxy {
	u := &url.URL{Scheme: "http", Host: addr}
	// Director keeps the Host header of the client, as inject mode needs.
	// Its own transport: http.DefaultTransport is shared with every other
	// scenario running at the same time and with httptest's clean-up.
	// Rewrite, not Director: the wrapper stands for the proxy's own
	// listener, not a hop before it, so what is for the proxy itself
	// (Proxy-Authorization, a hop-by-hop header a Director cannot keep)
	// reaches it; X-Forwarded-For as a Director-based ReverseProxy sets it.
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.Out.URL.Scheme, pr.Out.URL.Host = u.Scheme, u.Host
		pr.Out.Host = pr.In.Host
		if v := pr.In.Header.Values("Proxy-Authorization"); len(v) > 0 {
			pr.Out.Header["Proxy-Authorization"] = v
		}
		if ip, _, err := net.SplitHostPort(pr.In.RemoteAddr); err == nil {
			pr.Out.Header.Set("X-Forwarded-For", ip)
		}
	}, FlushInterval: -1, Transport: &http.Transport{DisableCompression: true}}
	return rp
}

type faultyDeployment struct {
	targets.Deployment
	setup     targets.Setup
	fault     fault
	listeners map[string]*httptest.Server
	adminSrv  *httptest.Server

	transports []*http.Transport
	closeOnce  sync.Once
	mu         sync.Mutex
	tokensUsed uint64
	// previous is the trace stream a single-slot fault ends when the
	// next one opens.
	previous *slotStream
	// countedStreams are open streams whose usage chunk has passed.
	countedStreams atomic.Int64
	// quitAt is when /quitquitquit was answered ("ignores quitquitquit"),
	// stopAt when the deployment's Stop began: the scenario's end.
	quitAt, stopAt time.Time
}

func (d *faultyDeployment) ListenerAddr(name string) (string, error) {
	s, ok := d.listeners[name]
	if !ok {
		return "", fmt.Errorf("no listener %q", name)
	}
	return strings.TrimPrefix(s.URL, "http://"), nil
}

// ProxyLogs implements targets.LogKeeper when the wrapped deployment does.
func (d *faultyDeployment) ProxyLogs() string {
	if lk, ok := d.Deployment.(targets.LogKeeper); ok {
		return lk.ProxyLogs()
	}
	return ""
}

// ProxyConfig implements targets.ConfigKeeper when the wrapped deployment does.
func (d *faultyDeployment) ProxyConfig() (string, []byte) {
	if ck, ok := d.Deployment.(targets.ConfigKeeper); ok {
		return ck.ProxyConfig()
	}
	return "", nil
}

func (d *faultyDeployment) AdminAddr() string { return strings.TrimPrefix(d.adminSrv.URL, "http://") }

func (d *faultyDeployment) closeListeners() {
	d.closeOnce.Do(func() {
		for _, s := range d.listeners {
			s.CloseClientConnections()
			s.Close()
		}
	})
}

func (d *faultyDeployment) Stop(ctx context.Context) error {
	d.mu.Lock()
	d.stopAt = time.Now()
	d.mu.Unlock()
	d.closeListeners()
	d.adminSrv.CloseClientConnections()
	d.adminSrv.Close()
	for _, t := range d.transports {
		t.CloseIdleConnections()
	}
	return d.Deployment.Stop(ctx)
}

// serveAdmin forwards to the real admin server; trace streams go frame by
// frame through the fault's rewriting.
func (d *faultyDeployment) serveAdmin(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/debug/trace":
	case "/quitquitquit":
		// The real proxy stops; so must the listeners in front of it.
		reverseProxy(d.Deployment.AdminAddr()).ServeHTTP(w, r)
		go d.closeListeners()
		return
	default:
		reverseProxy(d.Deployment.AdminAddr()).ServeHTTP(w, r)
		return
	}
	ctx := r.Context()
	if d.fault.singleSlot {
		// The previous stream ends, its client told so, before this one is
		// opened: it never carries a request sent after this one is ready
		// (a cancel alone lets frames already on their way through).
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		this := &slotStream{cancel: cancel, done: make(chan struct{})}
		defer close(this.done)
		defer cancel()
		d.mu.Lock()
		prev := d.previous
		d.previous = this
		d.mu.Unlock()
		if prev != nil {
			prev.cancel()
			<-prev.done
		}
	}
	open := func() (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, r.Method, "http://"+d.Deployment.AdminAddr()+r.URL.RequestURI(), nil)
		return http.DefaultClient.Do(req)
	}
	resp, err := open()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	if resp.StatusCode != http.StatusOK {
		io.Copy(w, resp.Body)
		resp.Body.Close()
		return
	}
	flusher := w.(http.Flusher)
	flusher.Flush()
	rewrite := func(f sse.Frame) []sse.Frame { return []sse.Frame{f} }
	if d.fault.frames != nil {
		rewrite = d.fault.frames()
	}
	for {
		rd := sse.NewReader(resp.Body)
		for {
			f, err := rd.Next()
			if err != nil || ctx.Err() != nil {
				break
			}
			for _, out := range rewrite(f) {
				if out.IsComment {
					if d.fault.noComments {
						continue
					}
					fmt.Fprintf(w, ": %s\n\n", out.Comment)
				} else {
					fmt.Fprintf(w, "data: %s\n\n", out.Data)
				}
				flusher.Flush()
			}
		}
		resp.Body.Close()
		if !d.fault.reopen || resp.StatusCode != http.StatusOK || r.Context().Err() != nil {
			return
		}
		if resp, err = open(); err != nil {
			return
		}
	}
}

// slotStream is a trace stream of the single-slot fault: cancel ends it,
// done is closed when its handler has returned.
type slotStream struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// refusalOfSeveral is a listener fault that rewrites the headers of a 429
// on a route with several limits; ceilings are the limits' (amount plus
// burst), in the route's order.
func refusalOfSeveral(rewrite func(ceilings []uint64, h http.Header)) func(*faultyDeployment, http.Handler) http.Handler {
	return func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(&headerHook{ResponseWriter: w, hook: func(code int, h http.Header) {
				rt := d.routeFor(r.URL.Path)
				if code != http.StatusTooManyRequests || rt == nil || len(rt.Limits) < 2 {
					return
				}
				var ceilings []uint64
				for _, l := range rt.Limits {
					ceilings = append(ceilings, l.Amount+l.Burst)
				}
				rewrite(ceilings, h)
			}}, r)
		})
	}
}

// headerHook lets a fault change the headers as they go out, without
// buffering the body (streams keep streaming).
type headerHook struct {
	http.ResponseWriter
	hook  func(code int, h http.Header)
	wrote bool
}

func (h *headerHook) WriteHeader(code int) {
	if !h.wrote {
		h.wrote = true
		h.hook(code, h.Header())
	}
	h.ResponseWriter.WriteHeader(code)
}

func (h *headerHook) Write(b []byte) (int, error) {
	if !h.wrote {
		h.WriteHeader(http.StatusOK)
	}
	return h.ResponseWriter.Write(b)
}

func (h *headerHook) Flush() { h.ResponseWriter.(http.Flusher).Flush() }

// eachLimit is a setup fault that changes every local limit of a route.
func eachLimit(f func(*targets.Limit)) func(*targets.Setup) {
	return func(s *targets.Setup) {
		for i := range s.Listeners {
			for j := range s.Listeners[i].Routes {
				for k := range s.Listeners[i].Routes[j].Limits {
					f(&s.Listeners[i].Routes[j].Limits[k])
				}
			}
		}
	}
}

// bodyDropper drops the body and content type of a global limit's 429
// (one with x-envoy-ratelimited), passing everything else on.
type bodyDropper struct {
	http.ResponseWriter
	wrote, drop bool
}

func (b *bodyDropper) WriteHeader(code int) {
	if !b.wrote {
		b.wrote = true
		h := b.Header()
		if b.drop = code == http.StatusTooManyRequests && h.Get("X-Envoy-Ratelimited") == "true"; b.drop {
			h.Del("Content-Type")
			h.Set("Content-Length", "0")
		}
	}
	b.ResponseWriter.WriteHeader(code)
}

func (b *bodyDropper) Write(p []byte) (int, error) {
	if !b.wrote {
		b.WriteHeader(http.StatusOK)
	}
	if b.drop {
		return len(p), nil
	}
	return b.ResponseWriter.Write(p)
}

func (b *bodyDropper) Flush() { b.ResponseWriter.(http.Flusher).Flush() }

// frameCutter passes on the first SSE frame of a stream and drops the rest.
type frameCutter struct {
	http.ResponseWriter
	done bool
}

func (f *frameCutter) Write(b []byte) (int, error) {
	if !strings.HasPrefix(f.Header().Get("Content-Type"), "text/event-stream") {
		return f.ResponseWriter.Write(b)
	}
	if f.done {
		return len(b), nil
	}
	if i := strings.Index(string(b), "\n\n"); i >= 0 {
		f.done = true
		f.ResponseWriter.Write(b[:i+2])
		return len(b), nil
	}
	return f.ResponseWriter.Write(b)
}

func (f *frameCutter) Flush() { f.ResponseWriter.(http.Flusher).Flush() }

// usageWatcher notes when a streamed response's usage chunk passes.
type usageWatcher struct {
	http.ResponseWriter
	d       *faultyDeployment
	counted bool
}

func (u *usageWatcher) Write(b []byte) (int, error) {
	if !u.counted && strings.HasPrefix(u.Header().Get("Content-Type"), "text/event-stream") && strings.Contains(string(b), `"usage"`) {
		u.counted = true
		u.d.countedStreams.Add(1)
	}
	return u.ResponseWriter.Write(b)
}

func (u *usageWatcher) Flush() { u.ResponseWriter.(http.Flusher).Flush() }

// routeOf returns the route of the default listener a path goes to.
func (d *faultyDeployment) routeFor(path string) *targets.Route {
	for i := range d.setup.Listeners {
		for j, r := range d.setup.Listeners[i].Routes {
			if strings.HasPrefix(path, r.PathPrefix) {
				return &d.setup.Listeners[i].Routes[j]
			}
		}
	}
	return nil
}

func eventType(f sse.Frame) trace.MessageType {
	if f.IsComment {
		return ""
	}
	e, err := trace.Parse([]byte(f.Data))
	if err != nil {
		return ""
	}
	return e.Type()
}

// The faults.
var faults = map[string]fault{
	// policySelection is sent before routeSelection, in each trace: a
	// routeSelection is held until its own trace's next event (a follow
	// stream interleaves the traces of requests sent at once, so what is
	// held is kept per request id, and never lost).
	"reordered trace events": {frames: func() func(sse.Frame) []sse.Frame {
		held := map[string]sse.Frame{}
		return func(f sse.Frame) []sse.Frame {
			if f.IsComment {
				return []sse.Frame{f}
			}
			e, err := trace.Parse([]byte(f.Data))
			if err != nil {
				return []sse.Frame{f}
			}
			h, ok := held[e.RequestID]
			switch {
			case e.Type() == trace.RouteSelection:
				held[e.RequestID] = f
				if ok {
					return []sse.Frame{h}
				}
				return nil
			case !ok:
				return []sse.Frame{f}
			}
			delete(held, e.RequestID)
			if e.Type() == trace.PolicySelection {
				return []sse.Frame{f, h}
			}
			return []sse.Frame{h, f}
		}
	}},
	// Burst is ignored: the proxy is configured with base limits only.
	"missing burst": {setup: eachLimit(func(l *targets.Limit) { l.Burst = 0 })},
	// Shadow limits enforced: the proxy takes shadow mode for an ordinary
	// limit, and refuses what it should only have counted.
	"shadow limits refuse": {setup: eachLimit(func(l *targets.Limit) { l.Shadow, l.ShadowHeaders = false, false })},
	// Shadow limits not counted at all: no trace of what they would have
	// refused, no headers when asked.
	"shadow limits ignored": {setup: func(s *targets.Setup) {
		for i := range s.Listeners {
			for j := range s.Listeners[i].Routes {
				r := &s.Listeners[i].Routes[j]
				r.Limits = slices.DeleteFunc(r.Limits, func(l targets.Limit) bool { return l.Shadow })
			}
		}
	}},
	// A shadow limit's state always in the headers, asked or not: a client
	// reads the headers of a limit that does not apply to it.
	"shadow headers always written": {setup: eachLimit(func(l *targets.Limit) { l.ShadowHeaders = l.Shadow })},
	// Global limits are counted by each replica on its own: the proxy keeps
	// local counters instead of asking the rate-limit service.
	"global limits counted per replica": {setup: func(s *targets.Setup) {
		for i := range s.Listeners {
			for j := range s.Listeners[i].Routes {
				r := &s.Listeners[i].Routes[j]
				for _, g := range r.Global {
					r.Limits = append(r.Limits, targets.Limit{Kind: g.Kind, Amount: g.Amount, Unit: time.Hour})
				}
				r.Global = nil
			}
		}
	}},
	// Limits on a gateway are ignored: only route limits apply.
	"gateway limits ignored": {setup: func(s *targets.Setup) {
		var kept []targets.Policy
		for _, p := range s.Policies {
			if p.TargetKind != "Gateway" {
				kept = append(kept, p)
			}
		}
		s.Policies = kept
	}},
	// Refused requests still reach the backend.
	"forwarded 429s": {listener: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			next.ServeHTTP(&headerHook{ResponseWriter: w, hook: func(code int, _ http.Header) {
				rt := d.routeFor(r.URL.Path)
				if code != http.StatusTooManyRequests || rt == nil {
					return
				}
				addr, _ := d.BackendAddr(rt.Backend)
				req, _ := http.NewRequest(r.Method, "http://"+addr+r.URL.RequestURI(), strings.NewReader(string(body)))
				req.Header = r.Header.Clone()
				if resp, err := http.DefaultClient.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}}, r)
		})
	}},
	// Tokens are counted from the request, before the response: the request
	// that would cross the budget is refused.
	"tokens counted before the response": {listener: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rt := d.routeFor(r.URL.Path)
			if rt == nil {
				next.ServeHTTP(w, r)
				return
			}
			var limit uint64
			for _, l := range rt.Limits {
				if l.Kind == targets.LimitTokens {
					limit = l.Amount
				}
			}
			p, _ := strconv.ParseUint(r.Header.Get(mock.HeaderPromptTokens), 10, 64)
			c, _ := strconv.ParseUint(r.Header.Get(mock.HeaderCompletionTokens), 10, 64)
			d.mu.Lock()
			refuse := limit > 0 && d.tokensUsed+p+c > limit
			if !refuse {
				d.tokensUsed += p + c
			}
			d.mu.Unlock()
			if refuse {
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(http.StatusTooManyRequests)
				io.WriteString(w, "rate limit exceeded\n")
				return
			}
			next.ServeHTTP(w, r)
		})
	}},
	// Keyed limits are configured without their key: every client shares
	// one bucket.
	"limits not keyed": {setup: func(s *targets.Setup) {
		for i := range s.Listeners {
			for j := range s.Listeners[i].Routes {
				for k := range s.Listeners[i].Routes[j].Limits {
					s.Listeners[i].Routes[j].Limits[k].KeyHeader = ""
				}
			}
		}
	}},
	// A global limit's descriptor loses its client part: every client
	// shares the limit's one budget at the service.
	"global limits not per client": {setup: func(s *targets.Setup) {
		for i := range s.Listeners {
			for j := range s.Listeners[i].Routes {
				for k := range s.Listeners[i].Routes[j].Global {
					s.Listeners[i].Routes[j].Global[k].KeyHeader = ""
				}
			}
		}
	}},
	// A 429 of a route with several limits carries the headers of the
	// widest one, which passed (the open report against the reference).
	"429 headers of a limit that passed": {listener: refusalOfSeveral(func(ceilings []uint64, h http.Header) {
		h.Set("X-Ratelimit-Limit", strconv.FormatUint(slices.Max(ceilings), 10))
		h.Set("X-Ratelimit-Remaining", "1")
	})},
	// 429s carry no Retry-After, as the reference's do not.
	"no Retry-After": {listener: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(&headerHook{ResponseWriter: w, hook: func(_ int, h http.Header) { h.Del("Retry-After") }}, r)
		})
	}},
	// A completion's x-ratelimit-remaining is taken before its own usage
	// is charged, as the reference does: the fault adds that usage back.
	"token headers before the charge": {listener: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, _ := strconv.ParseUint(r.Header.Get(mock.HeaderPromptTokens), 10, 64)
			c, _ := strconv.ParseUint(r.Header.Get(mock.HeaderCompletionTokens), 10, 64)
			next.ServeHTTP(&headerHook{ResponseWriter: w, hook: func(code int, h http.Header) {
				n, err := strconv.ParseUint(h.Get("X-Ratelimit-Remaining"), 10, 64)
				limit, lerr := strconv.ParseUint(h.Get("X-Ratelimit-Limit"), 10, 64)
				if code != http.StatusOK || err != nil || lerr != nil || strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
					return
				}
				h.Set("X-Ratelimit-Remaining", strconv.FormatUint(min(n+p+c, limit), 10))
			}}, r)
		})
	}},
	// The option of OpenAI's JSON error is ignored: 429s are the spec's text.
	"429 always plain text": {setup: func(s *targets.Setup) {
		for i := range s.Listeners {
			for j := range s.Listeners[i].Routes {
				s.Listeners[i].Routes[j].RateLimitError = ""
			}
		}
	}},
	// Rate-limit headers are wrong on 429s and present without a policy.
	"wrong headers": {listener: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(&headerHook{ResponseWriter: w, hook: func(code int, h http.Header) {
				if code == http.StatusTooManyRequests {
					h.Set("X-Ratelimit-Remaining", "1")
					h.Del("X-Ratelimit-Limit")
				} else if h.Get("X-Ratelimit-Limit") == "" {
					h.Set("X-Ratelimit-Limit", "100")
				}
			}}, r)
		})
	}},
	// A 429 carries the headers of the route's lowest limit, not of the
	// limit that refused it (a token limit refuses; the request limit is
	// lower).
	"429 headers of the lowest limit": {listener: refusalOfSeveral(func(ceilings []uint64, h http.Header) {
		h.Set("X-Ratelimit-Limit", strconv.FormatUint(slices.Min(ceilings), 10))
	})},
	// A local 429's reset counts to the end of the current minute, whatever
	// the window of the limit that refused it (an hour's limit says "in 40
	// s"). Global 429s (a windowed x-ratelimit-limit) are left alone: their
	// windows end with the clock's, so in the last minute of a day no
	// scenario could tell the fault, and the catalogue would fail then.
	"429 reset of the shortest window": {listener: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(&headerHook{ResponseWriter: w, hook: func(code int, h http.Header) {
				if strings.Contains(h.Get("X-Ratelimit-Limit"), ";w=") {
					return
				}
				if n, err := strconv.Atoi(h.Get("X-Ratelimit-Reset")); code == http.StatusTooManyRequests && err == nil && n > 60 {
					h.Set("X-Ratelimit-Reset", strconv.Itoa(n%60))
				}
			}}, r)
		})
	}},
	// A token limit keyed by a header ignores its key: every client shares
	// one token budget (request limits keep theirs).
	"keyed token limits share one budget": {setup: func(s *targets.Setup) {
		for i := range s.Listeners {
			for j := range s.Listeners[i].Routes {
				for k, l := range s.Listeners[i].Routes[j].Limits {
					if l.Kind == targets.LimitTokens {
						s.Listeners[i].Routes[j].Limits[k].KeyHeader = ""
					}
				}
			}
		}
	}},
	// A key is cut at 64 bytes before it picks a bucket: long keys that
	// share their first 64 bytes share one bucket.
	"keys cut at 64 bytes": {listener: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if rt := d.routeFor(r.URL.Path); rt != nil {
				for _, l := range rt.Limits {
					if v := r.Header.Get(l.KeyHeader); l.KeyHeader != "" && len(v) > 64 {
						r.Header.Set(l.KeyHeader, v[:64])
					}
				}
			}
			next.ServeHTTP(w, r)
		})
	}},
	// Retry-After on every response that carries rate-limit headers, the
	// allowed ones too.
	"retry-after on allowed responses": {listener: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(&headerHook{ResponseWriter: w, hook: func(code int, h http.Header) {
				if reset := h.Get("X-Ratelimit-Reset"); code < 300 && reset != "" && h.Get("Retry-After") == "" {
					h.Set("Retry-After", reset)
				}
			}}, r)
		})
	}},
	// Allowed responses carry the limit and what is left, but not when the
	// window resets.
	"no reset on allowed responses": {listener: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(&headerHook{ResponseWriter: w, hook: func(code int, h http.Header) {
				if code < 300 {
					h.Del("X-Ratelimit-Reset")
				}
			}}, r)
		})
	}},
	// The reference's issue 3329: a global limit's 429 comes with an empty
	// body and no content type, whatever error shape the route asks for.
	"global 429 without a body": {listener: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(&bodyDropper{ResponseWriter: w}, r)
		})
	}},
	// A global 429 refused by several descriptors tells the reset of the
	// shortest window (the first that denied, as refproxy once chose),
	// though the request passes only when the longest has reset too.
	"global 429 tells the shortest reset": {listener: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(&headerHook{ResponseWriter: w, hook: func(code int, h http.Header) {
				_, windows, ok := strings.Cut(h.Get("X-Ratelimit-Limit"), ", ")
				if code != http.StatusTooManyRequests || !ok || !strings.Contains(windows, ", ") {
					return
				}
				shortest := int64(math.MaxInt64)
				for _, w := range strings.Split(windows, ", ") {
					if _, v, ok := strings.Cut(w, ";w="); ok {
						if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
							shortest = min(shortest, n)
						}
					}
				}
				if shortest == math.MaxInt64 {
					return
				}
				reset := strconv.FormatInt(shortest-time.Now().Unix()%shortest, 10)
				h.Set("X-Ratelimit-Reset", reset)
				h.Set("Retry-After", reset)
			}}, r)
		})
	}},
	// RateLimit in the form of the draft's early revisions (a Dictionary
	// "limit=3, remaining=2, reset=60"), which is not the List of policy
	// items the current draft defines: clients of the draft cannot read it.
	"IETF fields in an old draft's form": {listener: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(&headerHook{ResponseWriter: w, hook: func(code int, h http.Header) {
				ps, err := httpsfv.UnmarshalList(h.Values("Ratelimit-Policy"))
				rs, err2 := httpsfv.UnmarshalList(h.Values("Ratelimit"))
				if err != nil || err2 != nil || len(ps) == 0 || len(ps) != len(rs) {
					return
				}
				var old []string
				for i := range ps {
					q, _ := ps[i].(httpsfv.Item).Params.Get("q")
					r, _ := rs[i].(httpsfv.Item).Params.Get("r")
					t, _ := rs[i].(httpsfv.Item).Params.Get("t")
					old = append(old, fmt.Sprintf("limit=%v, remaining=%v, reset=%v", q, r, t))
				}
				h["Ratelimit"] = old
			}}, r)
		})
	}},
	// A backend's own RateLimit-Policy and RateLimit replaced by the
	// proxy's (set, not added): the provider's policy is lost.
	"upstream IETF fields replaced": {listener: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(&headerHook{ResponseWriter: w, hook: func(code int, h http.Header) {
				for _, name := range []string{"Ratelimit-Policy", "Ratelimit"} {
					if vs := h.Values(name); len(vs) > 1 {
						h[name] = vs[len(vs)-1:] // the proxy's own line comes last
					}
				}
			}}, r)
		})
	}},
	// OpenAI's resets written as x-ratelimit-reset is, in whole seconds
	// ("60"), where OpenAI's clients parse a duration ("1m0s").
	"OpenAI resets in seconds": {listener: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(&headerHook{ResponseWriter: w, hook: func(code int, h http.Header) {
				for _, name := range []string{"X-Ratelimit-Reset-Requests", "X-Ratelimit-Reset-Tokens"} {
					if dur, err := time.ParseDuration(h.Get(name)); err == nil {
						h.Set(name, strconv.Itoa(int(dur.Seconds())))
					}
				}
			}}, r)
		})
	}},
	// A provider's own rate-limit headers overwritten by the proxy's, as
	// a proxy that sets its headers without looking would leave them: the
	// client is told it has more left than the provider said. (Made here
	// by keeping the provider's headers from being sent: the response the
	// client gets is the same.)
	"provider rate-limit headers overwritten": {listener: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Header.Del(mock.HeaderResponseHeader)
			next.ServeHTTP(w, r)
		})
	}},
	// Anthropic's resets written as a number of seconds, where Anthropic's
	// clients parse an RFC 3339 time.
	"Anthropic resets in seconds": {listener: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(&headerHook{ResponseWriter: w, hook: func(code int, h http.Header) {
				for _, name := range []string{"Anthropic-Ratelimit-Requests-Reset", "Anthropic-Ratelimit-Tokens-Reset"} {
					if at, err := time.Parse(time.RFC3339, h.Get(name)); err == nil {
						h.Set(name, strconv.Itoa(int(time.Until(at).Seconds())))
					}
				}
			}}, r)
		})
	}},
	// The admin server answers wrongly: a /logging text in another form,
	// out-of-bounds profile durations accepted, a config_dump without policies.
	"wrong admin answers": {admin: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/logging":
				if r.Method == http.MethodGet {
					io.WriteString(w, "log level: info\n")
					return
				}
			case "/debug/pprof/profile":
				if s, err := strconv.Atoi(r.URL.Query().Get("seconds")); err != nil || s < 1 || s > 300 {
					io.WriteString(w, "profile")
					return
				}
			case "/config_dump":
				rec := httptest.NewRecorder()
				next.ServeHTTP(rec, r)
				var m map[string]any
				json.Unmarshal(rec.Body.Bytes(), &m)
				delete(m, "policies")
				json.NewEncoder(w).Encode(m)
				return
			}
			next.ServeHTTP(w, r)
		})
	}},
	// A follow stream never answers: /debug/trace?follow=true holds the
	// request without a response head. Only a bounded opening catches it
	// (openBounded, which every trace stream of the suite opens through).
	"follow stream never answers": {admin: func(_ *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/debug/trace" && r.URL.Query().Get("follow") == "true" {
				<-r.Context().Done()
				return
			}
			next.ServeHTTP(w, r)
		})
	}},
	// A rate-limit window never resets: after the first 429 of a
	// listener, every request to it is refused. Only a wait that fails
	// when its condition never comes catches it.
	"limits never reset": {listener: func(_ *faultyDeployment, next http.Handler) http.Handler {
		var refusing atomic.Bool
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if refusing.Load() {
				http.Error(w, "rate limit exceeded", http.StatusTooManyRequests)
				return
			}
			next.ServeHTTP(&headerHook{ResponseWriter: w, hook: func(code int, _ http.Header) {
				if code == http.StatusTooManyRequests {
					refusing.Store(true)
				}
			}}, r)
		})
	}},
	// When the backend cuts a body after the head went out, the proxy
	// neither ends nor aborts the client's response: it holds it open.
	// Only a client that tells its own timeout from a cut catches it.
	"holds a cut body open": {listener: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if v := recover(); v != nil {
					if v != http.ErrAbortHandler {
						panic(v)
					}
					<-r.Context().Done()
				}
			}()
			next.ServeHTTP(w, r)
		})
	}},
	// /quitquitquit answers 200 and the proxy keeps serving, as a proxy
	// written apart from this project did (issue 24): only a wait that
	// fails at its deadline catches it.
	"ignores quitquitquit": {admin: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/quitquitquit" {
				io.WriteString(w, "OK\n")
				d.mu.Lock()
				d.quitAt = time.Now()
				d.mu.Unlock()
				return
			}
			next.ServeHTTP(w, r)
		})
	}},
	// The stream does not end after requestFinished; it goes on with the
	// next request's trace.
	"trace mixes requests": {reopen: true},
	// Point events carry an eventStart.
	"eventStart on point events": {frames: func() func(sse.Frame) []sse.Frame {
		return func(f sse.Frame) []sse.Frame {
			if eventType(f) != trace.RouteSelection {
				return []sse.Frame{f}
			}
			e, _ := trace.Parse([]byte(f.Data))
			start := e.EventEnd
			e.EventStart = &start
			b, _ := json.Marshal(e)
			return []sse.Frame{{Data: string(b)}}
		}
	}},
	// Streamed LLM responses are cut after the first chunk.
	"stream cut": {listener: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(&frameCutter{ResponseWriter: w}, r)
		})
	}},
	// A stream's tokens are taken when its usage chunk passes, before the
	// stream ends: while such a stream is open, requests are refused.
	"stream counted at its usage chunk": {listener: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if d.countedStreams.Load() > 0 {
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(http.StatusTooManyRequests)
				io.WriteString(w, "rate limit exceeded\n")
				return
			}
			uw := &usageWatcher{ResponseWriter: w, d: d}
			next.ServeHTTP(uw, r)
			if uw.counted {
				d.countedStreams.Add(-1)
			}
		})
	}},
	// One global watcher slot, as in older proxies.
	"single watcher slot": {singleSlot: true},
	// No ": ready" comment: an extended feature the proxy lacks.
	"no ready comment": {noComments: true},
	// backendCallResult and the final response snapshot always say 200,
	// whatever the backend answered and the client received.
	"trace hides the backend status": {frames: func() func(sse.Frame) []sse.Frame {
		return rewriteEvents(func(e *trace.Event) {
			switch e.Type() {
			case trace.BackendCallResult:
				e.Message["status"] = 200
			case trace.ResponseSnapshot:
				if r, ok := tracecheck.State(*e)["response"].(map[string]any); ok {
					r["code"] = 200
				}
			}
		})
	}},
	// The trace gives reasons, but wrong ones: every route that did not
	// match failed on its path, a refusing limit entry had budget left, and
	// a backend that could not be reached answered wrongly.
	"trace gives wrong reasons": {frames: func() func(sse.Frame) []sse.Frame {
		return rewriteEvents(func(e *trace.Event) {
			switch e.Type() {
			case trace.RouteSelection:
				rs, _ := e.Message["reasons"].([]any)
				for _, r := range rs {
					if m, _ := r.(map[string]any); m["result"] == "noMatch" {
						m["condition"] = "path"
					}
				}
			case trace.PolicyResultType:
				res, _ := e.Message["result"].(map[string]any)
				entries, _ := res["entries"].([]any)
				for _, en := range entries {
					if m, _ := en.(map[string]any); m["refused"] == true {
						m["remaining"] = 1
					}
				}
			case trace.RequestFinished:
				if c, _ := e.Message["cause"].(map[string]any); c["kind"] == "backendUnreachable" {
					c["kind"] = "backendError"
				}
			}
		})
	}},
	// Snapshots carry startTime in local time without a zone and ports as
	// strings.
	// Traces show credentials in clear (refproxy's loud opt-out): every
	// credential header, cookie and key; config.sensitiveHeaders alone stay
	// redacted.
	"credentials in clear": {proxyOptions: []refproxy.Option{refproxy.WithTraceCredentialsInClear(true)}},
	// The proxy's spans disagree with its trace on the status: the tree is
	// made from events whose requestFinished says another status than the
	// one the client got and the trace shows.
	"spans disagree with the trace on status": {proxyOptions: []refproxy.Option{refproxy.WithOTLPEvents(func(evs []trace.Event) []trace.Event {
		for _, e := range evs {
			if st, ok := e.Message["status"].(float64); ok && e.Type() == trace.RequestFinished {
				e.Message["status"] = st + 1
			}
		}
		return evs
	})}},
	// The proxy's spans miscount the tokens a response charged: the tree is
	// made from events whose charge says one token more than the trace.
	"spans miscount the charged tokens": {proxyOptions: []refproxy.Option{refproxy.WithOTLPEvents(func(evs []trace.Event) []trace.Event {
		for _, e := range evs {
			if n, ok := e.Message["tokens"].(float64); ok && e.Type() == trace.PolicyEvent {
				e.Message["tokens"] = n + 1
			}
		}
		return evs
	})}},
	// A client's traceparent is lost on the way in: the proxy starts a
	// trace of its own instead of going on with the client's.
	"client's traceparent lost": {listener: func(_ *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Header.Del("traceparent")
			next.ServeHTTP(w, r)
		})
	}},
	// The reference's issue 3523: a global descriptor that cannot be
	// evaluated is skipped even when the limit fails closed, so a request
	// without the key escapes the limit.
	"unevaluated descriptors skipped under fail-closed": {proxyOptions: []refproxy.Option{refproxy.WithUnevaluatedDescriptorsSkipped(true)}},
	// The reference's issue 3282 (fixed): a response's token cost sent to
	// the global service without its descriptor's entries, so the service
	// never counts the tokens against the limit.
	"token charge without its descriptor": {proxyOptions: []refproxy.Option{refproxy.WithRateLimitServiceDialOptions(
		grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if r, ok := req.(*rlsv3.RateLimitRequest); ok {
				for _, d := range r.Descriptors {
					if d.HitsAddend.GetValue() > 0 {
						d.Entries = []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "charge", Value: "lost"}}
					}
				}
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		}))}},
	// The config dump shows the keys the config holds (a proxy that does
	// not redact its config): each LLM backend's key in a backendAuth
	// policy, as the reference's dump would write it unredacted.
	"config dump shows its keys": {admin: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/config_dump" {
				next.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			var m map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			policies, _ := m["policies"].([]any)
			for _, b := range d.setup.Backends {
				if b.APIKey != "" {
					policies = append(policies, map[string]any{"key": "backend/" + b.Name + ":backendAuth",
						"target": map[string]any{"backend": map[string]any{"name": b.Name}},
						"policy": map[string]any{"backend": map[string]any{"backendAuth": map[string]any{"key": b.APIKey}}}})
				}
			}
			m["policies"] = policies
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(m)
		})
	}},
	// The proxy redacts what the reference does and nothing more:
	// authorization and proxy-authorization (and sensitiveHeaders), not
	// cookies, API-key headers or a backend's Set-Cookie.
	"redacts only what the reference does": {
		proxyOptions: []refproxy.Option{refproxy.WithTraceCredentialsInClear(true)},
		setup: func(s *targets.Setup) {
			s.SensitiveHeaders = append(s.SensitiveHeaders, "authorization", "proxy-authorization")
		},
	},
	// config.sensitiveHeaders is ignored: the proxy never hears of it.
	"sensitiveHeaders ignored": {setup: func(s *targets.Setup) { s.SensitiveHeaders = nil }},
	// A redacted header is left out of the snapshots altogether, so a
	// reader cannot tell it was sent.
	"redacted headers dropped": {frames: func() func(sse.Frame) []sse.Frame {
		return rewriteEvents(func(e *trace.Event) {
			st := tracecheck.State(*e)
			for _, part := range []string{"request", "response"} {
				if r, ok := st[part].(map[string]any); ok {
					if h, ok := r["headers"].(map[string]any); ok {
						for k, v := range h {
							if s, _ := v.(string); strings.Contains(s, "<redacted") {
								delete(h, k)
							}
						}
					}
				}
			}
		})
	}},
	"snapshot fields of the wrong type": {frames: func() func(sse.Frame) []sse.Frame {
		return rewriteEvents(func(e *trace.Event) {
			st := tracecheck.State(*e)
			if r, ok := st["request"].(map[string]any); ok {
				r["startTime"] = "2026-01-02 10:00:00"
			}
			if src, ok := st["source"].(map[string]any); ok {
				src["port"] = fmt.Sprint(src["port"])
			}
		})
	}},
	// A backend body cut short: the client gets no response at all, while
	// the trace says the backend answered 200 with no error and the final
	// response was 200 (what refproxy did before it read bodies ahead).
	"trace claims a cut body succeeded": {
		listener: func(d *faultyDeployment, next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasPrefix(r.URL.Path, "/cut/") {
					next.ServeHTTP(w, r)
					return
				}
				// The proxy behind still handles (and traces) the request.
				next.ServeHTTP(httptest.NewRecorder(), r)
				if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
					c.Close()
				}
			})
		},
		frames: func() func(sse.Frame) []sse.Frame {
			cut := false // the traced request is one to /cut/
			return rewriteEvents(func(e *trace.Event) {
				if p, _ := tracecheck.Lookup(tracecheck.State(*e), "request.path"); e.Stage() == trace.StageInitialRequest {
					cut = strings.HasPrefix(fmt.Sprint(p), "/cut/")
				}
				if !cut {
					return
				}
				switch e.Type() {
				case trace.BackendCallResult:
					e.Message["status"], e.Message["error"], e.Severity = 200, nil, trace.SeverityInfo
				case trace.ResponseSnapshot:
					if r, ok := tracecheck.State(*e)["response"].(map[string]any); ok {
						r["code"] = 200
					}
				case trace.RequestFinished:
					delete(e.Message, "error")
					e.Severity = trace.SeverityInfo
				}
			})
		},
	},
	// Every response closes its connection, as proxies may after a 429.
	"connection closed after every response": {listener: func(d *faultyDeployment, next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			next.ServeHTTP(w, r)
		})
	}},
}

// rewriteEvents changes every data frame's event with edit.
func rewriteEvents(edit func(*trace.Event)) func(sse.Frame) []sse.Frame {
	return func(f sse.Frame) []sse.Frame {
		if f.IsComment {
			return []sse.Frame{f}
		}
		e, err := trace.Parse([]byte(f.Data))
		if err != nil {
			return []sse.Frame{f}
		}
		edit(&e)
		b, _ := json.Marshal(e)
		return []sse.Frame{{Data: string(b)}}
	}
}
