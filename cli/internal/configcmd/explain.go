package configcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/cli/inject"
	"github.com/gwdiag/gwdiag/cli/internal/clusterstatus"
	"github.com/gwdiag/gwdiag/cli/internal/connect"
	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
	"github.com/gwdiag/gwdiag/cli/internal/scrub"
	"github.com/gwdiag/gwdiag/cli/internal/whatif"
	"github.com/gwdiag/gwdiag/golden/configdump"
	"github.com/gwdiag/gwdiag/golden/routing"
	"github.com/gwdiag/gwdiag/golden/trace/explain"
)

type explainOptions struct {
	options
	port   int
	format string
}

func newExplainCommand() *cobra.Command {
	var o explainOptions
	cmd := &cobra.Command{
		Use:   "explain [gateway/<name>] [--local | -f FILE] [--port PORT] -- URL [curl args]",
		Short: "What the proxy would do with a request, from its config dump, without sending it",
		Long: `Explain evaluates a request against a proxy's /config_dump, live or saved,
without sending it: the bind and listener it would reach, the route it would
take and why each other route would not, the policies on that route (inline,
and those targeting its gateway or name, with those that target another
listener or rule and why they do not apply), and its backends. The first line
is the verdict; a request no route would take gets the same words as
"gwdiag trace explain" gives its 404.

The request is given as for "gwdiag trace": a URL after --, then curl's -X, -H,
-d/--data, --json, -u and -A. The URL's host is the Host header; its port, or
--port, picks the bind (a dump with one bind needs neither).

Routes are matched by the one route matcher refproxy's data plane runs (the
reference's selection: the listener by hostname, then exact paths, the longest
prefix or regex, a method, the most headers, the most query parameters, the
route key), so a what-if and a trace of the same request agree. A dump says
nothing of rate-limit budgets or backend health: the what-if names the limits,
not whether they would refuse.

What explain prints is redacted as gwdiag trace's output is (--redact, the
default; --redact-header, --redact-query-param; docs/redaction.md): the
request's credentials (its credential headers, -u, the URL's user info and
credential query parameters such as ?key=) show as <redacted:fingerprint>
wherever the what-if quotes them.

In cluster mode the verdict also cites the conditions the API server gives
the route and the policies on it or its Gateway when they are not True, and
for a request no route would take, the routes of the Gateway that would match
but are not Accepted, and the policies that are not Attached.`,
		Example: `  # A saved dump (real agentgateway's or refproxy's)
  gwdiag config explain -f dump.json -- http://api.example.com/v1/chat -X POST -H 'x-tenant: blue'

  # A standalone proxy's live dump, for its bind on port 3000
  gwdiag config explain --local --port 3000 -- http://localhost/api

  # A cluster gateway's live dump, citing its routes' and policies' conditions
  gwdiag config explain gateway/my-gateway -n prod --port 8080 -- http://example.com/`,
		RunE: func(cmd *cobra.Command, args []string) error { return runExplain(cmd, &o, args) },
	}
	addSourceFlags(cmd, &o.options)
	cmd.Flags().IntVar(&o.port, "port", 0, "listener port of the bind to evaluate (default: the URL's port, or the dump's only bind)")
	cmd.Flags().StringVarP(&o.format, "output", "o", "text", "output format: text or json")
	return cmd
}

func runExplain(cmd *cobra.Command, o *explainOptions, args []string) error {
	resources, reqArgs := args, []string(nil)
	if dash := cmd.ArgsLenAtDash(); dash >= 0 {
		resources, reqArgs = args[:dash], args[dash:]
	}
	if len(reqArgs) == 0 {
		return exitcode.Usage(errors.New("a request to evaluate is needed after --: a URL, then curl's -X, -H, -d ..."))
	}
	if o.format != "text" && o.format != "json" {
		return exitcode.Usage(fmt.Errorf("invalid --output %q: want text or json", o.format))
	}
	if o.port < 0 || o.port > 65535 {
		return exitcode.Usage(fmt.Errorf("invalid --port %d: want 1-65535", o.port))
	}
	if err := o.redact.Check(); err != nil {
		return exitcode.Usage(err)
	}
	o.output = "short"
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	req, sent, err := parseRequest(ctx, reqArgs)
	if err != nil {
		return exitcode.Usage(err)
	}
	sc := o.redact.Scrubber(cmd.ErrOrStderr())
	sc.AddRequest(sent)
	req.Port = o.port
	raw, conn, err := loadFrom(cmd, &o.options, resources)
	if err != nil {
		return err
	}
	if conn != nil {
		defer conn.Close()
	}
	d, err := configdump.Parse(raw)
	if err != nil {
		return fmt.Errorf("%s: not a config dump: %w", source(&o.options), err)
	}
	// The what-if reads the dump as the proxy holds it; the credentials
	// the dump holds are secrets of the run, scrubbed from what it prints.
	if j, err := configdump.AsJSON(raw); err == nil {
		sc.AddConfig(j)
	}
	res, err := whatif.Evaluate(d, req)
	if err != nil {
		return fmt.Errorf("%s: %w", source(&o.options), err)
	}
	e := describe(req, res, sc)
	if c, ok := conn.(*connect.Cluster); ok {
		e.cite(ctx, cmd.ErrOrStderr(), c, req, res)
	}
	// The request's credentials are shown redacted wherever the what-if
	// quotes them: its URL's query, a header a route matched on.
	var out bytes.Buffer
	if o.format == "json" {
		b, err := json.MarshalIndent(e, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(&out, "%s\n", b)
	} else if err := e.write(&out); err != nil {
		return err
	}
	_, err = io.WriteString(cmd.OutOrStdout(), sc.Text(out.String()))
	return err
}

// parseRequest reads the request as `gwdiag trace` does: the URL, then
// curl's options, built as the built-in client would send it; and the
// request as parsed (its credentials).
func parseRequest(ctx context.Context, args []string) (whatif.Request, inject.Request, error) {
	r, err := inject.ParseArgs(args)
	if err != nil {
		return whatif.Request{}, r, err
	}
	hr, err := inject.Builtin{}.Build(ctx, r)
	if err != nil {
		return whatif.Request{}, r, err
	}
	host := hr.Host
	if host == "" {
		host = r.URL.Host
	}
	path := r.URL.Path
	if path == "" {
		path = "/"
	}
	if p, err := url.PathUnescape(r.URL.EscapedPath()); err == nil && p != "" {
		path = p
	}
	out := whatif.Request{Method: hr.Method, Host: host, Path: path, Query: r.URL.RawQuery, Header: hr.Header}
	if p := r.URL.Port(); p != "" {
		out.PortHint, _ = strconv.Atoi(p)
	}
	return out, r, nil
}

// explanation is a what-if for people (text) and programs (JSON).
type explanation struct {
	Request  string   `json:"request"`
	Line     string   `json:"line"`
	Bind     string   `json:"bind"`
	Listener string   `json:"listener,omitempty"`
	Route    string   `json:"route,omitempty"`
	Matched  string   `json:"matched,omitempty"`
	Policies []string `json:"policies,omitempty"`
	Skipped  []string `json:"skippedPolicies,omitempty"`
	Backends []string `json:"backends,omitempty"`
	NotTaken []string `json:"notTaken,omitempty"`
	Cluster  []string `json:"cluster,omitempty"`
}

func describe(req whatif.Request, res *whatif.Result, sc *scrub.Scrubber) explanation {
	e := explanation{Request: fmt.Sprintf("%s %s%s", req.Method, req.Host, pathAndQuery(req)), Bind: res.Bind}
	sel := res.Selection
	if sel.Listener != nil {
		e.Listener = sel.Listener.Key
		if h := sel.Listener.Hostname; h != "" {
			e.Listener += " (serves " + h + ")"
		}
	}
	var reasons []explain.RouteReason
	for _, v := range sel.Verdicts {
		reasons = append(reasons, explain.RouteReason{Route: v.Route.Key, Result: string(v.Result), Reason: v.Reason(), Condition: string(v.Failed.Kind)})
		if v.Result != routing.Selected {
			e.NotTaken = append(e.NotTaken, fmt.Sprintf("%s: %s", v.Route.Key, v.Reason()))
		}
	}
	if res.Route == nil {
		listener := ""
		if sel.Listener != nil {
			listener = sel.Listener.Key
		}
		host := strings.ToLower(req.Host)
		e.Line = "404: " + explain.NoRoute(reasons, listener, host, req.Path, len(sel.Evaluated))
		return e
	}
	e.Route = sel.Route.Key
	for _, v := range sel.Verdicts {
		if v.Result == routing.Selected {
			e.Matched = v.Reason()
		}
	}
	var kinds []string
	for _, p := range res.Policies {
		e.Policies = append(e.Policies, fmt.Sprintf("%s (%s): %s", p.Kind, p.From, describeSpec(p.Kind, p.Spec, sc)))
		kinds = append(kinds, p.Kind)
	}
	for _, p := range res.Skipped {
		e.Skipped = append(e.Skipped, fmt.Sprintf("%s (%s): %s", p.Kind, p.From, p.Why))
	}
	var targets []string
	for _, b := range res.Backends {
		s := b.Ref
		if b.Target != "" && !strings.Contains(b.Ref, b.Target) {
			s += " -> " + b.Target
		}
		switch {
		case b.Active == 1 && b.Rejected == 0:
			s += " (1 endpoint)"
		case b.Active+b.Rejected > 0:
			s += fmt.Sprintf(" (%d endpoints, %d rejected)", b.Active, b.Rejected)
		}
		if !b.Found {
			s += " (not in the dump)"
		}
		if len(res.Backends) > 1 {
			s += fmt.Sprintf(", weight %d", b.Weight)
		}
		e.Backends = append(e.Backends, s)
		targets = append(targets, s)
	}
	e.Line = "would take route " + explain.ShortRoute(e.Route)
	switch {
	case len(targets) == 0:
		e.Line += " (no backend: 503)"
	default:
		e.Line += " to " + strings.Join(targets, " and ")
	}
	if len(kinds) > 0 {
		e.Line += "; policies: " + strings.Join(kinds, ", ")
	}
	return e
}

func pathAndQuery(r whatif.Request) string {
	if r.Query == "" {
		return r.Path
	}
	return r.Path + "?" + r.Query
}

// describeSpec is a policy's spec in words: a local limit's entries, or
// the spec as compact JSON, cut.
func describeSpec(kind string, spec any, sc *scrub.Scrubber) string {
	if kind == "localRateLimit" {
		if entries, ok := spec.([]any); ok {
			var parts []string
			for i, e := range entries {
				em, _ := e.(map[string]any)
				parts = append(parts, fmt.Sprintf("[%d] %s", i, describeLimit(em)))
			}
			return strings.Join(parts, "; ")
		}
	}
	// Redacted as the dump it stands in is (under its kind: an apiKey
	// policy's keys), before it is cut short; <, > and & as they are (a
	// CEL expression's &&, a marker).
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]any{kind: spec}); err != nil {
		return "(not JSON)"
	}
	b := sc.Config(bytes.TrimSpace(buf.Bytes()))
	var v map[string]json.RawMessage
	if err := json.Unmarshal(b, &v); err != nil || len(v) != 1 {
		return "(not JSON)"
	}
	s := string(v[kind])
	if len(s) > 160 {
		s = s[:159] + "…"
	}
	return s
}

// describeLimit is a local limit entry of a dump in words; the reference
// writes maxTokens, tokensPerFill, fillInterval and type.
func describeLimit(em map[string]any) string {
	num := func(k string) int {
		f, _ := em[k].(float64)
		return int(f)
	}
	typ, _ := em["type"].(string)
	if typ == "" {
		typ = "requests"
	}
	fill, maxT := num("tokensPerFill"), num("maxTokens")
	interval, _ := em["fillInterval"].(string)
	if fill == 0 {
		b, _ := json.Marshal(em)
		return string(b)
	}
	unit := interval
	if d, err := time.ParseDuration(interval); err == nil {
		switch d {
		case time.Second:
			unit = "second"
		case time.Minute:
			unit = "minute"
		case time.Hour:
			unit = "hour"
		}
	}
	if fill == 1 {
		typ = strings.TrimSuffix(typ, "s")
	}
	s := fmt.Sprintf("%d %s per %s", fill, typ, unit)
	if maxT != fill && maxT != 0 {
		s += fmt.Sprintf(" (bucket of %d)", maxT)
	}
	return s
}

// cite adds what the cluster's API server says of the route and policies.
func (e *explanation) cite(ctx context.Context, stderr io.Writer, c *connect.Cluster, req whatif.Request, res *whatif.Result) {
	cl, ns, gw, err := c.Client(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "warning: the cluster's conditions are not cited: %v\n", err)
		return
	}
	headers := map[string]string{}
	for k, v := range req.Header {
		headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	host := req.Host
	cites, err := clusterstatus.Cite(ctx, cl, ns, gw, clusterstatus.Request{Route: e.Route, NoRoute: res.Route == nil,
		Method: req.Method, Path: req.Path, Host: host, Query: req.Query, Headers: headers})
	if err != nil {
		fmt.Fprintf(stderr, "warning: the cluster's conditions are not all cited: %v\n", err)
	}
	for _, s := range cites {
		e.Line += "; " + s
	}
	e.Cluster = cites
}

// write prints the verdict, then the parts, each under its label.
func (e explanation) write(w io.Writer) error {
	var b strings.Builder
	b.WriteString(e.Line + "\n")
	row := func(label string, values ...string) {
		for i, v := range values {
			if i > 0 {
				label = ""
			}
			fmt.Fprintf(&b, "  %-10s %s\n", label, v)
		}
	}
	row("request:", e.Request)
	row("bind:", e.Bind)
	if e.Listener != "" {
		row("listener:", e.Listener)
	}
	if e.Route != "" {
		row("route:", e.Route+": "+e.Matched)
	}
	row("policies:", e.Policies...)
	row("skipped:", e.Skipped...)
	row("backends:", e.Backends...)
	row("not taken:", e.NotTaken...)
	row("cluster:", e.Cluster...)
	_, err := io.WriteString(w, b.String())
	return err
}
