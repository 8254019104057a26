package steps

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cucumber/godog"

	"github.com/gwdiag/gwdiag/features"
)

// NewTarget builds the target the options name.
func NewTarget(o Options) (Target, error) {
	if o.TargetImpl != nil {
		return o.TargetImpl, nil
	}
	switch o.Target {
	case "", "inprocess":
		return NewInProcess(), nil
	case "process":
		return NewProcess(o.ProxyCommand), nil
	case "cluster":
		return NewCluster(o.Cluster), nil
	default:
		return nil, fmt.Errorf("unknown target %q: want inprocess, process or cluster (the container target is not available yet)", o.Target)
	}
}

// Run runs the suite and returns its report; the report is also written to
// the paths of the options. err is about the run itself (a target that
// cannot start, an output that cannot be written); failed scenarios are in
// the report (report.Failed()).
func Run(ctx context.Context, opts Options) (*ConformanceReport, error) {
	o := opts.withDefaults()
	target, err := NewTarget(o)
	if err != nil {
		return nil, err
	}
	if err := target.Start(ctx); err != nil {
		return nil, err
	}
	defer target.Stop(context.WithoutCancel(ctx))
	if opts.Implementation.Name == "" && opts.TargetImpl == nil && o.Target == "inprocess" {
		o.Implementation.Name = "gwdiag refproxy (in process)"
	}
	start := time.Now()
	r := &runner{opts: &o, target: target, out: o.Output}

	fsys := o.Features
	if fsys == nil {
		fsys = features.FS
	}
	format := "progress"
	if o.JUnit != "" {
		format += ",junit:" + o.JUnit
	}
	if o.CucumberJSON != "" {
		format += ",cucumber:" + o.CucumberJSON
	}
	suite := godog.TestSuite{
		Name:                "gwdiag-conformance",
		ScenarioInitializer: r.initScenario,
		Options: &godog.Options{
			Format:         format,
			Strict:         true,
			NoColors:       true,
			Concurrency:    o.Concurrency,
			Tags:           o.Tags,
			FS:             fsys,
			Paths:          []string{"."},
			Output:         io.Discard, // the runner prints its own progress view
			DefaultContext: ctx,
		},
	}
	fmt.Fprintf(r.out, "gwdiag conformance: target %s, implementation %s\n", target.Name(), o.Implementation.Name)
	status := suite.Run()
	rep := buildReport(o.Implementation, target.Name(), start, r.results)
	r.summary(rep)
	if status != 0 && !rep.Failed() {
		// godog failed before or outside any scenario: a parse error, an
		// output it could not write, an undefined step in a skipped spot.
		return rep, fmt.Errorf("godog run failed (status %d) with no failed scenario: check the features and output paths", status)
	}
	if o.Report != "" {
		if err := rep.WriteFile(o.Report); err != nil {
			return rep, err
		}
	}
	if o.RunScenario != "" && !r.ran(o.RunScenario) {
		return rep, fmt.Errorf("no scenario named %q ran; check the name and --tags", o.RunScenario)
	}
	return rep, nil
}

type runner struct {
	opts   *Options
	target Target
	out    io.Writer

	mu      sync.Mutex
	results []scenarioResult
}

// generic tags are not feature names.
var genericTags = map[string]bool{"@extended": true, "@cluster": true}

func (r *runner) initScenario(sc *godog.ScenarioContext) {
	sc.Before(func(ctx context.Context, p *godog.Scenario) (context.Context, error) {
		s := &state{target: r.target, opts: r.opts, tags: map[string]bool{},
			client: &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4}}}
		for _, t := range p.Tags {
			s.tags[t.Name] = true
		}
		s.feature = featureOf(p)
		s.scenario = p.Name
		ctx = withState(ctx, s)
		s.started = time.Now()
		if reason := r.skipReason(s, p); reason != "" {
			s.skip = reason
			return ctx, godog.ErrSkip
		}
		return ctx, nil
	})
	sc.After(func(ctx context.Context, p *godog.Scenario, err error) (context.Context, error) {
		s := getState(ctx)
		if s == nil {
			return ctx, err
		}
		s.teardown()
		res := scenarioResult{feature: s.feature, extended: s.tags["@extended"],
			ScenarioReport: ScenarioReport{Name: p.Name, File: p.Uri}}
		switch {
		case s.skip != "":
			res.Result, res.Message = Skipped, s.skip
		case s.unsupported != "":
			res.Result, res.Message = Unsupported, s.unsupported
		case err != nil && !errors.Is(err, godog.ErrSkip):
			res.Result, res.Message = Failed, err.Error()
		default:
			res.Result = Passed
		}
		res.Step = s.failedStep
		if res.Result != Failed {
			res.Step = ""
		}
		r.record(res, time.Since(s.started))
		// nil keeps the step's error as it is; returning it would repeat it.
		return ctx, nil
	})
	sc.StepContext().After(func(ctx context.Context, st *godog.Step, status godog.StepResultStatus, err error) (context.Context, error) {
		if s := getState(ctx); s != nil && err != nil && s.failedStep == "" {
			s.failedStep = st.Text
		}
		// nil keeps the step's error as it is; returning it would repeat it.
		return ctx, nil
	})
	registerSteps(sc)
}

// ran reports whether a scenario of that name ran (was not skipped).
func (r *runner) ran(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, res := range r.results {
		if res.Name == name && res.Result != Skipped {
			return true
		}
	}
	return false
}

func (r *runner) skipReason(s *state, p *godog.Scenario) string {
	if slices.Contains(r.opts.ExemptFeatures, s.feature) {
		return fmt.Sprintf("feature %s is exempt", s.feature)
	}
	if s.tags["@cluster"] && !slices.Contains(r.target.Capabilities(), "cluster") {
		return fmt.Sprintf("needs a cluster target; the %s target has none", r.target.Name())
	}
	if slices.Contains(r.opts.SkipScenarios, p.Name) {
		return "skipped by request"
	}
	if r.opts.RunScenario != "" && p.Name != r.opts.RunScenario {
		return "not the scenario asked for"
	}
	return ""
}

// featureOf names a scenario's feature: for an extended scenario its
// specific tag, otherwise the feature's tag.
func featureOf(p *godog.Scenario) FeatureName {
	var names []string
	for _, t := range p.Tags {
		if !genericTags[t.Name] {
			names = append(names, strings.TrimPrefix(t.Name, "@"))
		}
	}
	if len(names) == 0 {
		return FeatureName(strings.TrimSuffix(p.Uri, ".feature"))
	}
	for _, t := range p.Tags {
		if t.Name == "@extended" {
			return FeatureName(names[len(names)-1])
		}
	}
	return FeatureName(names[0])
}

func (r *runner) record(res scenarioResult, took time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results = append(r.results, res)
	label := map[Result]string{Passed: "PASS", Failed: "FAIL", Skipped: "SKIP", Unsupported: "UNSUPPORTED"}[res.Result]
	fmt.Fprintf(r.out, "%-11s %-28s %s (%s)\n", label, res.feature, res.Name, took.Round(time.Millisecond))
	if res.Result == Failed {
		fmt.Fprintf(r.out, "    step: %s\n    %s\n", res.Step, strings.ReplaceAll(res.Message, "\n", "\n    "))
	}
}

func (r *runner) summary(rep *ConformanceReport) {
	s := rep.Summary
	fmt.Fprintf(r.out, "\n%d passed, %d failed, %d skipped, %d unsupported in %s\n", s.Passed, s.Failed, s.Skipped, s.Unsupported, rep.Duration)
	for _, f := range rep.Features {
		fmt.Fprintf(r.out, "  %-28s %s\n", f.Name, f.Result)
	}
}
