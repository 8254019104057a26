package conformance

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/gwdiag/gwdiag/steps"
)

// TestOptionFlagsOverrideOnlyWhenSet: the options file's values stay where
// no flag was given, even where the flag has a default; a given flag wins,
// a repeated one adds to a list; a non-positive bound is refused.
func TestOptionFlagsOverrideOnlyWhenSet(t *testing.T) {
	parse := func(t *testing.T, args ...string) (steps.Options, error) {
		t.Helper()
		var fl optionFlags
		fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
		fl.add(fs)
		if err := fs.Parse(args); err != nil {
			return steps.Options{}, err
		}
		file := steps.Options{Target: "process", ProxyCommand: "p {config}", Concurrency: 2, Tags: "@admin"}
		file.Container.Env = map[string]string{"FROM": "file"}
		err := fl.apply(&file, fs)
		return file, err
	}
	o, err := parse(t, "--tags", "@trace-order", "--skip-scenario", "a,b", "--skip-scenario", "c", "--env", "K=V", "--request-timeout", "2s", "--all-features")
	if err != nil {
		t.Fatal(err)
	}
	if o.Target != "process" || o.Concurrency != 2 || o.ProxyCommand != "p {config}" {
		t.Errorf("unset flags overrode the file: target %q concurrency %d proxyCommand %q", o.Target, o.Concurrency, o.ProxyCommand)
	}
	if o.Tags != "@trace-order" || strings.Join(o.SkipScenarios, "|") != "a|b|c" || len(o.Container.Env) != 1 || o.Container.Env["K"] != "V" ||
		o.Timeouts.Request.String() != "2s" || !o.AllFeatures {
		t.Errorf("set flags: got tags %q skip %q env %v request %s allFeatures %v", o.Tags, o.SkipScenarios, o.Container.Env, o.Timeouts.Request, o.AllFeatures)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-trace-events", "0"}, "--max-trace-events 0: want a positive bound"},
		{[]string{"--frame-timeout", "-1s"}, "--frame-timeout -1s: want a positive bound"},
		{[]string{"--concurrency", "0"}, "--concurrency 0: want a positive bound"},
		{[]string{"--request-timeout", "-1s"}, "--request-timeout -1s: want a positive bound"},
		{[]string{"--trace-timeout", "0s"}, "--trace-timeout 0s: want a positive bound"},
		{[]string{"--env", "NOVALUE"}, `--env "NOVALUE": want K=V`},
		{[]string{"--cluster", "minikube"}, `--cluster "minikube": want local, local-node, kind, kubeconfig`},
	} {
		if _, err := parse(t, tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: got %v, want an error with %q", tt.args, err, tt.want)
		}
	}
}
