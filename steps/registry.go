package steps

import (
	"encoding/csv"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/steps/targets/cluster"
	"github.com/gwdiag/gwdiag/steps/targets/container"
	"github.com/gwdiag/gwdiag/steps/targets/local"
)

// RunOption is one knob of a run, written once: the options-file key it
// has, the flag that sets it, its default and its help. The command's
// flags, the options file's defaults, the report's record of the run and
// docs/options.md all come from OptionRegistry, so adding an option is
// adding a field to Options (or a nested struct) and one entry here.
type RunOption struct {
	// Key is the field's path in the options file, by JSON names
	// ("container.image"); empty for a flag that is no one field
	// (Apply).
	Key string
	// Flag is the command-line flag ("" for an option of the file only).
	Flag string
	// Default is the value a zero field takes, written as on the command
	// line; "" when the zero value is the default.
	Default string
	// ShowDefault, with KeepZero, is a default the help and the docs show
	// but the options do not fill in: the zero value already means it.
	KeepZero bool
	// Positive refuses a value that is zero or less when set by flag, and
	// one below zero from the options file or a library caller (zero
	// there is unset: the default).
	Positive bool
	// Report is the key of ConformanceReport.Options that records it
	// ("" when the report does not).
	Report string
	// Help is the flag's usage and the docs table's description.
	Help string
	// Apply sets the options from the flag's value, for a flag that is
	// no one field (--cluster).
	Apply func(o *Options, value string) error
}

// OptionRegistry is every run option, in the order the flags are applied
// (the ones that depend on others last).
var OptionRegistry = []RunOption{
	{Key: "target", Flag: "target", Default: "inprocess", Report: "target", Help: "how the proxy is run: inprocess, process, container or cluster"},
	{Key: "proxyCommand", Flag: "proxy-cmd", Report: "proxyCommand", Help: "process target: command template; {config} is the config file, {admin} the admin address"},
	{Key: "configStyle", Flag: "config-style", Default: string(local.StyleBinds), KeepZero: true, Report: "configStyle", Help: "process and container targets: how the config they write is laid out: binds (spec part 2.2) or gateways (gateways and routes, as the reference's current docs write it)"},
	{Key: "otlpProtocol", Flag: "otlp-protocol", Default: "grpc", Help: "otlp-export scenarios: how the proxy is told to send its spans to the suite's OTLP collector: grpc or http (OTLP/HTTP, protobuf, at /v1/traces)"},
	{Key: "rateLimitService", Flag: "ratelimit-service", Help: "global-rate-limit scenarios: host:port of an Envoy-compatible rate-limit service the proxy reaches, with the domain gwdiag-conformance (default: the suite runs one on loopback)"},
	{Key: "implementation.name", Flag: "implementation", Help: "name of the proxy under test, for the report"},
	{Key: "implementation.version", Help: "version of the proxy under test, for the report"},
	{Key: "implementation.url", Help: "where the proxy under test comes from, for the report"},
	{Key: "profiles", Flag: "profiles", Help: "profiles to run: standalone, cluster (default: every profile the target hosts)"},
	{Key: "supportedFeatures", Flag: "supported-features", Help: "extended features the proxy claims: failing one is a failure, not 'unsupported'"},
	{Key: "allFeatures", Flag: "all-features", Help: "claim every extended feature"},
	{Key: "exemptFeatures", Flag: "exempt-features", Help: "features not to run (reported as skipped)"},
	{Key: "skipScenarios", Flag: "skip-scenario", Report: "skipScenarios", Help: "scenario names not to run"},
	{Key: "runScenario", Flag: "run-scenario", Report: "runScenario", Help: "run only the scenario of this name"},
	{Key: "runExample", Flag: "run-example", Report: "runExample", Help: "with --run-scenario, run only the example of a Scenario Outline whose Examples row is at this line of its feature file (a failure bundle's scenario.yaml names it as example)"},
	{Key: "tags", Flag: "tags", Report: "tags", Help: "godog tag expression: && (and), a comma (or), ~ (not), no brackets; e.g. '@admin,@trace-order && ~@extended'"},
	{Key: "failFast", Flag: "fail-fast", Report: "failFast", Help: "stop at the first failing scenario: no scenario starts after it, the rest are reported not run"},
	{Key: "report", Flag: "report", Help: "write the ConformanceReport YAML here"},
	{Key: "reportDir", Flag: "report-dir", Help: "write the report into this directory as <channel>-<version>-<mode>-report.yaml (submission style) with a README.md holding the results and the command to reproduce"},
	{Key: "junit", Flag: "junit", Help: "write JUnit XML here"},
	{Key: "cucumberJSON", Flag: "cucumber-json", Help: "write Cucumber JSON here"},
	{Key: "baseline", Flag: "baseline", Report: "baseline", Help: "a ConformanceBaseline file (gwdiag conformance baseline REPORT writes one): its scenarios that fail are 'expected failure', which does not fail the run; one that passes fails the run as a stale baseline"},
	{Key: "repeat", Flag: "repeat", Default: "1", Positive: true, Report: "repeat", Help: "run every scenario this many times; one that passes only sometimes is 'flaky', which fails the run, with the bundle of a failing attempt"},
	{Key: "bundleDir", Flag: "bundle-dir", Help: "write a failure bundle per failed scenario here, <dir>/<feature>/<scenario>/: its steps, the config the suite wrote, the proxy's output, every trace stream as it came, the config dump at the failure, every HTTP exchange (HAR), redacted; gwdiag conformance replay runs one again"},
	{Key: "concurrency", Flag: "concurrency", Default: "4", Report: "concurrency", Positive: true, Help: "scenarios run at once"},
	{Key: "container.image", Flag: "image", Help: "container target: the proxy's image"},
	{Key: "container.configPath", Flag: "config-path", Default: container.DefaultConfigPath, Help: "container target: where the image reads its standalone config"},
	{Key: "container.adminPort", Flag: "admin-port", Default: strconv.Itoa(container.DefaultAdminPort), Help: "container target: the admin server's port inside the container"},
	{Key: "container.env", Flag: "env", Help: "container target: K=V set in the proxy's container (repeatable)"},
	{Key: "container.pull", Flag: "pull", Default: string(container.PullMissing), Help: "container target: pull an image missing from the Docker host (missing) or never"},
	{Key: "container.network", Flag: "network", Default: string(container.NetworkBridge), Help: "container target: bridge (a Docker network of the run's own, ports published on 127.0.0.1; any daemon) or host (the containers share this machine's network, the proxy's ports free ones of 127.0.0.1: no network namespace or published port per container, about half the start-up time; a Docker daemon on this machine, Linux)"},
	{Key: "container.mockImage", Flag: "mock-image", Help: "container target: image serving the mock backends (default: built FROM scratch from this gwdiag)"},
	{Key: "container.startupTimeout", Flag: "startup-timeout", Default: container.DefaultStartupTimeout.String(), Positive: true, Help: "container target: bound on a scenario's containers getting ready. Max value for a conformant implementation: 30s"},
	{Key: "cluster.kubeconfig", Flag: "kubeconfig", Help: "cluster target: kubeconfig of an existing cluster (default $KUBECONFIG, then ~/.kube/config)"},
	{Key: "cluster.local", Flag: "local-cluster", Help: "cluster target: start a local API server with the CRDs and the reference controller (the same as --cluster local)"},
	{Flag: "cluster", Apply: setClusterMode, Help: "cluster target: local (a local API server with the reference controller; conditions only), local-node (a single-node cluster on this machine, as root, with refproxy in pods: the whole cluster profile), kind (the same on a kind cluster; needs Docker and kind's node image) or kubeconfig (an existing cluster; the default)"},
	{Key: "cluster.dataPlane", Flag: "data-plane", Help: "cluster target, existing cluster: its proxy runs in pods the suite reaches through port-forwards (needs cluster.mockImage in the options file)"},
	{Key: "cluster.refproxyBinary", Flag: "refproxy-binary", Help: "cluster target, local-node and kind: the static refproxy its proxy image is packed from (default: refproxy beside gwdiag, then $PATH)"},
	{Key: "cluster.installCRDs", Flag: "install-crds", Help: "cluster target: install the Gateway API and policy CRDs into the existing cluster first"},
	{Key: "cluster.gatewayClassName", Flag: "gateway-class", Help: "cluster target: GatewayClass of the scenarios' Gateways (default gwdiag)"},
	{Key: "cluster.conditionTimeout", Positive: true, Help: "cluster target: bound on a condition reaching the status wanted. Max value for a conformant implementation: 60s"},
	{Key: "timeouts.request", Flag: "request-timeout", Default: "10s", Report: "requestTimeout", Positive: true, Help: "bound on one HTTP request"},
	{Key: "timeouts.trace", Flag: "trace-timeout", Default: "5s", Report: "traceTimeout", Positive: true, Help: "bound on a trace completing after its request. Max value for a conformant implementation: 5s"},
	{Key: "timeouts.readyGrace", Default: "300ms", Positive: true, Help: "how long the suite waits for the \": ready\" comment of a new trace stream before it takes the watcher as registered"},
	{Key: "limits.eventBytes", Flag: "max-event-bytes", Default: strconv.FormatInt(sse.DefaultLimits().EventBytes, 10), Positive: true, Help: "bound on one trace event (SSE frame) read from the proxy, in bytes"},
	{Key: "limits.traceEvents", Flag: "max-trace-events", Default: strconv.Itoa(sse.DefaultLimits().TraceEvents), Positive: true, Help: "bound on the events of one trace"},
	{Key: "limits.traceBytes", Flag: "max-trace-bytes", Default: strconv.FormatInt(sse.DefaultLimits().TraceBytes, 10), Positive: true, Help: "bound on the bytes of one trace stream, comments included"},
	{Key: "limits.frameTime", Flag: "frame-timeout", Default: sse.DefaultLimits().FrameTime.String(), Positive: true, Help: "bound on the time one trace event may take to arrive once it has begun"},
	{Key: "limits.headerBytes", Flag: "max-header-bytes", Default: strconv.FormatInt(sse.DefaultLimits().HeaderBytes, 10), Positive: true, Help: "bound on a response's header block, in bytes"},
	{Key: "limits.bodyBytes", Flag: "max-body-bytes", Default: strconv.FormatInt(sse.DefaultLimits().BodyBytes, 10), Positive: true, Help: "bound on an admin or data-plane response body the suite reads, in bytes"},
}

// clusterModes are the values of --cluster.
var clusterModes = []string{"local", "local-node", "kind", "kubeconfig"}

// setClusterMode applies --cluster: local (an API server only), local-node
// (a node whose pods run), kind (a kind cluster whose pods run; the options
// file's cluster.kind settings stay), kubeconfig (an existing cluster).
func setClusterMode(o *Options, mode string) error {
	kind := o.Cluster.Kind
	switch mode {
	case "local":
		o.Cluster.Local, o.Cluster.LocalNode, kind = true, false, nil
	case "local-node":
		o.Cluster.Local, o.Cluster.LocalNode, kind = false, true, nil
	case "kind":
		o.Cluster.Local, o.Cluster.LocalNode = false, false
		if kind == nil {
			kind = &cluster.KindOptions{}
		}
	case "kubeconfig":
		o.Cluster.Local, o.Cluster.LocalNode, kind = false, false, nil
	default:
		return fmt.Errorf("--cluster %q: want %s", mode, strings.Join(clusterModes, ", "))
	}
	o.Cluster.Kind = kind
	return nil
}

// Field returns the option's field in o, found by the JSON names of its
// Key; the zero Value for an option of no one field.
func (r RunOption) Field(o *Options) reflect.Value {
	if r.Key == "" {
		return reflect.Value{}
	}
	v := reflect.ValueOf(o).Elem()
	for _, name := range strings.Split(r.Key, ".") {
		f, ok := fieldByJSONName(v.Type(), name)
		if !ok {
			panic(fmt.Sprintf("steps: option key %q: no field %q in %s", r.Key, name, v.Type()))
		}
		v = v.FieldByIndex(f.Index)
	}
	return v
}

func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

var durationType = reflect.TypeFor[Duration]()

// setValue sets v from its command-line form. Lists take commas (as
// pflag's string slices, quoted with CSV); a map takes one K=V.
func setValue(v reflect.Value, s string, appendTo bool) error {
	switch {
	case v.Type() == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		v.SetBool(b)
	case v.Kind() == reflect.Int || v.Kind() == reflect.Int64:
		n, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			return err
		}
		v.SetInt(n)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		var items []string
		if s != "" {
			rec, err := csv.NewReader(strings.NewReader(s)).Read()
			if err != nil {
				return err
			}
			items = rec
		}
		if !appendTo {
			v.Set(reflect.MakeSlice(v.Type(), 0, len(items)))
		}
		for _, it := range items {
			v.Set(reflect.Append(v, reflect.ValueOf(it).Convert(v.Type().Elem())))
		}
	case v.Kind() == reflect.Map:
		k, val, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return fmt.Errorf("want K=V")
		}
		if v.IsNil() || !appendTo {
			v.Set(reflect.MakeMap(v.Type()))
		}
		v.SetMapIndex(reflect.ValueOf(k), reflect.ValueOf(val))
	default:
		return fmt.Errorf("option of type %s has no command-line form", v.Type())
	}
	return nil
}

// Set sets the option in o from its command-line form; appendTo adds to a
// list or map rather than replacing it (a repeated flag).
func (r RunOption) Set(o *Options, s string, appendTo bool) error {
	if r.Apply != nil {
		return r.Apply(o, s)
	}
	return setValue(r.Field(o), s, appendTo)
}

// Copy copies the option's field from src to dst.
func (r RunOption) Copy(dst, src *Options) {
	r.Field(dst).Set(r.Field(src))
}

// Format writes the option's value in o as the command line does.
func (r RunOption) Format(o *Options) string {
	return formatValue(r.Field(o))
}

// formatValue writes v as the command line and the report do.
func formatValue(v reflect.Value) string {
	switch {
	case v.Type() == durationType:
		return Duration(v.Int()).String()
	case v.Kind() == reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = v.Index(i).String()
		}
		return "[" + strings.Join(parts, ",") + "]"
	case v.Kind() == reflect.Map:
		keys := v.MapKeys()
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, k.String()+"="+v.MapIndex(k).String())
		}
		sort.Strings(parts)
		return "[" + strings.Join(parts, ",") + "]"
	default:
		return fmt.Sprint(v.Interface())
	}
}

// TypeName is the option's type as the docs and the flag's usage name it.
func (r RunOption) TypeName() string {
	if r.Key == "" {
		return "string"
	}
	v := r.Field(&Options{})
	switch {
	case v.Type() == durationType:
		return "duration"
	case v.Kind() == reflect.Slice:
		return "strings"
	case v.Kind() == reflect.Map:
		return "K=V"
	case v.Kind() == reflect.Int, v.Kind() == reflect.Int64:
		return "int"
	default:
		return v.Kind().String()
	}
}

// isUnset reports whether a field holds no value of the user's: its zero,
// or for a number zero or less (what withDefaults always took as unset).
func isUnset(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Int, reflect.Int64:
		return v.Int() <= 0
	default:
		return v.IsZero()
	}
}

// applyDefaults fills every unset field that has a default.
func (o *Options) applyDefaults() {
	for _, r := range OptionRegistry {
		if r.Default == "" || r.KeepZero || r.Key == "" {
			continue
		}
		if f := r.Field(o); isUnset(f) {
			if err := setValue(f, r.Default, false); err != nil {
				panic(fmt.Sprintf("steps: option %s: default %q: %v", r.Key, r.Default, err))
			}
		}
	}
}

// checkPositive refuses a negative value of a Positive option, as the
// options file or a library caller gives it: a bound below zero would be
// no bound at all (an HTTP client's, a concurrency godog reads as one).
func (o *Options) checkPositive() error {
	for _, r := range OptionRegistry {
		if !r.Positive || r.Key == "" {
			continue
		}
		if f := r.Field(o); f.CanInt() && f.Int() < 0 {
			name := r.Key
			if r.Flag != "" {
				name += " (--" + r.Flag + ")"
			}
			return fmt.Errorf("%s %s: want a positive bound", name, formatValue(f))
		}
	}
	return nil
}

// recordOptions is the report's record of the options marked Report.
func recordOptions(o Options, rec *RunOptions) {
	dst := reflect.ValueOf(rec).Elem()
	for _, r := range OptionRegistry {
		if r.Report == "" {
			continue
		}
		f, ok := fieldByJSONName(dst.Type(), r.Report)
		if !ok {
			panic(fmt.Sprintf("steps: option %s: no report field %q", r.Key, r.Report))
		}
		src, d := r.Field(&o), dst.FieldByIndex(f.Index)
		switch {
		case d.Kind() == reflect.String:
			if src.Kind() == reflect.String {
				d.SetString(src.String())
			} else {
				d.SetString(formatValue(src))
			}
		case d.Kind() == reflect.Slice && src.Kind() == reflect.Slice:
			if src.Len() > 0 {
				d.Set(src.Convert(d.Type()))
			}
		default:
			d.Set(src.Convert(d.Type()))
		}
	}
}

// optionsMarkdown is docs/options.md: every run option with its
// options-file key, flag, type, default and help, from OptionRegistry.
func optionsMarkdown() string {
	var b strings.Builder
	b.WriteString("# Run options\n\n")
	b.WriteString("<!-- Generated from steps.OptionRegistry (steps/registry.go); `go test ./steps -run TestOptionsDoc -update` rewrites it. -->\n\n")
	b.WriteString("Every option of `gwdiag conformance run`, as a key of the options file (`-c FILE`, YAML) and as a flag.\n")
	b.WriteString("A flag overrides the file only when it is given. A field left out takes the default.\n")
	b.WriteString("Adding an option is adding its field to `steps.Options` (or a struct within) and one entry to\n")
	b.WriteString("`OptionRegistry`: the flag, the default, the report's record and this table follow from it.\n\n")
	b.WriteString("| Options-file key | Flag | Type | Default | In the report as | Description |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	cell := func(s string) string {
		if s == "" {
			return ""
		}
		return "`" + s + "`"
	}
	for _, r := range OptionRegistry {
		flag := ""
		if r.Flag != "" {
			flag = "--" + r.Flag
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", cell(r.Key), cell(flag), r.TypeName(), cell(r.Default),
			cell(r.Report), strings.ReplaceAll(r.Help, "|", `\|`))
	}
	return b.String()
}
