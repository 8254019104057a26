// Package proxy is the data plane of the reference proxy: one HTTP listener
// per bind, route matching, the reverse proxy to backends, local and global
// rate limiting, per-endpoint statistics and the trace events of each
// request.
//
// Files: dataplane.go (listeners, config apply, timeouts), serve.go (the
// request path, top-down), call.go (a forwarded request to its end),
// table.go (routes and their matching), request.go (what route matching
// and CEL read of a request), headers.go (header lookups in any case, and
// the forwarding header rules),
// snapshots.go (trace snapshots), upstream.go (backend connections and
// tunnels), bodies.go (read-ahead and streamed bodies), clientgone.go
// (noticing a client that left), stats.go (endpoint stats, /config_dump),
// global.go (global limits through a rate-limit service).
// It imports refproxy/config, ratelimit (and ratelimit/remote), llm and
// trace, never the admin server or the suite.
package proxy

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cel.dev/cel-go/cel"
	"github.com/valyala/fasthttp"
	"google.golang.org/grpc"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/otlp"
	"github.com/gwdiag/gwdiag/golden/trace/redact"
	"github.com/gwdiag/gwdiag/refproxy/celexpr"
	"github.com/gwdiag/gwdiag/refproxy/config"
	"github.com/gwdiag/gwdiag/refproxy/internal/admin"
	"github.com/gwdiag/gwdiag/refproxy/internal/tracing"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit/remote"
)

// Options configure a Dataplane.
type Options struct {
	// BindHost is the address listeners bind on (default 127.0.0.1).
	BindHost string
	// Logger receives data-plane logs (default slog.Default()).
	Logger *slog.Logger
	// Registry holds trace watchers; nil means a new one.
	Registry *tracing.Registry
	// Env is the cluster identity shown as `env` in trace snapshots; nil
	// when running standalone.
	Env map[string]any
	// MaxConnsPerHost bounds the connections to one backend (default 65536).
	MaxConnsPerHost int
	// Timeouts bound how long a client may take; zero fields take the
	// defaults of DefaultTimeouts.
	Timeouts Timeouts
	// MaxRateLimitKeys bounds the live keys of each local limit entry
	// with a key (default ratelimit.DefaultMaxKeys); past it the least
	// recently used key is forgotten.
	MaxRateLimitKeys int
	// TraceCredentialsInClear shows credentials in traces: the values of
	// the default credential headers (redact.Defaults) and of those the
	// config's auth policies read, and the API keys the proxy sends AI
	// backends. Only config.sensitiveHeaders stay redacted. For a proxy
	// whose traces nobody but its operator reads, loudly: refproxy logs
	// a warning at start.
	TraceCredentialsInClear bool
	// SkipUnevaluatedDescriptors skips a global limit's descriptor that
	// cannot be evaluated for a request under failClosed too, as the
	// reference does (remote.Policy.SkipUnevaluated).
	SkipUnevaluatedDescriptors bool
	// RateLimitDialOptions are added to the gRPC dial options of every
	// rate-limit service connection (interceptors, say).
	RateLimitDialOptions []grpc.DialOption
	// OTLPEvents, when set, rewrites the events a sampled request's spans
	// are made from (config.tracing; tests).
	OTLPEvents func([]trace.Event) []trace.Event
	// RedactKey keys the fingerprints of redacted values; empty: random
	// per data plane (tests set it to name fingerprints).
	RedactKey []byte
}

// Timeouts bound the client side of every listener.
type Timeouts struct {
	// Header is how long a request's head (request line and headers) may
	// take: from the connection's opening for its first request, from the
	// first byte for later ones. A client that sends nothing, or half its
	// headers, is cut off after it (slowloris).
	Header time.Duration
	// Body is how long a request body may take to arrive once the head has.
	Body time.Duration
	// Idle is how long a keep-alive connection may wait for its next request.
	Idle time.Duration
}

// DefaultTimeouts are the timeouts of a zero Options.Timeouts.
var DefaultTimeouts = Timeouts{Header: 10 * time.Second, Body: 5 * time.Minute, Idle: 5 * time.Minute}

// withDefaults fills the zero fields from DefaultTimeouts.
func (t Timeouts) withDefaults() Timeouts {
	if t.Header <= 0 {
		t.Header = DefaultTimeouts.Header
	}
	if t.Body <= 0 {
		t.Body = DefaultTimeouts.Body
	}
	if t.Idle <= 0 {
		t.Idle = DefaultTimeouts.Idle
	}
	return t
}

// Dataplane serves every bind of the current config.
type Dataplane struct {
	opts   Options
	log    *slog.Logger
	reg    *tracing.Registry
	dialer *net.Dialer

	table atomic.Pointer[table]

	applyMu  sync.Mutex
	servers  map[int]*bindServer
	buckets  map[string]limit
	backends map[string]*backend
	stats    map[string]*endpointStats
	// reuse* hold the previous config's state during a build, so limits and
	// backends configured again keep their counters and connection pools.
	reuseBuckets  map[string]limit
	reuseBackends map[string]*backend
	// rlsConns are the connections to global rate-limit services, by
	// address; rlsUsed the addresses the config being built names.
	rlsConns map[string]*grpc.ClientConn
	rlsUsed  map[string]bool
	closed   bool
	// exporter is the OpenTelemetry export's (otel.go), nil without one.
	exporter *otlp.Exporter
	// tracingOff skips tracing entirely; tests use it as the "compiled out"
	// baseline that the no-watcher path must match.
	tracingOff bool
	// redactor is the process's: one fingerprint key for every config
	// (a credential keeps its fingerprint across reloads); each table
	// adds its config's headers to it (tableRedaction). redaction is
	// its own, for requests that come before a config.
	redactor  *redact.Redactor
	redaction *tracing.Redaction
	// secretNames are the default credential headers, whatever traces
	// show, under the same key: the values the config gives them are
	// secrets of the config (tableRedaction).
	secretNames *redact.Redactor
	draining    sync.WaitGroup
}

type bindServer struct {
	ln   net.Listener
	srv  *fasthttp.Server
	done chan struct{}
}

// New returns a Dataplane with no binds; Apply gives it a config.
func New(opts Options) *Dataplane {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Registry == nil {
		opts.Registry = &tracing.Registry{}
	}
	if opts.BindHost == "" {
		opts.BindHost = "127.0.0.1"
	}
	if opts.MaxConnsPerHost == 0 {
		opts.MaxConnsPerHost = 1 << 16
	}
	opts.Timeouts = opts.Timeouts.withDefaults()
	key := opts.RedactKey
	if len(key) == 0 {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			panic("refproxy: no random key: " + err.Error()) // crypto/rand does not fail on Linux
		}
	}
	red := redact.New(redact.Options{Key: key, NoDefaults: opts.TraceCredentialsInClear, EscapeHTML: true})
	return &Dataplane{
		redactor:    red,
		secretNames: redact.New(redact.Options{Key: key, EscapeHTML: true}),
		redaction:   tracing.NewRedaction(red, opts.TraceCredentialsInClear),
		opts:        opts,
		log:         opts.Logger,
		reg:         opts.Registry,
		dialer:      &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second},
		servers:     map[int]*bindServer{},
		buckets:     map[string]limit{},
		backends:    map[string]*backend{},
		stats:       map[string]*endpointStats{},
		rlsConns:    map[string]*grpc.ClientConn{},
	}
}

// rlsConn returns the connection to a rate-limit service, shared by every
// policy that names the address and kept across reloads. It starts
// connecting at once, in the background: a service not there yet is no
// error, and the first request's check, bounded by the policy's timeout
// (1 s by default), does not also pay for the connection (on a loaded
// machine that cost a fail-closed route its first request, a 500).
func (dp *Dataplane) rlsConn(addr string) (grpc.ClientConnInterface, error) {
	if dp.rlsUsed != nil {
		dp.rlsUsed[addr] = true
	}
	if c, ok := dp.rlsConns[addr]; ok {
		return c, nil
	}
	c, err := remote.Dial(addr, dp.opts.RateLimitDialOptions...)
	if err != nil {
		return nil, err
	}
	c.Connect()
	dp.rlsConns[addr] = c
	return c, nil
}

// closeRLS closes the connections to services not in keep (all when keep
// is nil).
func (dp *Dataplane) closeRLS(keep map[string]bool) {
	for addr, c := range dp.rlsConns {
		if !keep[addr] {
			c.Close()
			delete(dp.rlsConns, addr)
		}
	}
}

// tableRedaction is the redaction of cfg's traces: the data plane's
// (the defaults, unless shown in clear), and cfg's config.sensitiveHeaders
// (headers the reference's schema says are redacted in addition to its
// own) and the headers its auth policies read a credential from (with
// the credentials shown in clear, those are shown too). secrets are the
// same headers, the defaults always: the credential headers whose values
// in the config are secrets of the config, never shown.
func (dp *Dataplane) tableRedaction(cfg *config.Config) (_ *tracing.Redaction, secrets *redact.Redactor) {
	var extra []string
	if cfg.Config != nil {
		extra = append(extra, cfg.Config.SensitiveHeaders...)
	}
	cred := cfg.CredentialHeaders()
	secrets = dp.secretNames.With(append(extra, cred...)...)
	if !dp.opts.TraceCredentialsInClear {
		extra = append(extra, cred...)
	}
	red := dp.redactor.With(extra...)
	if !dp.opts.TraceCredentialsInClear {
		// Beside redact.QueryDefaults (none in clear): the query
		// parameters the config's auth policies read (redactQuery).
		red = red.WithQuery(cfg.CredentialQueryParams()...)
	}
	return tracing.NewRedaction(red, dp.opts.TraceCredentialsInClear), secrets
}

// redactionOf is the redaction of a request served with table t (nil
// before the first config).
func (dp *Dataplane) redactionOf(t *table) *tracing.Redaction {
	if t == nil {
		return dp.redaction
	}
	return t.redaction
}

// Registry returns the trace watcher registry.
func (dp *Dataplane) Registry() *tracing.Registry { return dp.reg }

// Validate compiles cfg without applying it.
func (dp *Dataplane) Validate(cfg *config.Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	scratch := New(dp.opts)
	defer scratch.closeRLS(nil)
	_, err := scratch.build(cfg)
	return err
}

// Apply makes cfg the running config: it opens listeners for new binds,
// swaps the routing table atomically (requests in flight finish on the old
// one), and closes listeners of binds that are gone, letting their requests
// finish. On error nothing changes.
func (dp *Dataplane) Apply(cfg *config.Config) error {
	dp.applyMu.Lock()
	defer dp.applyMu.Unlock()
	if dp.closed {
		return errors.New("proxy is shut down")
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	oldBuckets, oldBackends := dp.buckets, dp.backends
	dp.buckets, dp.backends = map[string]limit{}, map[string]*backend{}
	restore := func() { dp.buckets, dp.backends = oldBuckets, oldBackends }
	dp.reuseBuckets, dp.reuseBackends = oldBuckets, oldBackends
	dp.rlsUsed = map[string]bool{}
	t, err := dp.build(cfg)
	dp.reuseBuckets, dp.reuseBackends = nil, nil
	used := dp.rlsUsed
	dp.rlsUsed = nil
	var replaced *otlp.Exporter
	if err == nil {
		t.otel, replaced, err = dp.otelFor(cfg)
	}
	if err != nil {
		restore()
		return err
	}
	// Open new listeners first, so a bind that cannot listen leaves the old
	// config fully in place.
	opened := map[int]*bindServer{}
	for _, bt := range t.binds {
		if _, ok := dp.servers[bt.key]; ok {
			continue
		}
		addr := net.JoinHostPort(dp.opts.BindHost, strconv.Itoa(int(bt.port)))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, s := range opened {
				s.ln.Close()
			}
			if t.otel != nil && t.otel.exp != dp.exporter {
				dp.stopExporter(t.otel.exp)
			}
			restore()
			return fmt.Errorf("bind %s: %w", bt.gateway, err)
		}
		opened[bt.key] = &bindServer{ln: ln, done: make(chan struct{})}
	}
	dp.table.Store(t)
	if replaced != nil {
		dp.stopExporter(replaced)
	}
	dp.exporter = nil
	if t.otel != nil {
		dp.exporter = t.otel.exp
	}
	dp.closeRLS(used)
	for key, b := range oldBackends {
		if _, kept := dp.backends[key]; !kept {
			b.client.CloseIdleConnections()
		}
	}
	for key, s := range opened {
		dp.servers[key] = s
		dp.serve(key, s)
	}
	keep := map[int]bool{}
	for _, bt := range t.binds {
		keep[bt.key] = true
	}
	for key, s := range dp.servers {
		if !keep[key] {
			delete(dp.servers, key)
			dp.draining.Add(1)
			go func() {
				defer dp.draining.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_ = s.srv.ShutdownWithContext(ctx)
				s.ln.Close() // in case Serve had not registered it yet
			}()
		}
	}
	return nil
}

// maxBufferedBody is the largest request body read before the handler
// runs; larger bodies stream through.
const maxBufferedBody = 64 << 10

// requestError answers a request the server could not read: 408 when its
// head or body did not arrive in time (fasthttp wraps such timeouts so that
// its default handler says 400), 431 for a head larger than the buffer,
// 413 for a body over the limit, else 400.
func (h *bindHandler) requestError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.As(err, &small):
		ctx.Error("request header too large\n", fasthttp.StatusRequestHeaderFieldsTooLarge)
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, os.ErrDeadlineExceeded):
		ctx.Error("request not received in time\n", fasthttp.StatusRequestTimeout)
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		ctx.Error("request body too large\n", fasthttp.StatusRequestEntityTooLarge)
	default:
		ctx.Error("malformed request\n", fasthttp.StatusBadRequest)
	}
	ctx.SetConnectionClose()
}

// headerReceived gives a request's body its deadline once its head is in.
func (h *bindHandler) headerReceived(*fasthttp.RequestHeader) fasthttp.RequestConfig {
	return fasthttp.RequestConfig{ReadTimeout: h.dp.opts.Timeouts.Body}
}

func (dp *Dataplane) serve(key int, s *bindServer) {
	h := &bindHandler{dp: dp, key: key}
	s.srv = &fasthttp.Server{
		Handler:                       h.serve,
		Name:                          "",
		NoDefaultServerHeader:         true,
		NoDefaultContentType:          true,
		StreamRequestBody:             true,
		MaxRequestBodySize:            maxBufferedBody,
		DisablePreParseMultipartForm:  true,
		DisableHeaderNamesNormalizing: true, // see peekFold
		ReadBufferSize:                connBufferSize,
		WriteBufferSize:               connBufferSize,
		// ReadTimeout bounds the head; once it is in, HeaderReceived gives
		// the body its own deadline.
		ReadTimeout:     dp.opts.Timeouts.Header,
		HeaderReceived:  h.headerReceived,
		ErrorHandler:    h.requestError,
		IdleTimeout:     dp.opts.Timeouts.Idle,
		CloseOnShutdown: true,
		// fasthttp's errors quote up to 400 bytes of a request it could
		// not read (its credentials among them): not in refproxy's logs.
		SecureErrorLogMessage: true,
		Logger:                slog.NewLogLogger(dp.log.Handler(), slog.LevelDebug),
	}
	admin.Go(pprof.Labels("component", "dataplane", "listener", s.ln.Addr().String()), func() {
		defer close(s.done)
		if err := s.srv.Serve(s.ln); err != nil {
			dp.log.Error("listener stopped", "addr", s.ln.Addr().String(), "err", err)
		}
	})
}

// Addrs returns the listening address of each bind, in config order.
func (dp *Dataplane) Addrs() []string {
	dp.applyMu.Lock()
	defer dp.applyMu.Unlock()
	t := dp.table.Load()
	if t == nil {
		return nil
	}
	out := make([]string, 0, len(t.binds))
	for _, bt := range t.binds {
		if s, ok := dp.servers[bt.key]; ok {
			out = append(out, s.ln.Addr().String())
		}
	}
	return out
}

// Config returns the running config.
func (dp *Dataplane) Config() *config.Config {
	if t := dp.table.Load(); t != nil {
		return t.cfg
	}
	return nil
}

// Shutdown stops accepting connections and waits for in-flight requests
// (bounded by ctx), then closes idle backend connections.
func (dp *Dataplane) Shutdown(ctx context.Context) error {
	dp.applyMu.Lock()
	dp.closed = true
	servers := dp.servers
	dp.servers = map[int]*bindServer{}
	dp.applyMu.Unlock()
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, s := range servers {
		wg.Go(func() {
			err := s.srv.ShutdownWithContext(ctx)
			// Shutdown closes only the listeners Serve has registered; one
			// whose Serve has yet to start would keep it waiting.
			s.ln.Close()
			<-s.done
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	dp.draining.Wait()
	dp.applyMu.Lock()
	for _, b := range dp.backends {
		b.client.CloseIdleConnections()
	}
	dp.closeRLS(nil)
	exp := dp.exporter
	dp.exporter = nil
	dp.applyMu.Unlock()
	if exp != nil {
		// What the last requests exported goes, within ctx.
		errs = append(errs, exp.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// limit is the state of one local limit entry: a bucket, or for an entry
// with a key, its buckets per key.
type limit struct {
	bucket *ratelimit.Bucket
	keyed  *ratelimit.Keyed
}

// limit returns the state of one local limit entry, keeping it across
// reloads when the same limit (the same key expression too) is
// configured again.
func (dp *Dataplane) limit(key string, rl config.RateLimit) (limit, error) {
	spec := rl.Spec()
	key += "|" + fmt.Sprint(spec) + "|" + rl.Key
	if l, ok := dp.buckets[key]; ok {
		return l, nil
	}
	l, ok := dp.reuseBuckets[key]
	if !ok {
		if rl.Key == "" {
			l.bucket = ratelimit.NewBucket(spec)
		} else {
			prog, err := celexpr.CompileRequest(rl.Key, celexpr.Scalar)
			if err != nil {
				return limit{}, fmt.Errorf("localRateLimit key %q: %w", rl.Key, err)
			}
			l.keyed = ratelimit.NewKeyed(spec, keyFunc(prog), dp.opts.MaxRateLimitKeys)
		}
	}
	dp.buckets[key] = l
	return l, nil
}

// keyFunc evaluates a key expression: a scalar result is the key, an
// error or another result none.
func keyFunc(p cel.Program) ratelimit.KeyFunc {
	return func(act any) (string, bool) {
		if a, _ := act.(*celActivation); a == nil {
			return "", false // no activation: none made, or a nil one
		}
		out, _, err := p.Eval(act)
		if err != nil {
			return "", false
		}
		return celexpr.String(out.Value())
	}
}

// backend returns the reverse proxy for one configured backend; one per
// name and address, shared by routes and kept across reloads.
func (dp *Dataplane) backend(bk config.Backend) *backend {
	key := bk.Name() + "|" + bk.Address()
	if ai := bk.AI; ai != nil {
		// The same provider configured differently is another backend.
		key += "|" + strings.Join([]string{aiModel(ai), ai.PathOverride, ai.PathPrefix, string(ai.APIKey), strconv.FormatBool(ai.TLS)}, "|")
	}
	w := uint64(1)
	if bk.Weight != nil {
		w = uint64(*bk.Weight)
	}
	var auth *backendAuthPolicy
	if bk.Policies != nil {
		auth = newBackendAuth(bk.Policies.BackendAuth)
	}
	if b, ok := dp.backends[key]; ok {
		c := *b
		c.weight, c.service, c.auth = w, bk.ServiceOf, auth
		return &c
	}
	b, ok := dp.reuseBackends[key]
	if !ok {
		b = dp.newBackend(bk)
	}
	dp.backends[key] = b
	c := *b
	c.weight, c.service, c.auth = w, bk.ServiceOf, auth
	return &c
}

// aiModel is the model an AI backend sends instead of the request's.
func aiModel(ai *config.AIBackend) string {
	if o := ai.Provider.OpenAI; o != nil && o.Model != nil {
		return *o.Model
	}
	return ""
}

func (dp *Dataplane) newBackend(bk config.Backend) *backend {
	b := &backend{name: bk.Name(), addr: bk.Address(), traceType: "backend", ai: bk.AI != nil}
	if ai := bk.AI; ai != nil {
		b.traceType = "ai"
		// A provider without hostOverride is the provider's own HTTPS API.
		b.tls = ai.HostOverride == "" || ai.TLS
		b.model, b.pathOverride, b.pathPrefix, b.apiKey = aiModel(ai), ai.PathOverride, ai.PathPrefix, string(ai.APIKey)
	}
	skey := b.name + "|" + b.addr
	st, ok := dp.stats[skey]
	if !ok {
		st = &endpointStats{}
		dp.stats[skey] = st
	}
	b.stats = st
	b.client = dp.newClient(b.addr, b.tls)
	b.do = b.client.Do
	return b
}
