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
	"sort"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/gwdiag/gwdiag/cli/admin"
	"github.com/gwdiag/gwdiag/cli/connect"
	"github.com/gwdiag/gwdiag/cli/exitcode"
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
	cmd.AddCommand(newAllCommand(), newBackendsCommand())
	return cmd
}

func addSourceFlags(cmd *cobra.Command, o *options) {
	f := cmd.Flags()
	f.StringVarP(&o.file, "file", "f", "", "read a saved /config_dump JSON file instead of a live proxy (- for stdin)")
	f.BoolVar(&o.local, "local", false, "read /config_dump from a standalone proxy on this machine")
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace of the gateway (cluster mode; default: the kubeconfig context's)")
	f.StringVarP(&o.kubeconfig, "kubeconfig", "k", "", "path to the kubeconfig file (cluster mode; default: $KUBECONFIG, then ~/.kube/config)")
	f.IntVar(&o.adminPort, "proxy-admin-port", admin.DefaultPort, "admin server port of the proxy")
	f.StringVar(&o.adminURL, "admin-url", "", "admin server base URL, e.g. http://127.0.0.1:15000 (with --local)")
	f.StringVarP(&o.configFile, "config", "c", "", "standalone config file to read config.adminAddr from (with --local)")
	o.limits.AddBodyFlags(f)
	_ = cmd.MarkFlagFilename("file", "json")
}

func newAllCommand() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "all [gateway/<name>]",
		Short: "Summary of routes, backends and policies",
		Long: `All summarises the routes (where they listen, what they match, their backends
and inline policies), the backends (endpoints, requests) and the policies a
proxy has loaded, from its /config_dump or a saved dump file.`,
		Example: `  # A standalone proxy, as YAML
  gwdiag config all --local -o yaml

  # A saved dump, as tables
  gwdiag config all --file dump.json

  # A cluster gateway
  gwdiag config all gateway/my-gateway -n prod -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.output != "short" && o.output != "json" && o.output != "yaml" {
				return exitcode.Usage(fmt.Errorf("invalid --output %q: want short, json or yaml", o.output))
			}
			raw, err := load(cmd, &o, args)
			if err != nil {
				return err
			}
			d, err := ParseDump(raw)
			if err != nil {
				return fmt.Errorf("%s: %w", source(&o), err)
			}
			return WriteSummary(cmd.OutOrStdout(), Summarize(d), o.output)
		},
	}
	addSourceFlags(cmd, &o)
	cmd.Flags().StringVarP(&o.output, "output", "o", "short", "output format: short, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"short", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

func newBackendsCommand() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:     "backends [gateway/<name>]",
		Aliases: []string{"b", "be"},
		Short:   "Table of backends receiving traffic",
		Long: `Backends shows one row per backend endpoint: TYPE (Backend or Service), NAME,
NAMESPACE, ENDPOINT, HEALTH (success ratio, 0.70 style; Evict (3.3s) while
evicted), REQUESTS and mean LATENCY. Endpoints with no requests are hidden
unless --all is given.`,
		Example: `  gwdiag config backends --local
  gwdiag config be --file dump.json --all
  gwdiag config backends gateway/my-gateway -n prod`,
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := load(cmd, &o, args)
			if err != nil {
				return err
			}
			d, err := ParseDump(raw)
			if err != nil {
				return fmt.Errorf("%s: %w", source(&o), err)
			}
			return WriteBackends(cmd.OutOrStdout(), d.Backends, o.all)
		},
	}
	addSourceFlags(cmd, &o)
	cmd.Flags().BoolVar(&o.all, "all", false, "also show endpoints with no requests")
	return cmd
}

func source(o *options) string {
	if o.file != "" {
		return o.file
	}
	return "config dump"
}

// load returns the raw /config_dump from --file or the admin server.
func load(cmd *cobra.Command, o *options, args []string) ([]byte, error) {
	if len(args) > 1 {
		return nil, exitcode.Usage(fmt.Errorf("accepts at most 1 resource arg, received %d", len(args)))
	}
	if o.file != "" {
		if len(args) > 0 || o.local {
			return nil, exitcode.Usage(errors.New("--file reads a saved dump and cannot be combined with --local or a resource argument"))
		}
		if o.file == "-" {
			return io.ReadAll(cmd.InOrStdin())
		}
		b, err := os.ReadFile(o.file)
		if err != nil {
			return nil, fmt.Errorf("reading config dump: %w", err)
		}
		return b, nil
	}
	if err := o.limits.Check(cmd.Flags()); err != nil {
		return nil, exitcode.Usage(err)
	}
	var conn connect.Connector
	if o.local {
		if len(args) == 1 {
			return nil, exitcode.Usage(errors.New("--local does not accept a resource argument"))
		}
		if o.adminURL != "" && cmd.Flags().Changed("proxy-admin-port") {
			return nil, exitcode.Usage(errors.New("--admin-url and --proxy-admin-port both name the admin server: pass only one"))
		}
		u, err := admin.ResolveURL(admin.Options{URL: o.adminURL, Port: o.adminPort,
			PortSet: cmd.Flags().Changed("proxy-admin-port"), ConfigFile: o.configFile})
		if err != nil {
			return nil, exitcode.Usage(err)
		}
		conn = connect.Local{Admin: u}
	} else {
		if o.adminURL != "" || o.configFile != "" {
			return nil, exitcode.Usage(errors.New("--admin-url and --config apply to a standalone proxy: add --local"))
		}
		c := &connect.Cluster{Namespace: o.namespace, Kubeconfig: o.kubeconfig, AdminPort: o.adminPort}
		if len(args) == 1 {
			r, err := connect.ParseResource(args[0])
			if err != nil {
				return nil, exitcode.Usage(err)
			}
			c.Resource = &r
		}
		conn = c
	}
	defer conn.Close()
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	u, err := conn.AdminURL(ctx)
	if err != nil {
		return nil, err
	}
	return o.limits.Client(u, connect.AdminHint(conn)).ConfigDump(ctx)
}

// WriteSummary renders s as short tables, JSON or YAML.
func WriteSummary(w io.Writer, s Summary, format string) error {
	switch format {
	case "json":
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		enc := yaml.NewEncoder(w)
		enc.SetIndent(2)
		if err := enc.Encode(s); err != nil {
			return err
		}
		return enc.Close()
	}
	fmt.Fprintln(w, "ROUTES")
	rows := make([][]string, 0, len(s.Routes))
	for _, r := range s.Routes {
		name := r.Name
		if r.Namespace != "" {
			name = r.Namespace + "/" + r.Name
		}
		rows = append(rows, []string{name, r.Bind, r.Listener, strings.Join(r.Matches, ", "), strings.Join(r.Backends, ", "), strings.Join(r.Policies, ", ")})
	}
	if err := table(w, []string{"NAME", "BIND", "LISTENER", "MATCHES", "BACKENDS", "POLICIES"}, rows); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nBACKENDS")
	rows = rows[:0]
	for _, b := range s.Backends {
		rows = append(rows, []string{b.Type, b.Name, b.Namespace, strconv.Itoa(b.Endpoints), strconv.FormatInt(b.Requests, 10)})
	}
	if err := table(w, []string{"TYPE", "NAME", "NAMESPACE", "ENDPOINTS", "REQUESTS"}, rows); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nPOLICIES")
	rows = rows[:0]
	for _, p := range s.Policies {
		rows = append(rows, []string{p.Name, p.Target, strings.Join(p.Kinds, ", ")})
	}
	return table(w, []string{"NAME", "TARGET", "KINDS"}, rows)
}

// WriteBackends renders the backends table; endpoints with no requests are
// left out unless all is set.
func WriteBackends(w io.Writer, backends []Backend, all bool) error {
	type row struct {
		b Backend
		e Endpoint
	}
	var rows []row
	for _, b := range backends {
		for _, e := range b.Endpoints {
			if e.Requests == 0 && !all {
				continue
			}
			rows = append(rows, row{b, e})
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.b.Namespace != b.b.Namespace {
			return a.b.Namespace < b.b.Namespace
		}
		if a.b.Name != b.b.Name {
			return a.b.Name < b.b.Name
		}
		return a.e.Address < b.e.Address
	})
	cells := make([][]string, 0, len(rows))
	for _, r := range rows {
		typ := r.b.Type
		if typ == "" {
			typ = "Backend"
		}
		health := fmt.Sprintf("%.2f", r.e.Health)
		if r.e.EvictedFor != "" {
			health = fmt.Sprintf("Evict (%s)", r.e.EvictedFor)
		}
		latency := ""
		if r.e.Requests > 0 {
			latency = fmt.Sprintf("%.2fms", r.e.LatencyMs)
		}
		cells = append(cells, []string{typ, r.b.Name, r.b.Namespace, r.e.Address, health, strconv.FormatInt(r.e.Requests, 10), latency})
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
