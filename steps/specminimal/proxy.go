package specminimal

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config is the proxy's configuration: listeners with their routes.
type Config struct {
	// AdminAddr is the admin server's host:port (default 127.0.0.1:0).
	AdminAddr string
	Listeners []Listener
	// IgnoreQuit is a fault for the suite's own tests: /quitquitquit
	// answers 200 and the proxy keeps serving.
	IgnoreQuit bool
}

// Listener is one port with its routes.
type Listener struct {
	Name string
	// Addr is the host:port to listen on (default 127.0.0.1:0).
	Addr   string
	Routes []Route
}

func orAny(addr string) string {
	if addr == "" {
		return "127.0.0.1:0"
	}
	return addr
}

// Route sends requests whose path starts with PathPrefix to Backend; the
// first matching route of the listener wins.
type Route struct {
	Name       string
	PathPrefix string
	// Backend is the upstream's host:port.
	Backend string
	// Limits are local rate limits, all evaluated independently (spec 7,
	// rule 4).
	Limits []Limit
}

// Limit is one local rate limit: Amount requests (or LLM tokens) per Unit,
// plus Burst extra requests.
type Limit struct {
	Tokens bool
	Amount uint64
	Unit   time.Duration
	Burst  uint64
}

// Proxy is a running spec-minimal proxy.
type Proxy struct {
	listeners map[string]string
	servers   []*http.Server
	admin     *http.Server
	adminAddr string
	tracer    tracer
	limits    limiter
	logLevel  logLevel

	closeOnce sync.Once
	stopping  chan struct{} // closed when Close begins: long admin answers end
	done      chan struct{} // closed when Close has ended
}

// Start binds one listener per Config listener and the admin server (on
// 127.0.0.1:0 where no address is given), and serves until Close or
// /quitquitquit.
func Start(cfg Config) (*Proxy, error) {
	cfg, err := clone(cfg)
	if err != nil {
		return nil, err
	}
	p := &Proxy{listeners: map[string]string{}, stopping: make(chan struct{}), done: make(chan struct{}),
		logLevel: logLevel{filter: "info"}}
	p.limits.start = time.Now()
	var lns []net.Listener
	fail := func(err error) (*Proxy, error) {
		for _, ln := range lns {
			ln.Close()
		}
		return nil, err
	}
	for _, l := range cfg.Listeners {
		ln, err := net.Listen("tcp", orAny(l.Addr))
		if err != nil {
			return fail(err)
		}
		lns = append(lns, ln)
		if _, dup := p.listeners[l.Name]; dup {
			return fail(fmt.Errorf("specminimal: two listeners named %q", l.Name))
		}
		p.listeners[l.Name] = ln.Addr().String()
		_, port := splitAddr(ln.Addr().String())
		p.servers = append(p.servers, &http.Server{Handler: p.dataPlane(port, l), ReadHeaderTimeout: 10 * time.Second})
	}
	aln, err := net.Listen("tcp", orAny(cfg.AdminAddr))
	if err != nil {
		return fail(err)
	}
	p.adminAddr = aln.Addr().String()
	p.admin = &http.Server{Handler: p.adminHandler(cfg), ReadHeaderTimeout: 10 * time.Second}
	for i, s := range p.servers {
		go s.Serve(lns[i])
	}
	go p.admin.Serve(aln)
	return p, nil
}

// clone copies cfg, so that the caller may change its own afterwards, and
// checks that every limit has a unit.
func clone(cfg Config) (Config, error) {
	out := cfg
	out.Listeners = make([]Listener, len(cfg.Listeners))
	for i, l := range cfg.Listeners {
		l.Routes = append([]Route(nil), l.Routes...)
		for j := range l.Routes {
			rt := &l.Routes[j]
			rt.Limits = append([]Limit(nil), rt.Limits...)
			for _, lim := range rt.Limits {
				if lim.Unit <= 0 {
					return cfg, fmt.Errorf("specminimal: route %q: a limit without a unit", rt.Name)
				}
			}
		}
		out.Listeners[i] = l
	}
	return out, nil
}

// ListenerAddr is the host:port of the named listener.
func (p *Proxy) ListenerAddr(name string) (string, error) {
	a, ok := p.listeners[name]
	if !ok {
		return "", fmt.Errorf("specminimal: no listener %q", name)
	}
	return a, nil
}

// AdminAddr is the admin server's host:port.
func (p *Proxy) AdminAddr() string { return p.adminAddr }

// Done is closed once the proxy has stopped.
func (p *Proxy) Done() <-chan struct{} { return p.done }

// Close stops the proxy gracefully (requests in flight may finish for up to
// 10 seconds, then their connections are cut); it is safe to call twice and
// after /quitquitquit.
func (p *Proxy) Close() error {
	var err error
	p.closeOnce.Do(func() {
		close(p.stopping)
		p.tracer.endAll()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var errs []error
		for _, s := range append(p.servers[:len(p.servers):len(p.servers)], p.admin) {
			if e := s.Shutdown(ctx); e != nil {
				errs = append(errs, e, s.Close())
			}
		}
		err = errors.Join(errs...)
		close(p.done)
	})
	return err
}

// dataPlane is the handler of one listener: route, limit, forward, trace.
func (p *Proxy) dataPlane(port int, l Listener) http.Handler {
	proxies := make([]*httputil.ReverseProxy, len(l.Routes))
	for i, rt := range l.Routes {
		u := &url.URL{Scheme: "http", Host: rt.Backend}
		// The client's Host header goes on; bodies pass chunk by chunk.
		proxies[i] = &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host
		}, FlushInterval: -1}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The request body is forwarded while the response streams back:
		// without full duplex, the server closes the body once the response
		// has begun, and the transport's last read of it (for its EOF) then
		// fails, which closes the backend connection mid-stream.
		_ = http.NewResponseController(w).EnableFullDuplex()
		begin := time.Now()
		t := p.tracer.take(begin)
		t.emit(nil, "requestStarted", nil)
		if t != nil {
			t.emit(nil, "requestSnapshot", map[string]any{"stage": "initial request", "requestState": requestState(r, begin)})
		}
		cw := &capture{ResponseWriter: w, t: t}
		defer t.emit(nil, "requestFinished", nil)
		var evaluated []string
		idx := -1
		for i, rt := range l.Routes {
			evaluated = append(evaluated, routeID(port, l, rt))
			if strings.HasPrefix(r.URL.Path, rt.PathPrefix) {
				idx = i
				break
			}
		}
		if idx < 0 {
			t.emit(nil, "routeSelection", map[string]any{"selectedRoute": nil, "evaluatedRoutes": evaluated})
			http.Error(cw, "no route matches", http.StatusNotFound)
			return
		}
		rt := &l.Routes[idx]
		t.emit(nil, "routeSelection", map[string]any{"selectedRoute": routeID(port, l, *rt), "evaluatedRoutes": evaluated})
		t.emit(nil, "policySelection", map[string]any{"effectivePolicy": effectivePolicy(*rt)})
		if refused := p.limits.admit(rt, time.Now()); refused != nil {
			refused.writeHeaders(cw.Header(), time.Now())
			cw.Header().Set("Content-Type", "application/octet-stream")
			cw.WriteHeader(http.StatusTooManyRequests)
			_, _ = cw.Write([]byte("rate limit exceeded"))
			return
		}
		t.emit(nil, "backendCallStart", map[string]any{"target": rt.Backend})
		callStart := t.now()
		rp := *proxies[idx]
		rp.ModifyResponse = func(resp *http.Response) error {
			t.emit(&callStart, "backendCallResult", map[string]any{"status": resp.StatusCode, "error": nil})
			if hasTokenLimit(*rt) {
				resp.Body = newUsageBody(resp.Body, resp.Header.Get("Content-Type"), resp.ContentLength, func(n uint64) { p.limits.charge(rt, n, time.Now()) })
			}
			return nil
		}
		rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
			t.emit(&callStart, "backendCallResult", map[string]any{"status": nil, "error": err.Error()})
			http.Error(w, "bad gateway", http.StatusBadGateway)
		}
		rp.ServeHTTP(cw, r)
	})
}

// routeID names a route by bind, listener and route (spec 2.1: standalone,
// "a path that includes the bind, listener and route name").
func routeID(port int, l Listener, rt Route) string {
	return "bind/" + strconv.Itoa(port) + "/listener/" + l.Name + "/route/" + rt.Name
}

// effectivePolicy has every key of spec 2.1, null but for the route's limits.
func effectivePolicy(rt Route) map[string]any {
	p := map[string]any{}
	for _, k := range []string{"localRateLimit", "remoteRateLimit", "authorization", "jwt", "oidc", "basicAuth", "apiKey",
		"extAuthz", "extProc", "transformation", "csrf", "directResponse", "requestHeaderModifier", "responseHeaderModifier",
		"requestRedirect", "urlRewrite", "cors"} {
		p[k] = nil
	}
	if len(rt.Limits) > 0 {
		var ls []any
		for _, l := range rt.Limits {
			e := map[string]any{"unit": unitName(l.Unit)}
			if l.Tokens {
				e["tokens"] = l.Amount
			} else {
				e["requests"], e["burst"] = l.Amount, l.Burst
			}
			ls = append(ls, e)
		}
		p["localRateLimit"] = ls
	}
	return p
}

func unitName(d time.Duration) string {
	switch d {
	case time.Second:
		return "Seconds"
	case time.Minute:
		return "Minutes"
	case time.Hour:
		return "Hours"
	}
	return d.String()
}

// capture is the client's response writer: the final response snapshot is
// taken when the status goes out.
type capture struct {
	http.ResponseWriter
	t     *trace
	wrote bool
}

func (c *capture) WriteHeader(code int) {
	if !c.wrote && code >= 200 { // a 1xx goes on; the final status follows
		c.wrote = true
		c.t.emit(nil, "responseSnapshot", map[string]any{"stage": "final response",
			"requestState": map[string]any{"response": map[string]any{"code": code, "headers": flat(c.Header())}}})
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *capture) Write(b []byte) (int, error) {
	if !c.wrote {
		c.WriteHeader(http.StatusOK)
	}
	return c.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController (and ReverseProxy's flushes) reach
// the server's writer.
func (c *capture) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// requestState is a request snapshot's state (spec 2.1).
func requestState(r *http.Request, begin time.Time) map[string]any {
	host, port := splitAddr(r.RemoteAddr)
	return map[string]any{
		"request": map[string]any{
			"method": r.Method, "uri": "http://" + r.Host + r.URL.RequestURI(), "path": r.URL.Path,
			"pathAndQuery": r.URL.RequestURI(), "host": r.Host, "scheme": "http", "version": r.Proto,
			"headers": flat(r.Header), "startTime": begin.UTC().Format(time.RFC3339Nano),
		},
		"source": map[string]any{"address": host, "port": port, "rawAddress": host, "rawPort": port},
	}
}

func splitAddr(a string) (string, int) {
	h, p, err := net.SplitHostPort(a)
	if err != nil {
		return a, 0
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

// flat renders headers as lower-case name to value, repeated values joined.
func flat(h http.Header) map[string]any {
	out := map[string]any{}
	for k, v := range h {
		out[strings.ToLower(k)] = strings.Join(v, ", ")
	}
	return out
}
