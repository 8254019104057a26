// Package tracecmd provides `gwdiag trace`: watch or inject a request and show
// its trace from a proxy's /debug/trace stream, as JSON Lines (--raw) or in
// the interactive viewer, or replay a saved trace (--file); `gwdiag trace
// diff` to compare two saved traces, `trace explain` to say why a request
// ended as it did, and `trace redact` to redact a saved capture. What they
// write is redacted (cli/internal/scrub).
package tracecmd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/term"
	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/gwdiag/gwdiag/cli/admin"
	"github.com/gwdiag/gwdiag/cli/inject"
	"github.com/gwdiag/gwdiag/cli/internal/connect"
	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
	"github.com/gwdiag/gwdiag/cli/internal/scrub"
	"github.com/gwdiag/gwdiag/cli/internal/tui"
	"github.com/gwdiag/gwdiag/golden/termtext"
	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/watch"
)

// readyGrace is how long inject mode waits, after the stream's response
// headers, for the `: ready` comment before sending anyway: older proxies
// never send it, newer ones send it at once.
const readyGrace = time.Second

type options struct {
	namespace  string
	kubeconfig string
	adminPort  int
	adminURL   string
	configFile string
	raw        bool
	local      bool
	port       int
	file       string
	expression string
	// follow mode: many requests on one stream, bounded by the proxy.
	follow      bool
	maxRequests int
	duration    time.Duration
	status      string
	slowerThan  time.Duration
	outcome     string
	// limits bound what is read from the proxy.
	limits admin.LimitFlags
	// redact says what is redacted in what gwdiag writes.
	redact scrub.Flags
	// otlp sends the traces to a collector too (otlp.go).
	otlp otlpFlags
}

// NewCommand returns `gwdiag trace` with its `diff`, `explain` and
// `redact` subcommands.
func NewCommand() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "trace [gateway/<name>] [--local] [--port PORT -- URL [curl args]]",
		Short: "Trace how the proxy handles the next request, or one you send",
		// Cobra's default, which SuggestionsFor does not apply (validate).
		SuggestionsMinimumDistance: 2,
		Long: `Trace shows, step by step, how the proxy handles one request: the matched
route, the applied policies, the chosen backend and the response status.

Watch mode (no --port) waits for the next request that reaches the proxy, from
any client. Inject mode (--port P -- URL [curl args]) registers the trace, then
sends the request itself to the listener port P; the URL's host only sets the
Host header and is never resolved. Extra arguments are passed to curl when it is
installed; without curl a built-in client understands -X, -H, -d/--data,
--data-raw, --data-binary, --json, -u and -A.

Without --local the proxy runs in a Kubernetes cluster: gateway/<name>[.namespace]
picks the first ready pod, by name, labelled
gateway.networking.k8s.io/gateway-name=<name> (no resource: the only Gateway in
the namespace), and port-forwards a free local port to its admin port
(--proxy-admin-port, 15000) and, in inject mode, another to the listener port.
The namespace is -n, else the kubeconfig context's; the kubeconfig is -k, else
$KUBECONFIG, else ~/.kube/config.

With --local the standalone proxy's admin server is found from --admin-url,
--proxy-admin-port, the ADMIN_ADDR environment variable or config.adminAddr of
--config, in that order (default 127.0.0.1:15000).

Without --raw an interactive viewer shows the events: tab switches pane,
arrows scroll, e/s/d show the raw event, its snapshot or the snapshot diff,
f switches the details between YAML and JSON, c copies them to the clipboard
(OSC 52: the terminal must allow it), q quits.

Follow mode (--follow) traces many requests on one stream, bounded by the
proxy: --max-requests (its default 10, at most 1000 a stream) and --duration
(30s, at most 10m). Every event carries its request's id (the client's
x-request-id, or one the proxy made and returned as x-request-id). --raw
prints the events as JSON Lines; the viewer lists the requests (method, path,
status, time) above the events of the selected one. With --raw,
--max-requests may go past the proxy's 1000: gwdiag then follows on one
stream after another until it has them all or --duration ends (requests
that arrive between two streams are not traced).

What gwdiag prints, shows or saves is redacted (--redact, the default): the
values of credential headers (authorization, proxy-authorization, cookie,
set-cookie, x-api-key, api-key, x-goog-api-key, x-amz-security-token, and
each --redact-header) in every event, and of credential query parameters
in a URL (key, api_key, access_token, ... and each --redact-query-param),
and the same credentials wherever else they show (a reason, a later event
of the request, curl's output),
each replaced by <redacted:fingerprint>: the same credential gives the same
fingerprint within a run (within every run with GWDIAG_REDACT_KEY set), so
requests with one key can be told apart from requests with another. The
auth scheme, cookie names and set-cookie attributes are kept. The terminal
too: scrollback, screen shares and pasted bug reports travel.
--redact=false shows them in clear, with a warning (docs/redaction.md).

--otlp ENDPOINT also sends each trace --raw prints, or -f reads, to an
OpenTelemetry collector (OTLP over gRPC, or HTTP with --otlp-protocol http),
as the span tree refproxy exports for config.tracing (docs/otlp.md): what is
sent is what is printed, redacted. A saved trace's ids derive from its bytes,
so sending it twice gives one trace; its times are its startTime's.`,
		Example: `  # Watch: trace the next request reaching a standalone proxy
  gwdiag trace --local

  # Inject: send a request through listener port 3000 and trace it
  gwdiag trace --local --port 3000 -- http://httpbin.local/post -X POST -H 'x-test: 1' -d 'a=b'

  # JSON Lines instead of the viewer, admin server from the proxy's config file
  gwdiag trace --local -c config.yaml --raw --port 3000 -- http://example.com/ > trace.jsonl

  # Only trace a request matching a CEL expression
  gwdiag trace --local --expression 'request.path.startsWith("/api")'

  # Follow the next 20 requests (or 1 minute) in the viewer: a request list above the events
  gwdiag trace --local --follow --max-requests 20 --duration 1m

  # Follow only the failures, or the slow ones (filtered by the proxy)
  gwdiag trace --local --follow --status 5xx
  gwdiag trace --local --follow --slower-than 500ms --max-requests 50

  # The same as JSON Lines, each event with its requestId
  gwdiag trace --local --raw --follow --max-requests 20 --duration 1m > follow.jsonl

  # Replay a saved trace
  gwdiag trace -f trace.jsonl

  # Send traces to an OpenTelemetry collector as spans (docs/otlp.md): a saved
  # capture, or a live follow stream while it prints
  gwdiag trace -f follow.jsonl --otlp http://127.0.0.1:4317
  gwdiag trace --local --raw --follow --max-requests 100 --otlp 127.0.0.1:4318 --otlp-protocol http

  # A cluster gateway, through port-forwards to its proxy pod (admin port and listener port)
  gwdiag trace gateway/my-gateway -n prod --port 8080 -- http://example.com/

  # Watch the only Gateway of the kubeconfig context's namespace
  gwdiag trace --raw

  # Redact one more header besides the credential headers; or show them in clear
  gwdiag trace --local --raw --redact-header x-tenant-token
  gwdiag trace --local --raw --redact=false`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd, &o, args)
		},
	}
	f := o.addProxyFlags(cmd)
	f.BoolVar(&o.raw, "raw", false, "print the trace as JSON Lines instead of the interactive viewer")
	f.StringVarP(&o.file, "file", "f", "", "replay a saved JSON Lines trace (- for stdin)")
	f.BoolVar(&o.follow, "follow", false, "trace many requests on one stream (with --raw: JSON Lines, each event with its requestId) until --max-requests or --duration")
	f.IntVar(&o.maxRequests, "max-requests", 0, "follow: end after this many traces (proxy default 10, ceiling 1000 a stream; with --raw up to 1000000, on consecutive streams)")
	f.DurationVar(&o.duration, "duration", 0, "follow: end after this long (proxy default 30s, ceiling 10m)")
	f.StringVar(&o.status, "status", "", "follow: only requests answered with this status: a code (429) or a class (5xx)")
	f.DurationVar(&o.slowerThan, "slower-than", 0, "follow: only requests that took longer than this (e.g. 500ms)")
	f.StringVar(&o.outcome, "outcome", "", "follow: only requests whose outcome this CEL expression accepts (response.code, latencyMicros)")
	o.otlp.add(f)
	_ = cmd.MarkFlagFilename("file", "jsonl")
	cmd.AddCommand(newDiffCommand(), newExplainCommand(), newRedactCommand())
	return cmd
}

// addProxyFlags adds the flags of every trace command that reaches a
// proxy: where it is (a cluster gateway or --local), how to reach its admin
// server, the request to send and the trace to choose, the bounds on what
// is read and the redaction of what is written.
func (o *options) addProxyFlags(cmd *cobra.Command) *pflag.FlagSet {
	f := cmd.Flags()
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace of the gateway (cluster mode; default: the kubeconfig context's)")
	f.StringVarP(&o.kubeconfig, "kubeconfig", "k", "", "path to the kubeconfig file (cluster mode; default: $KUBECONFIG, then ~/.kube/config)")
	f.IntVar(&o.adminPort, "proxy-admin-port", admin.DefaultPort, "admin server port of the proxy")
	f.StringVar(&o.adminURL, "admin-url", "", "admin server base URL, e.g. http://127.0.0.1:15000 (with --local)")
	f.StringVarP(&o.configFile, "config", "c", "", "standalone config file to read config.adminAddr from (with --local)")
	f.BoolVar(&o.local, "local", false, "target a standalone proxy on this machine instead of a cluster gateway")
	f.IntVar(&o.port, "port", 0, "listener port to send the injected request to (inject mode)")
	f.StringVar(&o.expression, "expression", "", "CEL expression choosing which request to trace")
	o.limits.AddStreamFlags(f)
	o.redact.Add(f)
	_ = cmd.MarkFlagFilename("config", "yaml", "yml")
	_ = cmd.MarkFlagFilename("kubeconfig")
	return f
}

// plan is a validated trace invocation.
type plan struct {
	opts     *options
	resource *connect.Resource
	request  *inject.Request
	// outcome is the follow stream's outcome filter.
	outcome string
}

// validate checks arguments and flags; its errors are agctl's, word for word,
// where agctl has one.
func validate(cmd *cobra.Command, o *options, args []string) (plan, error) {
	resources, reqArgs := args, []string(nil)
	if dash := cmd.ArgsLenAtDash(); dash >= 0 {
		resources, reqArgs = args[:dash], args[dash:]
	}
	p := plan{opts: o}
	if err := o.limits.Check(cmd.Flags()); err != nil {
		return p, err
	}
	if err := o.redact.Check(); err != nil {
		return p, err
	}
	portSet := cmd.Flags().Changed("port")
	if err := o.checkOTLP(cmd); err != nil {
		return p, err
	}
	// A resource has a "/": a first argument without one that is near a
	// subcommand's name is a mistyped subcommand (trace explian -f x), not
	// a resource the other flags refuse.
	if len(resources) > 0 && !strings.Contains(resources[0], "/") {
		if s := cmd.SuggestionsFor(resources[0]); len(s) > 0 {
			return p, fmt.Errorf("unknown command %q for %q (did you mean %s?)", resources[0], cmd.CommandPath(), strings.Join(s, " or "))
		}
	}
	if len(resources) > 1 {
		return p, fmt.Errorf("accepts at most 1 resource arg, received %d", len(resources))
	}
	if o.file != "" {
		for _, c := range []struct {
			bad  bool
			what string
		}{
			{len(resources) > 0, "a resource argument"},
			{o.local, "--local"},
			{portSet, "--port"},
			{len(reqArgs) > 0, "request args after --"},
			{o.expression != "", "--expression"},
			{o.follow, "--follow"},
		} {
			if c.bad {
				return p, fmt.Errorf("--file replays a saved trace and cannot be combined with %s", c.what)
			}
		}
		return p, nil
	}
	if o.local && len(resources) == 1 {
		return p, errors.New("--local does not accept a resource argument")
	}
	for _, name := range []string{"max-requests", "duration", "status", "slower-than", "outcome"} {
		if cmd.Flags().Changed(name) && !o.follow {
			return p, fmt.Errorf("--%s applies to --follow: add --follow", name)
		}
	}
	if o.follow {
		outcome, err := outcomeExpr(o.status, o.slowerThan, o.outcome)
		if err != nil {
			return p, err
		}
		// Compiled here as the proxy compiles it: a typo is said before
		// any proxy is reached, and also where the proxy ignores the filter.
		if outcome != "" {
			if _, err := watch.CompileOutcome(outcome); err != nil {
				return p, fmt.Errorf("--outcome %q: %v", o.outcome, err)
			}
		}
		p.outcome = outcome
	}
	if o.follow {
		switch {
		case len(reqArgs) > 0 || portSet:
			return p, errors.New("--follow watches the requests that reach the proxy; it cannot be combined with --port and a request")
		case cmd.Flags().Changed("max-requests") && (o.maxRequests < 1 || o.maxRequests > maxChained):
			return p, fmt.Errorf("--max-requests %d: want 1 to %d (to %d with --raw)", o.maxRequests, watch.MaxFollowMax, maxChained)
		case o.maxRequests > watch.MaxFollowMax && !o.raw:
			return p, fmt.Errorf("--max-requests %d: the proxy follows at most %d requests a stream; above that add --raw, which follows on consecutive streams", o.maxRequests, watch.MaxFollowMax)
		case cmd.Flags().Changed("duration") && (o.duration <= 0 || o.duration > 10*time.Minute):
			return p, fmt.Errorf("--duration %s: want more than 0s, up to 10m", o.duration)
		}
	}
	if len(reqArgs) > 0 && !portSet {
		return p, errors.New("a request URL requires --port")
	}
	if portSet && len(reqArgs) == 0 {
		return p, errors.New("--port requires a request URL after --")
	}
	if portSet && (o.port < 1 || o.port > 65535) {
		return p, fmt.Errorf("invalid --port %d: want 1-65535", o.port)
	}
	if len(reqArgs) > 0 {
		r, err := inject.ParseArgs(reqArgs)
		if err != nil {
			return p, err
		}
		p.request = &r
	}
	if !o.local {
		for _, c := range []struct {
			set  bool
			name string
		}{{o.adminURL != "", "--admin-url"}, {o.configFile != "", "--config"}} {
			if c.set {
				return p, fmt.Errorf("%s applies to a standalone proxy: add --local", c.name)
			}
		}
		if len(resources) == 1 {
			r, err := connect.ParseResource(resources[0])
			if err != nil {
				return p, err
			}
			p.resource = &r
		}
	} else if o.namespace != "" || o.kubeconfig != "" {
		return p, errors.New("--namespace and --kubeconfig apply to cluster mode and cannot be combined with --local")
	}
	if o.adminURL != "" && cmd.Flags().Changed("proxy-admin-port") {
		return p, errors.New("--admin-url and --proxy-admin-port both name the admin server: pass only one")
	}
	return p, nil
}

func run(cmd *cobra.Command, o *options, args []string) (err error) {
	p, err := validate(cmd, o, args)
	if err != nil {
		return exitcode.Usage(err)
	}
	sc := o.redact.Scrubber(cmd.ErrOrStderr())
	// Errors quote what the proxy and curl said.
	defer func() { err = sc.Error(err) }()
	if o.file != "" {
		return replay(cmd, o, sc)
	}
	ctx := cmd.Context()
	s, conn, adminURL, err := connectSession(cmd, o, p, sc)
	if err != nil {
		return err
	}
	defer conn.Close()
	s.outcome, s.filterDesc = p.outcome, filterDesc(cmd)
	s.follow, s.max, s.duration = o.follow, o.maxRequests, o.duration
	if o.raw {
		stderr := cmd.ErrOrStderr()
		s.stderr = stderr
		s.dropped = func(n int) {
			fmt.Fprintf(stderr, "warning: the proxy dropped %d trace events (the trace is incomplete)\n", n)
		}
		if o.otlp.endpoint == "" {
			return s.runRaw(ctx, cmd.OutOrStdout())
		}
		sink, err := o.otlp.sink()
		if err != nil {
			return err
		}
		s.tee = sink
		err = s.runRaw(ctx, cmd.OutOrStdout())
		return errors.Join(err, sink.Close(stderr))
	}
	// The viewer writes the terminal's sequences itself and escapes what
	// it shows (tui), so it takes the terminal as it is.
	out := termtext.Unwrap(cmd.OutOrStdout())
	if err := needTerminal(cmd.InOrStdin(), out); err != nil {
		return err
	}
	// In cluster mode client-go logs a broken forwarded connection through
	// klog to stderr, which would draw over the viewer; the viewer reports
	// the stream's own error instead.
	klog.SetLogger(logr.Discard())
	return s.runTUI(ctx, cmd.InOrStdin(), out, adminURL)
}

// connectSession connects to the proxy p names and returns the session
// every trace command starts from: the admin client, the request filter,
// the request to send (its credentials known to sc) and the listener it
// goes to. The caller closes conn.
func connectSession(cmd *cobra.Command, o *options, p plan, sc *scrub.Scrubber) (s session, conn connect.Connector, adminURL string, err error) {
	if p.request != nil {
		sc.AddRequest(*p.request)
	}
	if conn, err = connector(cmd, p); err != nil {
		return s, nil, "", err
	}
	ctx := cmd.Context()
	var listener string
	if adminURL, err = conn.AdminURL(ctx); err == nil && p.request != nil {
		listener, err = conn.Listener(ctx, o.port)
	}
	if err != nil {
		conn.Close()
		return s, nil, "", err
	}
	return session{
		client:   o.limits.Client(adminURL, connect.AdminHint(conn)),
		expr:     o.expression,
		request:  p.request,
		listener: listener,
		sender:   inject.NewSender(),
		scrub:    sc,
	}, conn, adminURL, nil
}

func connector(cmd *cobra.Command, p plan) (connect.Connector, error) {
	o := p.opts
	if o.local {
		u, err := admin.ResolveURL(admin.Options{
			URL: o.adminURL, Port: o.adminPort, PortSet: cmd.Flags().Changed("proxy-admin-port"),
			ConfigFile: o.configFile,
		})
		if err != nil {
			return nil, exitcode.Usage(err)
		}
		return connect.Local{Admin: u}, nil
	}
	return &connect.Cluster{Resource: p.resource, Namespace: o.namespace, Kubeconfig: o.kubeconfig, AdminPort: o.adminPort}, nil
}

// session is one trace: the admin stream and, in inject mode, the request.
type session struct {
	client   *admin.Client
	expr     string
	request  *inject.Request
	listener string
	sender   inject.Sender
	// stderr receives curl's own output (-v and the like) and warnings; nil
	// discards them, as the viewer owns the terminal.
	stderr io.Writer
	// dropped is told when the proxy announces dropped events.
	dropped func(n int)
	// idle is told when the stream has nothing more to deliver at once.
	idle func()
	// headerOnly leaves events undecoded but for their Headers (what the
	// follow checks read): the raw output passes them on as received, and
	// borrowRaw lends it each event's bytes, which it writes out at once.
	headerOnly, borrowRaw bool
	// follow asks for a follow stream, bounded by max and duration (0:
	// the proxy's defaults).
	follow   bool
	max      int
	duration time.Duration
	// outcome is the follow stream's outcome filter (CEL), or "", and
	// filterDesc the flags it came from, for messages.
	outcome    string
	filterDesc string
	// traced, when set, receives how many traces a follow stream passed on.
	traced *int
	// tee, when set, gets every event runRaw prints, as it prints it (the
	// OTLP export).
	tee io.Writer
	// scrub redacts the events and what else the session prints; nil
	// redacts nothing.
	scrub *scrub.Scrubber
}

// query is the trace stream's query.
func (s session) query() url.Values {
	q := url.Values{}
	if s.expr != "" {
		q.Set("expression", s.expr)
	}
	if s.follow {
		q.Set("follow", "true")
		if s.max > 0 {
			q.Set("max", strconv.Itoa(s.max))
		}
		if s.duration > 0 {
			q.Set("duration", s.duration.String())
		}
		if s.outcome != "" {
			q.Set("outcome", s.outcome)
		}
	}
	return q
}

// stream opens the trace, sends the request once the watcher is registered,
// and feeds events to onEvent until the stream ends. onSent is called after
// the request was sent. open is called once the stream is open (its error
// is returned before any event).
func (s session) stream(ctx context.Context, opened func(), onEvent func(admin.Event), onSent func()) error {
	ctx, cancelCause := context.WithCancelCause(ctx)
	cancel := func() { cancelCause(context.Canceled) }
	defer cancel()
	body, err := s.client.OpenTraceQuery(ctx, s.query())
	if err != nil {
		return err
	}
	defer body.Close()
	if s.scrub != nil {
		// What the follow check (below) passes on, as it passes it on:
		// a request's held events in their order.
		events, emit := s.scrub.Events(), onEvent
		onEvent = func(ev admin.Event) {
			redactEvent(events, &ev, s.borrowRaw, !s.headerOnly)
			if emit != nil {
				emit(ev)
			}
		}
	}
	var check *followCheck
	if s.follow {
		check = newFollowCheck(s, onEvent, func() { cancelCause(errNotFollowing) })
		onEvent = check.event
	}
	if opened != nil {
		opened()
	}
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- admin.ReadStream(body, admin.Handler{
			Ready:      func() { close(ready) },
			Event:      onEvent,
			Follow:     s.follow,
			HeaderOnly: s.headerOnly,
			BorrowRaw:  s.borrowRaw,
			Limits:     s.client.Limits,
			Idle:       s.idle,
			Comment: func(text string) {
				if s.stderr != nil {
					fmt.Fprintf(s.stderr, "warning: the proxy says: %s\n", s.scrub.Text(text))
				}
			},
			Dropped: func(n int) {
				if s.dropped != nil {
					s.dropped(n)
				}
			},
		})
	}()
	if s.request != nil {
		grace := time.NewTimer(readyGrace)
		select {
		case <-ready:
		case <-grace.C:
		case err := <-done:
			grace.Stop()
			return fmt.Errorf("trace stream ended before the request was sent: %w", streamErr(err))
		}
		grace.Stop()
		out, err := s.sender.Send(ctx, *s.request, s.listener)
		if err != nil {
			cancel()
			<-done
			return err
		}
		if out != "" && s.stderr != nil {
			// curl -v shows the request's headers.
			io.WriteString(s.stderr, s.scrub.Text(out))
		}
		if onSent != nil {
			onSent()
		}
	}
	err = <-done
	if check != nil && s.traced != nil {
		*s.traced = check.traces
	}
	if check != nil && (err == nil || errors.Is(context.Cause(ctx), errNotFollowing)) {
		return check.finish()
	}
	if err != nil && ctx.Err() != nil && errors.Is(context.Cause(ctx), context.Canceled) {
		return ctx.Err()
	}
	return streamErr(err)
}

// redactEvent redacts ev in place: its Raw (a copy of its own when it
// changes, unless borrow: then valid until the next event) and, with
// decode, its Event decoded again.
func redactEvent(events *scrub.Events, ev *admin.Event, borrow, decode bool) {
	out, changed := events.Raw(ev.Raw, ev.Header)
	if !changed {
		return
	}
	if !borrow {
		out = bytes.Clone(out)
	}
	ev.Raw = out
	if decode {
		if e, err := trace.Parse(out); err == nil {
			ev.Event = e
		}
	}
}

// errNotFollowing ends a follow stream whose proxy sent a one-shot trace.
var errNotFollowing = errors.New("the proxy does not follow")

// filterDesc is the follow filter as the user gave it: the flags set.
func filterDesc(cmd *cobra.Command) string {
	var parts []string
	for _, name := range []string{"status", "slower-than", "outcome"} {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			parts = append(parts, fmt.Sprintf("--%s %s", name, f.Value))
		}
	}
	return strings.Join(parts, " ")
}

// outcomeExpr builds the follow stream's outcome filter from the
// shortcuts --status (429, 5xx) and --slower-than, and --outcome, joined
// with &&; the proxy compiles and applies it.
func outcomeExpr(status string, slower time.Duration, outcome string) (string, error) {
	var parts []string
	switch {
	case status == "":
	case len(status) == 3 && status[0] >= '1' && status[0] <= '5' && strings.ToLower(status[1:]) == "xx":
		lo := int(status[0]-'0') * 100
		parts = append(parts, fmt.Sprintf("response.code >= %d && response.code < %d", lo, lo+100))
	default:
		n, err := strconv.Atoi(status)
		if err != nil || n < 100 || n > 599 {
			return "", fmt.Errorf("--status %q: want a status code (429) or a class (1xx to 5xx)", status)
		}
		parts = append(parts, fmt.Sprintf("response.code == %d", n))
	}
	if slower < 0 {
		return "", fmt.Errorf("--slower-than %s: want a positive duration", slower)
	}
	if slower > 0 {
		parts = append(parts, fmt.Sprintf("latencyMicros > %d", slower.Microseconds()))
	}
	if outcome != "" {
		parts = append(parts, "("+outcome+")")
	}
	return strings.Join(parts, " && "), nil
}

func streamErr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("trace failed: %w", err)
}

// maxChained bounds --max-requests with --raw, which follows on
// consecutive streams of at most followChunk traces (the proxy's ceiling).
const maxChained = 1_000_000

// followChunk is the most traces gwdiag asks one follow stream for.
var followChunk = watch.MaxFollowMax

// runRaw prints each event as one JSON line, exactly as the proxy sent it.
// In follow mode, more traces than one stream gives (followChunk) are
// followed on one stream after another, each asked for what is left of
// --max-requests and of --duration, until a stream ends short of its max
// (the duration, or the proxy's end).
// Lines are written in batches: what the stream has delivered is flushed
// before the reader waits for more (and before a warning of dropped
// events), so the output keeps up with the proxy and shows each event as
// soon as nothing follows it.
func (s session) runRaw(ctx context.Context, stdout io.Writer) error {
	out := bufio.NewWriterSize(stdout, 64<<10)
	var werr error
	flush := func() {
		if werr == nil && out.Buffered() > 0 {
			werr = out.Flush()
		}
	}
	s.idle = flush
	s.headerOnly, s.borrowRaw = true, true
	if dropped := s.dropped; dropped != nil {
		s.dropped = func(n int) {
			flush()
			dropped(n)
		}
	}
	write := func(ev admin.Event) {
		if werr == nil {
			out.Write(ev.Raw)
			_, werr = out.Write(newline)
		}
		if s.tee != nil {
			s.tee.Write(ev.Raw)
			s.tee.Write(newline)
		}
	}
	if !s.follow || s.max <= followChunk {
		err := s.stream(ctx, nil, write, nil)
		flush()
		if err != nil {
			return err
		}
		return werr
	}
	d := s.duration
	if d == 0 {
		d = watch.DefaultFollowDuration
	}
	deadline := time.Now().Add(d)
	for left, streams := s.max, 0; left > 0 && werr == nil; streams++ {
		rest := time.Until(deadline).Truncate(time.Millisecond)
		if rest <= 0 {
			break
		}
		one := s
		one.max, one.duration = min(left, followChunk), rest
		traced := 0
		one.traced = &traced
		if streams == 1 && s.stderr != nil {
			flush()
			fmt.Fprintf(s.stderr, "note: the proxy ends a follow stream at %d traces; following on new streams until %d traces or --duration (requests between two streams are not traced)\n", followChunk, s.max)
		}
		err := one.stream(ctx, nil, write, nil)
		if err != nil {
			flush()
			return err
		}
		left -= traced
		if traced < one.max {
			break // the stream ended before its max: the duration, or the proxy's end
		}
	}
	flush()
	return werr
}

var newline = []byte("\n")

// runTUI shows the viewer until the user quits. The stream is opened first, so
// that an unreachable admin server is reported plainly rather than in a
// screen that flashes and goes.
func (s session) runTUI(ctx context.Context, in io.Reader, out io.Writer, title string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	status := tui.StatusWatching
	if s.request != nil {
		status = tui.StatusSending
	}
	opened := make(chan struct{})
	result := make(chan error, 1)
	var prog *tea.Program
	progReady := make(chan struct{})
	// The stream's messages go through a queue, so that the reading never
	// waits for the viewer (a proxy under load would drop events).
	q := newViewerQueue()
	go q.run(func(msg tea.Msg) {
		<-progReady
		if prog != nil { // nil when the stream failed before the viewer started
			prog.Send(msg)
		}
	})
	s.dropped = func(n int) { q.push(tui.DroppedMsg{N: n}) }
	go func() {
		err := s.stream(ctx, func() { close(opened) },
			func(ev admin.Event) { q.push(tui.EventMsg{Raw: ev.Raw, Event: ev.Event}) },
			func() { q.push(tui.SentMsg{}) })
		result <- err
		q.push(tui.DoneMsg{Err: s.scrub.Error(err)})
		q.close()
	}()
	select {
	case <-opened:
	case err := <-result:
		select {
		case <-opened:
			// Opened, and ended before this select ran (a short follow
			// stream on a busy machine): the viewer shows what it held.
			result <- err
		default:
			close(progReady) // nothing will be sent to a program that never starts
			return err
		}
	}
	model := tui.New(title, status)
	if s.follow {
		model = tui.NewFollow(title, status)
	}
	model = model.WithClipboard(out)
	prog = tea.NewProgram(model, tea.WithAltScreen(), tea.WithInput(in), tea.WithOutput(out), tea.WithContext(ctx))
	close(progReady)
	if _, err := prog.Run(); err != nil && !errors.Is(err, tea.ErrProgramKilled) {
		return fmt.Errorf("trace viewer: %w", err)
	}
	cancel()
	err := <-result
	if errors.Is(err, context.Canceled) {
		// The user quit before the trace completed.
		return nil
	}
	return err
}

// viewerQueue hands a stream's messages to the viewer without holding up
// the reader: push never waits, and run sends what is pending in order,
// consecutive events as one tui.EventsMsg. A viewer that keeps up gets
// the events one by one; one slower than the proxy gets them in batches
// and redraws once per batch (a redraw costs far more than reading an
// event), and catches up. What is pending is held until the viewer takes
// it: no more than the viewer keeps of the stream anyway.
type viewerQueue struct {
	mu      sync.Mutex
	pending []tea.Msg
	closed  bool
	wake    chan struct{}
}

func newViewerQueue() *viewerQueue { return &viewerQueue{wake: make(chan struct{}, 1)} }

// push adds msg to what is pending.
func (q *viewerQueue) push(msg tea.Msg) {
	q.mu.Lock()
	q.pending = append(q.pending, msg)
	q.mu.Unlock()
	q.signal()
}

// close ends run once what is pending is sent.
func (q *viewerQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

func (q *viewerQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// run sends the pending messages with send until close.
func (q *viewerQueue) run(send func(tea.Msg)) {
	for range q.wake {
		q.mu.Lock()
		msgs, closed := q.pending, q.closed
		q.pending = nil
		q.mu.Unlock()
		for len(msgs) > 0 {
			n := 0
			for n < len(msgs) {
				if _, ok := msgs[n].(tui.EventMsg); !ok {
					break
				}
				n++
			}
			switch n {
			case 0:
				send(msgs[0])
				n = 1
			case 1:
				send(msgs[0])
			default:
				batch := make(tui.EventsMsg, n)
				for i, m := range msgs[:n] {
					batch[i] = m.(tui.EventMsg)
				}
				send(batch)
			}
			msgs = msgs[n:]
		}
		if closed {
			return
		}
	}
}

// needTerminal refuses to start the viewer when it cannot work: its screen
// and keys need a terminal on stdin and stdout.
func needTerminal(in io.Reader, out io.Writer) error {
	for _, f := range []any{in, out} {
		if file, ok := f.(*os.File); ok && !term.IsTerminal(file.Fd()) {
			return exitcode.Usage(errors.New("the interactive viewer needs a terminal on stdin and stdout; use --raw for JSON Lines"))
		}
	}
	return nil
}
