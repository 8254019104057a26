package steps

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestOptionRegistry: every key names a field, flags are unique, every
// default parses, and every recorded option of the report has its entry.
func TestOptionRegistry(t *testing.T) {
	flags, keys, reported := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, r := range OptionRegistry {
		if r.Key == "" && r.Apply == nil {
			t.Errorf("option --%s: neither a key nor Apply", r.Flag)
		}
		if r.Flag != "" && flags[r.Flag] || r.Key != "" && keys[r.Key] {
			t.Errorf("option %s --%s: written twice", r.Key, r.Flag)
		}
		flags[r.Flag], keys[r.Key], reported[r.Report] = true, true, true
		// pflag takes a help's first `quoted` word for the flag's
		// argument: "--bundle-dir gwdiag conformance replay" in --help.
		if strings.Contains(r.Help, "`") {
			t.Errorf("option --%s: its help quotes with a backtick, which --help shows as the flag's argument: %q", r.Flag, r.Help)
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("option %s: %v", r.Key, p)
				}
			}()
			var o Options
			if r.Default != "" && r.Key != "" {
				if err := r.Set(&o, r.Default, false); err != nil {
					t.Errorf("option %s: default %q: %v", r.Key, r.Default, err)
				} else if got := r.Format(&o); got != r.Default {
					t.Errorf("option %s: default %q formats back as %q", r.Key, r.Default, got)
				}
			}
		}()
	}
	// profiles are the profiles run (not the option), gatewayClass the
	// cluster's: both are derived, not copied.
	rt := reflect.TypeFor[RunOptions]()
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name != "profiles" && name != "gatewayClass" && !reported[name] {
			t.Errorf("report option %q: no registry entry records it", name)
		}
	}
}

// TestOptionDefaults: a zero Options takes the registry's defaults; a set
// field and a zero that has a meaning of its own (configStyle) stay.
func TestOptionDefaults(t *testing.T) {
	o := Options{Concurrency: 2}.withDefaults()
	if o.Target != "inprocess" || o.Concurrency != 2 || o.Timeouts.Request.String() != "10s" || o.Timeouts.ReadyGrace.String() != "300ms" ||
		o.Container.Pull != "missing" || o.Limits.TraceEvents != 10000 || o.ConfigStyle != "" {
		t.Errorf("defaults: got target %q concurrency %d request %s readyGrace %s pull %q traceEvents %d configStyle %q",
			o.Target, o.Concurrency, o.Timeouts.Request, o.Timeouts.ReadyGrace, o.Container.Pull, o.Limits.TraceEvents, o.ConfigStyle)
	}
}

// TestOptionsDoc: docs/options.md is the registry's table as it is now.
func TestOptionsDoc(t *testing.T) {
	const path = "../docs/options.md"
	want := optionsMarkdown()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is not the table of OptionRegistry; run go test ./steps -run TestOptionsDoc -update", path)
	}
}
