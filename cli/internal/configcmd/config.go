// Package configcmd provides `gwdiag config`: a summary of the routes,
// backends and policies a proxy has loaded (`config all`) and the table of
// backends receiving traffic (`config backends`), from a live admin server
// or a saved /config_dump file.
package configcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/gwdiag/gwdiag/cli/admin"
	"github.com/gwdiag/gwdiag/cli/internal/connect"
	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
	"github.com/gwdiag/gwdiag/cli/internal/scrub"
	"github.com/gwdiag/gwdiag/golden/configdump"
	"github.com/gwdiag/gwdiag/golden/termtext"
)

type options struct {
	file       string
	local      bool
	namespace  string
	kubeconfig string
	output     string
	adminPort  int
	adminURL   string
	configFile string
	all        bool
	// limits bound what is read from the proxy.
	limits admin.LimitFlags
	// redact says what is redacted: the credentials the dump holds
	// (all, backends), and those a what-if quotes (explain).
	redact scrub.Flags
}

// NewCommand returns `gwdiag config` with `all` and `backends`.
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "config",
		Aliases: []string{"c", "cfg"},
		Short:   "Show the configuration a proxy has loaded",
		Example: `  gwdiag config all --local -o yaml
  gwdiag config backends --file dump.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newAllCommand(), newBackendsCommand(), newExplainCommand())
	return cmd
}

func addSourceFlags(cmd *cobra.Command, o *options) {
	f := cmd.Flags()
	f.StringVarP(&o.file, "file", "f", "", "read a saved /config_dump (JSON, or the YAML of config all -o yaml) instead of a live proxy (- for stdin)")
	f.BoolVar(&o.local, "local", false, "read /config_dump from a standalone proxy on this machine")
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace of the gateway (cluster mode; default: the kubeconfig context's)")
	f.StringVarP(&o.kubeconfig, "kubeconfig", "k", "", "path to the kubeconfig file (cluster mode; default: $KUBECONFIG, then ~/.kube/config)")
	f.IntVar(&o.adminPort, "proxy-admin-port", admin.DefaultPort, "admin server port of the proxy")
	f.StringVar(&o.adminURL, "admin-url", "", "admin server base URL, e.g. http://127.0.0.1:15000 (with --local)")
	f.StringVarP(&o.configFile, "config", "c", "", "standalone config file to read config.adminAddr from (with --local)")
	o.limits.AddBodyFlags(f)
	o.redact.Add(f)
	_ = cmd.MarkFlagFilename("file", "json")
}

func newAllCommand() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "all [gateway/<name>]",
		Short: "Summary of routes, backends and policies",
		Long: `All summarises the routes (where they listen, what they match, their backends
and inline policies), the backends (target, endpoints, requests) and the
policies (target, kinds) a proxy has loaded, from its /config_dump or a saved
dump, every list sorted. With -o json or -o yaml it prints the dump itself,
keys sorted, in a form --file reads back.

The credentials a dump holds, when the proxy did not redact them (an apiKey
policy's keys, a backend's key, a header a modifier sets, a password), are
redacted as gwdiag trace's output is (--redact, the default; docs/redaction.md).`,
		Example: `  # Save a standalone proxy's dump, then read it back
  gwdiag config all --local -o json > dump.json
  gwdiag config all --file dump.json

  # A saved dump, as tables
  gwdiag config all --file dump.json

  # A cluster gateway
  gwdiag config all gateway/my-gateway -n prod -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := loadRedacted(cmd, &o, args)
			if err != nil {
				return err
			}
			if o.output != "short" {
				// The dump itself, whole and with sorted keys: what --file
				// reads back (agctl's flow).
				g, err := configdump.Generic(raw)
				if err != nil {
					return fmt.Errorf("%s: not a config dump: %w", source(&o), err)
				}
				return writeDump(cmd.OutOrStdout(), g, o.output)
			}
			d, err := configdump.Parse(raw)
			if err != nil {
				return fmt.Errorf("%s: not a config dump: %w", source(&o), err)
			}
			return writeSummary(cmd.OutOrStdout(), summarize(d))
		},
	}
	addSourceFlags(cmd, &o)
	addOutputFlag(cmd, &o)
	return cmd
}

func addOutputFlag(cmd *cobra.Command, o *options) {
	cmd.Flags().StringVarP(&o.output, "output", "o", "short", "output format: short, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"short", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp
	})
}

func newBackendsCommand() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:     "backends [gateway/<name>]",
		Aliases: []string{"b", "be"},
		Short:   "Table of backends receiving traffic",
		Long: `Backends shows one row per backend endpoint with statistics (a Service's
endpoints, an AI backend's providers): TYPE (Backend or Service), NAME,
NAMESPACE, ENDPOINT, HEALTH (0.70 style; Evict (3.3s) while evicted), REQUESTS
and mean LATENCY (blank with no requests), sorted by type, namespace, name and
endpoint. Endpoints with no requests are hidden unless --all is given. -o json
or -o yaml print the rows.`,
		Example: `  gwdiag config backends --local
  gwdiag config be --file dump.json --all
  gwdiag config backends gateway/my-gateway -n prod`,
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := loadRedacted(cmd, &o, args)
			if err != nil {
				return err
			}
			d, err := configdump.Parse(raw)
			if err != nil {
				return fmt.Errorf("%s: not a config dump: %w", source(&o), err)
			}
			return writeBackends(cmd.OutOrStdout(), backendRows(d, o.all), o.output)
		},
	}
	addSourceFlags(cmd, &o)
	cmd.Flags().BoolVar(&o.all, "all", false, "also show endpoints with no requests")
	addOutputFlag(cmd, &o)
	return cmd
}

func source(o *options) string {
	if o.file != "" {
		return o.file
	}
	return "config dump"
}

// loadRedacted returns the /config_dump from --file or the admin server
// as JSON, the credentials it holds redacted (--redact): a proxy that
// does not redact its dump shows its config's keys.
func loadRedacted(cmd *cobra.Command, o *options, args []string) ([]byte, error) {
	if err := o.redact.Check(); err != nil {
		return nil, exitcode.Usage(err)
	}
	raw, conn, err := loadFrom(cmd, o, args)
	if conn != nil {
		conn.Close()
	}
	if err != nil {
		return nil, err
	}
	j, err := configdump.AsJSON(raw)
	if err != nil {
		return raw, nil // Parse says what is wrong with it
	}
	return o.redact.Scrubber(cmd.ErrOrStderr()).Config(j), nil
}

// loadFrom is load that also returns the connection to a live proxy (nil
// for --file), open until the caller closes it.
func loadFrom(cmd *cobra.Command, o *options, args []string) ([]byte, connect.Connector, error) {
	raw, conn, err := loadDump(cmd, o, args)
	if err != nil && conn != nil {
		conn.Close()
		conn = nil
	}
	return raw, conn, err
}

func loadDump(cmd *cobra.Command, o *options, args []string) ([]byte, connect.Connector, error) {
	if len(args) > 1 {
		return nil, nil, exitcode.Usage(fmt.Errorf("accepts at most 1 resource arg, received %d", len(args)))
	}
	if o.output != "short" && o.output != "json" && o.output != "yaml" {
		return nil, nil, exitcode.Usage(fmt.Errorf("invalid --output %q: want short, json or yaml", o.output))
	}
	if o.file != "" {
		if len(args) > 0 || o.local {
			return nil, nil, exitcode.Usage(errors.New("--file reads a saved dump and cannot be combined with --local or a resource argument"))
		}
		if o.file == "-" {
			b, err := io.ReadAll(cmd.InOrStdin())
			return b, nil, err
		}
		b, err := os.ReadFile(o.file)
		if err != nil {
			return nil, nil, fmt.Errorf("reading config dump: %w", err)
		}
		return b, nil, nil
	}
	if err := o.limits.Check(cmd.Flags()); err != nil {
		return nil, nil, exitcode.Usage(err)
	}
	var conn connect.Connector
	if o.local {
		if len(args) == 1 {
			return nil, nil, exitcode.Usage(errors.New("--local does not accept a resource argument"))
		}
		if o.adminURL != "" && cmd.Flags().Changed("proxy-admin-port") {
			return nil, nil, exitcode.Usage(errors.New("--admin-url and --proxy-admin-port both name the admin server: pass only one"))
		}
		u, err := admin.ResolveURL(admin.Options{URL: o.adminURL, Port: o.adminPort,
			PortSet: cmd.Flags().Changed("proxy-admin-port"), ConfigFile: o.configFile})
		if err != nil {
			return nil, nil, exitcode.Usage(err)
		}
		conn = connect.Local{Admin: u}
	} else {
		if o.adminURL != "" || o.configFile != "" {
			return nil, nil, exitcode.Usage(errors.New("--admin-url and --config apply to a standalone proxy: add --local"))
		}
		c := &connect.Cluster{Namespace: o.namespace, Kubeconfig: o.kubeconfig, AdminPort: o.adminPort}
		if len(args) == 1 {
			r, err := connect.ParseResource(args[0])
			if err != nil {
				return nil, nil, exitcode.Usage(err)
			}
			c.Resource = &r
		}
		conn = c
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	u, err := conn.AdminURL(ctx)
	if err != nil {
		return nil, conn, err
	}
	raw, err := o.limits.Client(u, connect.AdminHint(conn)).ConfigDump(ctx)
	return raw, conn, err
}

// writeDump writes a dump whole as JSON (indented) or YAML, keys sorted,
// so the same dump gives the same bytes and --file reads it back. The YAML
// is what agctl writes (sigs.k8s.io/yaml: the same bytes as its
// `config all -o yaml` in the reference's docs).
func writeDump(w io.Writer, dump map[string]any, format string) error {
	return writeAs(w, dump, format)
}

// writeAs writes v as indented JSON or as YAML converted from its JSON (so
// JSON tags and numbers as written hold in both).
func writeAs(w io.Writer, v any, format string) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == "yaml" {
		// The YAML reader refuses the C1 and bidirectional controls JSON
		// leaves as they are: escaped first, as JSON does the others.
		if b, err = yaml.JSONToYAML([]byte(termtext.Escape(string(b)))); err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// writeSummary renders s as three tables: routes, backends, policies.
func writeSummary(w io.Writer, s summary) error {
	fmt.Fprintln(w, "ROUTES")
	rows := make([][]string, 0, len(s.Routes))
	for _, r := range s.Routes {
		rows = append(rows, []string{qualified(r.Namespace, r.Name), r.Bind, r.Listener, strings.Join(r.Hostnames, ", "),
			strings.Join(r.Matches, ", "), strings.Join(r.Backends, ", "), strings.Join(r.Policies, ", ")})
	}
	if err := table(w, []string{"NAME", "BIND", "LISTENER", "HOSTNAMES", "MATCHES", "BACKENDS", "POLICIES"}, rows); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nBACKENDS")
	rows = rows[:0]
	for _, b := range s.Backends {
		rows = append(rows, []string{b.Type, b.Name, b.Namespace, b.Target, strconv.Itoa(b.Endpoints), strconv.FormatUint(b.Requests, 10)})
	}
	if err := table(w, []string{"TYPE", "NAME", "NAMESPACE", "TARGET", "ENDPOINTS", "REQUESTS"}, rows); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nPOLICIES")
	rows = rows[:0]
	for _, p := range s.Policies {
		rows = append(rows, []string{p.Name, p.Target, strings.Join(p.Kinds, ", ")})
	}
	return table(w, []string{"NAME", "TARGET", "KINDS"}, rows)
}

// backendRow is one row of `config backends`, as -o json|yaml print it.
type backendRow struct {
	Type      string  `json:"type" yaml:"type"`
	Name      string  `json:"name" yaml:"name"`
	Namespace string  `json:"namespace" yaml:"namespace"`
	Endpoint  string  `json:"endpoint" yaml:"endpoint"`
	Health    float64 `json:"health" yaml:"health"`
	Requests  uint64  `json:"requests" yaml:"requests"`
	// LatencyMs is the mean latency; 0 with no requests.
	LatencyMs float64 `json:"latencyMs" yaml:"latencyMs"`
	// EvictedFor is how long an evicted endpoint stays out ("3.3s").
	EvictedFor string `json:"evictedFor,omitempty" yaml:"evictedFor,omitempty"`
}

// backendRows are the rows of `config backends` (agctl's rules): one per
// endpoint with statistics, sorted by type, namespace, name and endpoint;
// those with no requests only when all is set.
func backendRows(d *configdump.Dump, all bool) []backendRow {
	rows := []backendRow{}
	for _, e := range d.Endpoints() {
		n := e.Info.Requests()
		if n == 0 && !all {
			continue
		}
		r := backendRow{Type: e.Type, Name: e.Name, Namespace: e.Namespace, Endpoint: e.Endpoint,
			Health: e.Info.Health, Requests: n, EvictedFor: evictedFor(e.Info.EvictedUntil)}
		if n > 0 {
			r.LatencyMs = e.Info.Latency() * 1000
		}
		rows = append(rows, r)
	}
	return rows
}

// evictedFor shortens an eviction time to one decimal ("3.34s" is "3.3s",
// agctl's Evict (%.1fs)); a form it cannot read stays as written.
func evictedFor(until string) string {
	if until == "" {
		return ""
	}
	d, err := time.ParseDuration(until)
	if err != nil {
		return until
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

// writeBackends renders the backends table, or the rows as JSON or YAML.
func writeBackends(w io.Writer, rows []backendRow, format string) error {
	if format == "json" || format == "yaml" {
		return writeAs(w, rows, format)
	}
	cells := make([][]string, 0, len(rows))
	for _, r := range rows {
		health := fmt.Sprintf("%.2f", r.Health)
		if r.EvictedFor != "" {
			health = fmt.Sprintf("Evict (%s)", r.EvictedFor)
		}
		latency := ""
		if r.Requests > 0 {
			latency = fmt.Sprintf("%.2fms", r.LatencyMs)
		}
		cells = append(cells, []string{r.Type, r.Name, r.Namespace, r.Endpoint, health, strconv.FormatUint(r.Requests, 10), latency})
	}
	return table(w, []string{"TYPE", "NAME", "NAMESPACE", "ENDPOINT", "HEALTH", "REQUESTS", "LATENCY"}, cells)
}

// table writes a borderless, left-aligned table in the kubectl style.
func table(w io.Writer, header []string, rows [][]string) error {
	var buf bytes.Buffer
	t := tablewriter.NewTable(&buf,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
			Borders: tw.BorderNone,
			Settings: tw.Settings{
				Separators: tw.Separators{BetweenColumns: tw.Off, BetweenRows: tw.Off},
				Lines:      tw.Lines{ShowHeaderLine: tw.Off},
			},
		})),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignment(tw.AlignLeft),
		tablewriter.WithTrimSpace(tw.Off),
		tablewriter.WithPadding(tw.Padding{Left: "", Right: "   ", Overwrite: true}),
	)
	t.Header(header)
	for _, r := range rows {
		// Escaped before the table measures them: shown, never obeyed.
		for i := range r {
			r[i] = termtext.Escape(r[i])
		}
		if err := t.Append(r); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	// The last column's padding leaves trailing blanks that diff tools flag.
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if line == "" {
			continue
		}
		nl := strings.HasSuffix(line, "\n")
		line = strings.TrimRight(line, " \n")
		if nl {
			line += "\n"
		}
		if _, err := io.WriteString(w, line); err != nil {
			return err
		}
	}
	return nil
}
