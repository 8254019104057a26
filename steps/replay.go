package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/gwdiag/gwdiag/golden"
	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/redact"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/steps/bundle"
)

// Replayed is a failure bundle's scenario run again, and what differs.
type Replayed struct {
	// Bundle is the bundle replayed.
	Bundle *bundle.Bundle
	// Report is the replay's report; Scenario its scenario's result there
	// (Result passed when it passed).
	Report   *ConformanceReport
	Scenario ScenarioReport
	// Traces pairs each trace the bundle holds with the replay's trace of
	// the same rank.
	Traces []TracePair
}

// TracePair is one trace of the bundle beside the replay's.
type TracePair struct {
	// Name is the bundle's trace file ("" when only the replay took it).
	Name string
	// Bundled and Replayed are the events (nil when that run had no trace
	// of this rank).
	Bundled, Replayed []trace.Event
	// Diff is golden.Diff of the two, normalised; "" when they agree.
	Diff string
}

// Same reports whether the replay ended as the bundled run did.
func (r *Replayed) Same() bool { return string(r.Scenario.Result) == r.Bundle.Meta.Result }

// Replay runs the scenario of the failure bundle in dir again, from the
// feature file the bundle holds, on the target of o (the reference in
// process by default), claiming every feature so that an extended
// scenario is judged, and compares the traces of both runs. A replay that
// fails writes a bundle of its own under o.BundleDir when set.
func Replay(ctx context.Context, dir string, o Options) (*Replayed, error) {
	b, files, err := bundle.Read(dir)
	if err != nil {
		return nil, err
	}
	if err := replayable(b, o); err != nil {
		return nil, err
	}
	features, err := os.MkdirTemp("", "gwdiag-replay-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(features)
	if err := os.WriteFile(filepath.Join(features, filepath.Base(b.Meta.FeatureFile)), b.Feature, 0o644); err != nil {
		return nil, err
	}
	o.Features = os.DirFS(features)
	o.RunScenario, o.RunExample, o.AllFeatures, o.Tags = b.Meta.Scenario, b.Meta.Example, true, ""
	var (
		mu       sync.Mutex
		replayed [][]trace.Event
	)
	onTrace := o.OnTrace
	o.OnTrace = func(scenario string, events []trace.Event) {
		mu.Lock()
		replayed = append(replayed, events)
		mu.Unlock()
		if onTrace != nil {
			onTrace(scenario, events)
		}
	}
	rep, err := Run(ctx, o)
	if err != nil {
		return nil, err
	}
	r := &Replayed{Bundle: b, Report: rep, Scenario: ScenarioReport{Name: b.Meta.Scenario, Result: Passed}}
	// The other examples of an outline are in the report as skipped.
	for _, s := range rep.Scenario(b.Meta.Scenario) {
		if s.Result != Skipped {
			r.Scenario = s
			break
		}
	}
	for i := range max(len(files), len(replayed)) {
		var p TracePair
		if i < len(files) {
			p.Name = files[i].Name
			if p.Bundled, err = readTrace(files[i]); err != nil {
				return nil, err
			}
		}
		if i < len(replayed) {
			p.Replayed = replayed[i]
		}
		p.Diff = golden.Diff(unmarked(golden.Normalize(p.Bundled)), unmarked(golden.Normalize(p.Replayed)))
		r.Traces = append(r.Traces, p)
	}
	return r, nil
}

// readTrace reads a bundle's trace stream; a stream cut short (the bound of
// a hostile proxy) gives the events it holds.
func readTrace(f bundle.TraceFile) ([]trace.Event, error) {
	var events []trace.Event
	err := sse.ReadCapture(bytes.NewReader(f.Data), f.Name, func(c sse.Captured) error {
		events = append(events, c.Event)
		return nil
	})
	var bad *sse.CaptureError
	if err != nil && !errors.As(err, &bad) {
		return nil, fmt.Errorf("bundle trace %s: %w", f.Name, err)
	}
	return events, nil
}

// unmarked: events with every redaction marker's fingerprint dropped, so
// that two runs' traces compare by where they redact, not by their keys.
func unmarked(events []trace.Event) []trace.Event {
	out := make([]trace.Event, 0, len(events))
	for _, e := range events {
		var raw bytes.Buffer
		enc := json.NewEncoder(&raw)
		enc.SetEscapeHTML(false) // markers are <...>
		if err := enc.Encode(e); err == nil && redact.HasMarker(raw.String()) {
			if u, err := trace.Parse(bytes.TrimSpace(redact.Unfingerprint(raw.Bytes()))); err == nil {
				e = u
			}
		}
		out = append(out, e)
	}
	return out
}

// replayable refuses, as a usage error naming the target the bundle ran
// on, a replay on a target that hosts none of the profiles of the bundle's
// feature (a cluster scenario's bundle, replayed on the in-process
// default), rather than Run's words about a --run-scenario the user did
// not give.
func replayable(b *bundle.Bundle, o Options) error {
	o = o.withDefaults()
	tgt, err := newTarget(o)
	if err != nil {
		return err
	}
	f := FeatureName(b.Meta.Feature)
	ps := profilesOf(f)
	if len(ps) == 0 {
		return nil // a feature this gwdiag does not know: Run says so
	}
	if _, ok := profileIn(f, o.profilesFor(tgt)); ok {
		return nil
	}
	var names []ConformanceProfileName
	for _, p := range ps {
		names = append(names, p.Name)
	}
	return &usageError{fmt.Sprintf("replay: %q is a scenario of %s, a feature of the %s profile, which the %s target does not host; the bundle's run was on the %s target: replay it with --target %s and that target's flags",
		b.Meta.Scenario, f, profileList(names), tgt.Name(), b.Meta.Target, b.Meta.Target)}
}
