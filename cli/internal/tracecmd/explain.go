package tracecmd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/cli/admin"
	"github.com/gwdiag/gwdiag/cli/internal/clusterstatus"
	"github.com/gwdiag/gwdiag/cli/internal/connect"
	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
	"github.com/gwdiag/gwdiag/cli/internal/scrub"
	"github.com/gwdiag/gwdiag/golden/trace/explain"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
)

// explainOptions are trace's options and how to print the verdict.
type explainOptions struct {
	options
	details bool
	output  string
}

func newExplainCommand() *cobra.Command {
	var o explainOptions
	cmd := &cobra.Command{
		Use:   "explain [gateway/<name>] [--local] [--port PORT -- URL [curl args] | -f FILE]",
		Short: "Say in one line why a request ended as it did",
		Long: `Explain traces one request, as trace does (watch mode, or inject mode with
--port and a URL), or reads a saved trace (-f, JSON Lines or an SSE capture; -
for stdin), and says in one line why it ended as it did: the status, the
route, and the cause the proxy gave, e.g.

  429 from route default/api: localRateLimit[1] (1000 tokens per minute) exhausted, resets in 42 s
  404: no route of listener default/default/bind/3000/listener0 matched (2 routes); closest, default/submit: method is GET, the route wants POST

The reference proxy's trace says why each route did or did not match, what
each policy did and why the proxy answered a status the backend did not give.
A proxy whose trace gives no reasons (agentgateway today) gets what its events
show (the status, the route, the backend's answer or error, the x-ratelimit-*
headers) and "the proxy gave no reason".

A saved capture of several requests (followed, or appended with >>) gets one
line per request, read trace by trace. Lines that are not trace events are
named after the rest is explained, and the command exits 1 (as trace -f). In cluster mode the line also cites
the conditions the API server gives the matched route (Accepted, ResolvedRefs)
and the policies on it or its Gateway (Accepted, Attached) when they are not
True, and for a request no route took, the routes of the Gateway that would
have matched but are not Accepted and the policies not Attached.

-v adds the reasons behind the line: each route's, each policy's, the
backend's. -o json prints {status, route, line, details, reasons, cause,
complete} per request.

The events are redacted before they are explained, as gwdiag trace redacts
them (--redact, the default; --redact-header; docs/redaction.md): a reason
that quotes a credential header shows its fingerprint.`,
		Example: `  # Send a request through listener port 3000 and explain what happened to it
  gwdiag trace explain --local --port 3000 -- http://api.local/v1/chat -X POST -d @req.json

  # Explain the next request that reaches the proxy, with the reasons behind it
  gwdiag trace explain --local -v

  # Explain a saved trace, or every request of a followed capture
  gwdiag trace --local --raw --port 3000 -- http://x/ > trace.jsonl
  gwdiag trace explain -f trace.jsonl
  curl -sN -X POST localhost:15000/debug/trace | gwdiag trace explain -f -

  # A cluster gateway: the verdict cites the route's and policies' conditions
  gwdiag trace explain gateway/my-gateway -n prod --port 8080 -- http://example.com/api`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExplain(cmd, &o, args)
		},
	}
	f := o.addProxyFlags(cmd)
	f.StringVarP(&o.file, "file", "f", "", "explain a saved trace: JSON Lines or an SSE capture (- for stdin)")
	f.BoolVarP(&o.details, "details", "v", false, "print the reasons behind each verdict, one per line")
	f.StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	_ = cmd.MarkFlagFilename("file", "jsonl", "sse")
	return cmd
}

func runExplain(cmd *cobra.Command, o *explainOptions, args []string) (err error) {
	if o.output != "text" && o.output != "json" {
		return exitcode.Usage(fmt.Errorf("invalid --output %q: want text or json", o.output))
	}
	p, err := validate(cmd, &o.options, args)
	if err != nil {
		return exitcode.Usage(err)
	}
	sc := o.redact.Scrubber(cmd.ErrOrStderr())
	defer func() { err = sc.Error(err) }()
	w := bufio.NewWriter(cmd.OutOrStdout())
	defer w.Flush()
	if o.file != "" {
		return explainFile(w, cmd.InOrStdin(), o, sc.Events())
	}
	ctx := cmd.Context()
	s, conn, _, err := connectSession(cmd, &o.options, p, sc)
	if err != nil {
		return err
	}
	defer conn.Close()
	s.stderr = cmd.ErrOrStderr()
	s.dropped = func(n int) {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: the proxy dropped %d trace events (the verdict may miss a reason)\n", n)
	}
	var x explain.Explainer
	err = s.stream(ctx, nil, func(ev admin.Event) { x.Add(ev.Event) }, nil)
	if err != nil && !errors.Is(err, admin.ErrIncomplete) {
		return err
	}
	v := x.Verdict()
	if c, ok := conn.(*connect.Cluster); ok {
		v = citeCluster(ctx, cmd.ErrOrStderr(), c, v)
	}
	if werr := writeVerdict(w, o, "", v); werr != nil {
		return werr
	}
	return err
}

// citeCluster adds to the verdict what the API server says of the
// route and policies involved; a cluster that cannot be read is a warning,
// not a failure: the trace's verdict stands.
func citeCluster(ctx context.Context, stderr io.Writer, c *connect.Cluster, v explain.Verdict) explain.Verdict {
	cl, ns, gw, err := c.Client(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "warning: the cluster's conditions are not cited: %v\n", err)
		return v
	}
	q := v.Request
	cites, err := clusterstatus.Cite(ctx, cl, ns, gw, clusterstatus.Request{Route: v.Route, Status: v.Status,
		NoRoute: v.Cause == "noRoute" || (v.Route == "" && v.Status == 404),
		Method:  q.Method, Path: q.Path, Host: q.Host, Query: q.Query, Headers: q.Headers})
	if err != nil {
		fmt.Fprintf(stderr, "warning: the cluster's conditions are not all cited: %v\n", err)
	}
	for _, c := range cites {
		v.Line += "; " + c
		v.Details = append(v.Details, "cluster: "+c)
	}
	return v
}

// explainFile explains each trace of a saved capture as it is read,
// redacted by events.
func explainFile(w *bufio.Writer, stdin io.Reader, o *explainOptions, events *scrub.Events) error {
	n := 0
	err := sse.ReadTracesFile(o.file, stdin, func(t sse.CapturedTrace) error {
		n++
		events.Trace(&t)
		label := ""
		if t.ID != "" || t.Index > 1 {
			label = fmt.Sprintf("#%d", t.Index)
			if t.ID != "" {
				label += " " + t.ID
			}
		}
		if err := writeVerdict(w, o, label, explain.Events(t.TraceEvents())); err != nil {
			return err
		}
		return w.Flush()
	})
	// The valid events are explained first; bad lines (a capture copied
	// from docs that elide fields has some) are named after, and fail the
	// command as they fail trace -f and conformance check.
	var bad *sse.CaptureError
	if n == 0 && (err == nil || errors.As(err, &bad)) {
		if err != nil {
			return fmt.Errorf("%s: no trace events to explain; %w", sse.InputName(o.file), err)
		}
		return fmt.Errorf("%s: no trace events to explain", sse.InputName(o.file))
	}
	return err
}

// writeVerdict prints a verdict: its line (after label), then with -v the
// details, indented; or one JSON object.
func writeVerdict(w *bufio.Writer, o *explainOptions, label string, v explain.Verdict) error {
	if o.output == "json" {
		obj := struct {
			Request  string   `json:"request,omitempty"`
			Status   int      `json:"status"`
			Route    string   `json:"route,omitempty"`
			Line     string   `json:"line"`
			Details  []string `json:"details,omitempty"`
			Reasons  bool     `json:"reasons"`
			Cause    string   `json:"cause,omitempty"`
			Complete bool     `json:"complete"`
		}{label, v.Status, v.Route, v.Line, v.Details, v.Reasons, v.Cause, v.Complete}
		b, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		w.Write(b)
		return w.WriteByte('\n')
	}
	if label != "" {
		w.WriteString(label + ": ")
	}
	w.WriteString(v.Line + "\n")
	if o.details {
		for _, d := range v.Details {
			w.WriteString("  " + strings.ReplaceAll(d, "\n", " ") + "\n")
		}
	}
	return nil
}
