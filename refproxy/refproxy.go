// Package refproxy is the embeddable reference proxy: the data plane of a
// standalone config plus its admin server. The refproxy binary and the
// conformance suite's in-process target both use it:
//
//	p, err := refproxy.New(cfg, refproxy.WithAdminAddr("127.0.0.1:0"))
//	err = p.Start(ctx)
//	... p.AdminAddr(), p.BindAddrs() ...
//	err = p.Shutdown(ctx)
package refproxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/redact"
	"github.com/gwdiag/gwdiag/refproxy/config"
	"github.com/gwdiag/gwdiag/refproxy/internal/admin"
	"github.com/gwdiag/gwdiag/refproxy/internal/logfilter"
	"github.com/gwdiag/gwdiag/refproxy/internal/proxy"
	"github.com/gwdiag/gwdiag/refproxy/internal/tracing"
)

// Option changes how a Proxy runs.
type Option func(*options)

type options struct {
	adminAddr       string
	allowRemote     bool
	bindHost        string
	logOut          io.Writer
	logFilter       string
	configFile      string
	watch           bool
	pollEvery       time.Duration
	env             map[string]any
	envSet          bool
	timeouts        proxy.Timeouts
	inClear         bool
	skipUnevaluated bool
	rlsDial         []grpc.DialOption
	otlpEvents      func([]trace.Event) []trace.Event
	// listen opens the admin listener (net.Listen; tests listen on
	// loopback for an address beyond it).
	listen func(network, addr string) (net.Listener, error)
}

// WithTraceCredentialsInClear shows credentials in traces when clear is
// set: the values of the headers refproxy redacts by default
// (redact.Defaults: authorization, cookie, x-api-key, ...), of those the
// config's auth policies read, and the API keys it sends AI backends.
// config.sensitiveHeaders stay redacted. The admin server streams every
// traced request to whoever reads it, so the proxy logs a warning at
// start saying what it shows. For a proxy whose traces only its operator
// reads, debugging authentication.
func WithTraceCredentialsInClear(clear bool) Option {
	return func(o *options) { o.inClear = clear }
}

// WithUnevaluatedDescriptorsSkipped makes a global limit's descriptor
// that cannot be evaluated for a request skipped whatever the failure
// mode, as the reference does (its issue 3523: a client escapes a keyed
// limit by leaving out its key). By default refproxy lets the failure
// mode decide. For comparing with the reference, and for the suite's
// fault catalogue.
func WithUnevaluatedDescriptorsSkipped(skip bool) Option {
	return func(o *options) { o.skipUnevaluated = skip }
}

// WithRateLimitServiceDialOptions adds gRPC dial options to every
// connection to a rate-limit service (remoteRateLimit): interceptors that
// observe or change the calls, for telemetry or tests.
func WithRateLimitServiceDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.rlsDial = append(o.rlsDial, opts...) }
}

// WithOTLPEvents rewrites the events a sampled request's spans are made
// from (config.tracing), in the exporter's worker: the suite's fault
// catalogue makes spans that disagree with the trace with it.
func WithOTLPEvents(f func([]trace.Event) []trace.Event) Option {
	return func(o *options) { o.otlpEvents = f }
}

// WithTimeouts sets the client-side timeouts of every listener; zero fields
// keep the defaults (proxy.DefaultTimeouts: head 10s, body 5m, idle 5m).
func WithTimeouts(t proxy.Timeouts) Option { return func(o *options) { o.timeouts = t } }

// WithAdminAddr overrides config.adminAddr ("127.0.0.1:0" picks a free port).
func WithAdminAddr(addr string) Option { return func(o *options) { o.adminAddr = addr } }

// WithAdminAllowRemote allows a non-loopback admin address. The admin server
// has no authentication, so it is refused by default.
func WithAdminAllowRemote(allow bool) Option { return func(o *options) { o.allowRemote = allow } }

// WithBindHost sets the address binds listen on (default 127.0.0.1; the
// refproxy binary uses 0.0.0.0).
func WithBindHost(host string) Option { return func(o *options) { o.bindHost = host } }

// WithLogOutput sends logs (text format) to w instead of stderr.
func WithLogOutput(w io.Writer) Option { return func(o *options) { o.logOut = w } }

// WithLogFilter sets the initial log filter (default "info"), in the syntax
// /logging accepts.
func WithLogFilter(f string) Option { return func(o *options) { o.logFilter = f } }

// WithConfigFile names the file cfg came from, so that ReloadFile can
// re-read it (SIGHUP); with watch, the proxy also polls it once a second and
// reloads when its content changes.
func WithConfigFile(path string, watch bool) Option {
	return func(o *options) { o.configFile, o.watch = path, watch }
}

// WithEnv sets the cluster identity shown as `env` in trace snapshots. By
// default it comes from POD_NAME, POD_NAMESPACE and GATEWAY_NAME when set.
// All empty means standalone: no `env` block, whatever the environment says.
func WithEnv(podName, namespace, gateway string) Option {
	return func(o *options) {
		o.env = nil
		if podName != "" || namespace != "" || gateway != "" {
			o.env = map[string]any{"podName": podName, "namespace": namespace, "gateway": gateway}
		}
		o.envSet = true
	}
}

// Proxy is one running reference proxy.
type Proxy struct {
	opts   options
	cfg    *config.Config
	dp     *proxy.Dataplane
	reg    *tracing.Registry
	logCtl *logfilter.Control
	log    *slog.Logger

	mu          sync.Mutex
	started     bool
	adminLn     net.Listener
	adminSrv    *http.Server
	adminCancel context.CancelFunc
	adminDone   chan struct{}
	fileSum     [32]byte
	// rejected is the last reload's refusal, nil once a config is applied.
	rejected *admin.Rejection
	// ignoredLogged are the settings already logged as ignored.
	ignoredLogged map[string]bool

	done         chan struct{}
	shutdownOnce sync.Once
	shutdownErr  error
	stopPoll     chan struct{}
}

// New checks cfg and prepares a proxy; nothing listens until Start.
func New(cfg *config.Config, opts ...Option) (*Proxy, error) {
	if cfg == nil {
		return nil, errors.New("refproxy: nil config")
	}
	o := options{logOut: os.Stderr, logFilter: "info", pollEvery: time.Second, listen: net.Listen}
	for _, opt := range opts {
		opt(&o)
	}
	if o.adminAddr == "" {
		o.adminAddr = cfg.AdminAddress()
	}
	if err := admin.CheckAddr(o.adminAddr, o.allowRemote); err != nil {
		return nil, err
	}
	if !o.envSet {
		pod, ns, gw := os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE"), os.Getenv("GATEWAY_NAME")
		if pod != "" || ns != "" || gw != "" {
			o.env = map[string]any{"podName": pod, "namespace": ns, "gateway": gw}
		}
	}
	flt, err := logfilter.Parse(o.logFilter)
	if err != nil {
		return nil, fmt.Errorf("log filter: %w", err)
	}
	ctl := logfilter.NewControl(flt)
	logger := slog.New(ctl.Handler(slog.NewTextHandler(o.logOut, &slog.HandlerOptions{Level: logfilter.LevelTrace})))
	reg := &tracing.Registry{}
	dp := proxy.New(proxy.Options{
		BindHost:                   o.bindHost,
		Logger:                     logger.With(logfilter.ModuleKey, "refproxy::proxy"),
		Registry:                   reg,
		Env:                        o.env,
		Timeouts:                   o.timeouts,
		TraceCredentialsInClear:    o.inClear,
		SkipUnevaluatedDescriptors: o.skipUnevaluated,
		RateLimitDialOptions:       o.rlsDial,
		OTLPEvents:                 o.otlpEvents,
	})
	if err := dp.Validate(cfg); err != nil {
		return nil, err
	}
	return &Proxy{
		opts: o, cfg: cfg, dp: dp, reg: reg, logCtl: ctl,
		log:      logger.With(logfilter.ModuleKey, "refproxy"),
		done:     make(chan struct{}),
		stopPoll: make(chan struct{}),
	}, nil
}

// Start opens every bind and the admin server and returns once they accept
// connections. ctx bounds the start only: the proxy runs until Shutdown or
// /quitquitquit, so that a caller's short-lived context cannot stop it.
func (p *Proxy) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return errors.New("refproxy: already started")
	}
	p.started = true
	ln, err := p.opts.listen("tcp", p.opts.adminAddr)
	if err != nil {
		return fmt.Errorf("admin server: %w", err)
	}
	if err := p.dp.Apply(p.cfg); err != nil {
		ln.Close()
		return err
	}
	actx, cancel := context.WithCancel(context.Background())
	p.adminLn, p.adminCancel, p.adminDone = ln, cancel, make(chan struct{})
	// Said before the admin server serves: a client that reaches it first
	// may set a log level ("POST /logging?level=warn") that would filter
	// out the start line and warnings, as seen under load (the process
	// target's output then held nothing at all).
	p.log.Info("refproxy started", "admin", ln.Addr().String(), "binds", p.dp.Addrs())
	if !admin.Loopback(p.opts.adminAddr) {
		creds := "credentials redacted"
		if p.opts.inClear {
			creds = "credentials in clear"
		}
		p.log.Warn("the admin server listens beyond loopback, without authentication: whoever reaches "+
			"this address reads every request's trace (/debug/trace: headers, routes, policies; "+creds+
			"), the config (/config_dump), profiles, and can change the log level and stop the proxy",
			"addr", p.opts.adminAddr, "listening", ln.Addr().String())
	}
	if p.opts.inClear {
		p.log.Warn("traces show credentials in clear (--trace-credentials-in-clear): /debug/trace streams, "+
			"to whoever reads the admin server, the values of the credential headers refproxy otherwise redacts, "+
			"of the headers auth policies read, and the API keys it sends AI backends; "+
			"only config.sensitiveHeaders stay redacted",
			"shown", shownInClear(p.cfg), "redacted", sensitiveHeaders(p.cfg))
	}
	p.logIgnored(p.cfg)
	p.adminSrv = &http.Server{
		Handler: admin.Handler(admin.Backend{
			Dump:     func() any { return p.dp.Dump() },
			Status:   p.configStatus,
			Registry: p.reg,
			Logging:  p.logCtl,
			OTLP:     func() any { return p.dp.OTLPStatus() },
			Quit: func() {
				go func() {
					sctx, c := context.WithTimeout(context.Background(), 30*time.Second)
					defer c()
					_ = p.Shutdown(sctx)
				}()
			},
		}),
		// Trace streams end when the proxy stops, not only when clients leave.
		BaseContext:       func(net.Listener) context.Context { return actx },
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
	admin.Go(pprof.Labels("component", "admin"), func() {
		defer close(p.adminDone)
		if err := p.adminSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.Error("admin server stopped", "err", err)
		}
	})
	if p.opts.configFile != "" && p.opts.watch {
		// The file is compared with the bytes the running config came
		// from: reading it again here would take for applied an edit
		// made between the caller's read and Start (a ConfigMap updated
		// as the pod starts), and never apply it.
		p.fileSum = p.cfg.SourceSum
		admin.Go(pprof.Labels("component", "config-watch"), p.poll)
	}
	return nil
}

// shownInClear names what traces show in clear with
// WithTraceCredentialsInClear: the default credential headers and those
// cfg's auth policies read (config.sensitiveHeaders excepted), and the
// API keys sent to AI backends.
func shownInClear(cfg *config.Config) []string {
	var out []string
	for _, h := range redact.Defaults {
		out = append(out, h.Name)
	}
	out = append(out, cfg.CredentialHeaders()...)
	out = slices.DeleteFunc(slices.Compact(slices.Sorted(slices.Values(out))), func(h string) bool {
		return slices.ContainsFunc(sensitiveHeaders(cfg), func(s string) bool { return strings.EqualFold(s, h) })
	})
	return append(out, "AI backends' API keys")
}

// sensitiveHeaders is cfg's config.sensitiveHeaders.
func sensitiveHeaders(cfg *config.Config) []string {
	if cfg.Config == nil {
		return nil
	}
	return cfg.Config.SensitiveHeaders
}

// logIgnored says once of each setting the config has that refproxy
// accepts and does not act on. p.mu is held.
func (p *Proxy) logIgnored(cfg *config.Config) {
	for _, ig := range cfg.Ignored {
		if p.ignoredLogged[ig.Path] {
			continue
		}
		if p.ignoredLogged == nil {
			p.ignoredLogged = map[string]bool{}
		}
		p.ignoredLogged[ig.Path] = true
		p.log.Warn("config setting accepted and ignored", "setting", ig.Path, "why", ig.Why, "at", ig.Pos)
	}
}

// AdminAddr is the admin server's listening address ("" before Start).
func (p *Proxy) AdminAddr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.adminLn == nil {
		return ""
	}
	return p.adminLn.Addr().String()
}

// BindAddrs are the listening addresses of the binds, in config order.
func (p *Proxy) BindAddrs() []string { return p.dp.Addrs() }

// Config is the running config.
func (p *Proxy) Config() *config.Config {
	if c := p.dp.Config(); c != nil {
		return c
	}
	return p.cfg
}

// Reload applies cfg without dropping in-flight requests. On error the
// running config stays, and /config_dump says why (X-Config-Rejected). A
// config with no binds is never applied to a proxy that serves some: an
// empty file is what an editor or a ConfigMap update leaves between
// truncating and writing, not a wish to stop serving (/quitquitquit stops
// a proxy). The admin address is fixed at Start.
func (p *Proxy) Reload(cfg *config.Config) error {
	if cfg == nil {
		return errors.New("refproxy: nil config")
	}
	if len(cfg.Binds) == 0 && len(p.dp.Addrs()) > 0 {
		return p.reject(fmt.Errorf("%s: the config has no binds; a reload never removes every bind of a running proxy (keeping the running config)", sourceOf(cfg)))
	}
	if err := p.dp.Apply(cfg); err != nil {
		return p.reject(err)
	}
	p.mu.Lock()
	p.cfg, p.rejected = cfg, nil
	p.logIgnored(cfg)
	p.mu.Unlock()
	p.log.Info("config reloaded", "source", cfg.Source)
	return nil
}

// reject records and logs a refused reload, and returns err.
func (p *Proxy) reject(err error) error {
	p.log.Error("config rejected; keeping the running config", "err", err)
	p.mu.Lock()
	p.rejected = &admin.Rejection{At: time.Now(), Err: err}
	p.mu.Unlock()
	return err
}

// configStatus is what /config_dump tells of the config: where the running
// one came from, and the last refused reload.
func (p *Proxy) configStatus() admin.ConfigStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return admin.ConfigStatus{Source: sourceOf(p.Config()), Rejected: p.rejected}
}

func sourceOf(cfg *config.Config) string {
	if cfg.Source == "" {
		return "config"
	}
	return cfg.Source
}

// ReloadFile re-reads the config file given by WithConfigFile (what SIGHUP does).
func (p *Proxy) ReloadFile() error {
	if p.opts.configFile == "" {
		return errors.New("refproxy: no config file to reload")
	}
	data, err := os.ReadFile(p.opts.configFile)
	if err != nil {
		return p.reject(err)
	}
	p.mu.Lock()
	p.fileSum = sha256.Sum256(data)
	p.mu.Unlock()
	cfg, err := config.Parse(p.opts.configFile, data)
	if err != nil {
		return p.reject(err)
	}
	return p.Reload(cfg)
}

// poll reloads the config file when its content changes. Polling (once a
// second, by content hash) avoids a file-notification dependency and sees
// editors that replace the file.
func (p *Proxy) poll() {
	t := time.NewTicker(p.opts.pollEvery)
	defer t.Stop()
	for {
		select {
		case <-p.stopPoll:
			return
		case <-t.C:
		}
		data, err := os.ReadFile(p.opts.configFile)
		if err != nil {
			continue
		}
		sum := sha256.Sum256(data)
		p.mu.Lock()
		changed := !bytes.Equal(sum[:], p.fileSum[:])
		p.mu.Unlock()
		if changed {
			_ = p.ReloadFile()
		}
	}
}

// Shutdown stops accepting requests, lets in-flight ones finish (bounded by
// ctx), ends trace streams, closes the admin server and releases every port.
func (p *Proxy) Shutdown(ctx context.Context) error {
	p.shutdownOnce.Do(func() {
		close(p.stopPoll)
		err := p.dp.Shutdown(ctx)
		p.mu.Lock()
		srv, cancel, adone := p.adminSrv, p.adminCancel, p.adminDone
		p.mu.Unlock()
		if srv != nil {
			cancel()
			if e := srv.Shutdown(ctx); e != nil {
				srv.Close()
				err = errors.Join(err, e)
			}
			<-adone
		}
		p.shutdownErr = err
		p.log.Info("refproxy stopped")
		close(p.done)
	})
	<-p.done
	return p.shutdownErr
}

// OTLPStatus is the OpenTelemetry export's state (config.tracing): request
// span trees queued and dropped on a full queue, batches the collector did
// not take, and its last error; /debug/otlp shows it.
func (p *Proxy) OTLPStatus() proxy.OTLPStatus { return p.dp.OTLPStatus() }

// Done is closed once the proxy has shut down (Shutdown, ctx, /quitquitquit).
func (p *Proxy) Done() <-chan struct{} { return p.done }
