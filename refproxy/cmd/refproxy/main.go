// Command refproxy runs the reference proxy from a standalone config file:
//
//	refproxy -f config.yaml [--validate-only] [--admin-allow-remote] [--readiness-addr :15021] [--trace-credentials-in-clear]
//
// Traces redact credentials (docs/admin.md, "Redaction"):
// --trace-credentials-in-clear shows them, and says so in a warning.
//
// With --readiness-addr, GET /healthz/ready there answers 200 from the
// moment the proxy serves its config until shutdown begins (a kubelet's
// readiness probe; the admin server stays on loopback).
//
// The file may be in any style of the reference implementation (binds:,
// gateways: with routes:, llm:). A file that uses what refproxy does not
// implement is refused with every place that does (exit 2; --validate-only
// says the same without starting); an invalid one exits 1. Settings that
// change no traffic (config.tracing, ...) are accepted, and said to be
// ignored. config.logging sets the log filter and config.readinessAddr the
// readiness address, unless --log-level and --readiness-addr are given.
//
// ADMIN_ADDR overrides config.adminAddr. SIGHUP and edits of the file reload
// the config; SIGINT/SIGTERM and POST /quitquitquit shut down gracefully.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace/explain"
	"github.com/gwdiag/gwdiag/refproxy"
	"github.com/gwdiag/gwdiag/refproxy/config"
	"github.com/gwdiag/gwdiag/refproxy/internal/proxy"
)

func main() {
	if os.Getenv("GOGC") == "" {
		// The proxy's live heap is small and its garbage is per-request; a
		// larger GC target trades a little memory for much less GC work under
		// load. GOGC still overrides it.
		debug.SetGCPercent(400)
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("refproxy", flag.ContinueOnError)
	file := fs.String("f", "", "config file (YAML, the standalone format)")
	fs.StringVar(file, "file", "", "same as -f")
	validate := fs.Bool("validate-only", false, "check the config and exit")
	allowRemote := fs.Bool("admin-allow-remote", false, "allow a non-loopback admin address (the admin server has no authentication; refproxy warns at start)")
	inClear := fs.Bool("trace-credentials-in-clear", false, "show credentials in traces: the values of authorization, cookie, x-api-key and the other headers refproxy redacts by default, of those auth policies read, and the API keys sent to AI backends (config.sensitiveHeaders stay redacted; refproxy warns at start)")
	bindHost := fs.String("bind-host", "0.0.0.0", "address the binds listen on")
	logLevel := fs.String("log-level", "info", "log filter, e.g. info or warn,refproxy::proxy=debug")
	readyAddr := fs.String("readiness-addr", "", "serve GET /healthz/ready on this address while the proxy is up (e.g. :15021)")
	watch := fs.Bool("watch", true, "reload the config file when it changes (checked once a second); SIGHUP always reloads")
	var timeouts proxy.Timeouts
	fs.DurationVar(&timeouts.Header, "header-timeout", proxy.DefaultTimeouts.Header, "how long a client may take to send a request's head (slowloris guard); then 408")
	fs.DurationVar(&timeouts.Body, "body-timeout", proxy.DefaultTimeouts.Body, "how long a request body may take to arrive once its head has; then 408")
	fs.DurationVar(&timeouts.Idle, "idle-timeout", proxy.DefaultTimeouts.Idle, "how long a keep-alive client connection may wait for its next request")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *file == "" || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "refproxy: usage: refproxy -f config.yaml [--validate-only] [--admin-allow-remote] [--trace-credentials-in-clear]")
		return 2
	}
	cfg, err := config.Load(*file)
	if config.IsNotImplemented(err) {
		// Valid for the reference implementation; refproxy says every
		// place that uses what it does not implement, and refuses it.
		n := len(allErrors(err))
		fmt.Fprintf(os.Stderr, "refproxy: config refused: %d %s features refproxy does not implement:\n%v\n", n, explain.Plural(n, "place uses", "places use"), err)
		return 2
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "refproxy: invalid config: %v\n", err)
		return 1
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["log-level"] && cfg.LogFilter() != "" {
		*logLevel = cfg.LogFilter() // config.logging, unless the flag says otherwise
	}
	if !set["readiness-addr"] {
		*readyAddr = cfg.ReadinessAddress()
	}
	opts := []refproxy.Option{
		refproxy.WithAdminAllowRemote(*allowRemote),
		refproxy.WithBindHost(*bindHost),
		refproxy.WithLogFilter(*logLevel),
		refproxy.WithConfigFile(*file, *watch),
		refproxy.WithTimeouts(timeouts),
		refproxy.WithTraceCredentialsInClear(*inClear),
	}
	if a := os.Getenv("ADMIN_ADDR"); a != "" {
		opts = append(opts, refproxy.WithAdminAddr(a))
	}
	p, err := refproxy.New(cfg, opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "refproxy: invalid config: %v\n", err)
		return 1
	}
	if *validate {
		fmt.Printf("%s: valid\n", *file)
		for _, ig := range cfg.Ignored {
			fmt.Println(ig)
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// SIGHUP is caught before anything is served: a reload sent as soon as
	// the proxy answers must not find the default action (exit) in place.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	// The readiness address is bound before the proxy serves, and answered
	// once it does: a probe that connects in between waits for the answer,
	// and one that comes after the first proxied request finds it up.
	var readyLn net.Listener
	if *readyAddr != "" {
		if readyLn, err = net.Listen("tcp", *readyAddr); err != nil {
			fmt.Fprintf(os.Stderr, "refproxy: readiness: %v\n", err)
			return 1
		}
	}
	if err := p.Start(ctx); err != nil {
		if readyLn != nil {
			readyLn.Close()
		}
		fmt.Fprintf(os.Stderr, "refproxy: %v\n", err)
		return 1
	}
	stopReady := func() {}
	if readyLn != nil {
		stopReady = serveReadiness(readyLn)
		defer stopReady()
	}
	// Loading the first config compiled the config schema (about 12 MB
	// allocated, most of it garbage at once): given back to the system now
	// rather than held until the scavenger gets to it.
	debug.FreeOSMemory()
	for {
		select {
		case <-hup:
			_ = p.ReloadFile() // errors are logged; the running config stays
		case <-p.Done():
			return 0
		case <-ctx.Done():
			stopReady() // out of the endpoints before the drain
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := p.Shutdown(sctx)
			cancel()
			if err != nil {
				fmt.Fprintf(os.Stderr, "refproxy: shutdown: %v\n", err)
				return 1
			}
			return 0
		}
	}
}

// serveReadiness answers GET /healthz/ready with 200 on ln until stop.
func serveReadiness(ln net.Listener) (stop func()) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz/ready", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ready\n"))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }
}

// allErrors lists the errors of a config error.
func allErrors(err error) []*config.Error {
	var es config.Errors
	if errors.As(err, &es) {
		return es
	}
	var e *config.Error
	if errors.As(err, &e) {
		return []*config.Error{e}
	}
	return nil
}
