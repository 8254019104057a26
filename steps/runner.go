package steps

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cucumber/godog"

	"github.com/gwdiag/gwdiag/golden/termtext"
	"github.com/gwdiag/gwdiag/steps/bundle"
	"github.com/gwdiag/gwdiag/steps/interrupt"
	"github.com/gwdiag/gwdiag/steps/stepdefs"
	"github.com/gwdiag/gwdiag/steps/targets"
	"github.com/gwdiag/gwdiag/steps/targets/cluster"
	"github.com/gwdiag/gwdiag/steps/targets/container"
	"github.com/gwdiag/gwdiag/steps/targets/inprocess"
	"github.com/gwdiag/gwdiag/steps/targets/process"
)

// newTarget builds the target the options name.
func newTarget(o Options) (targets.Target, error) {
	if o.TargetImpl != nil {
		return o.TargetImpl, nil
	}
	switch o.Target {
	case "", "inprocess":
		return inprocess.New(), nil
	case "process":
		p := process.New(o.ProxyCommand)
		p.Style = o.ConfigStyle
		return p, nil
	case "container":
		c := container.New(o.Container)
		c.Style = o.ConfigStyle
		return c, nil
	case "cluster":
		if o.Cluster.Output == nil {
			o.Cluster.Output = o.Output
		}
		if o.Cluster.ReferenceFeatures == nil {
			// What the reference controller's GatewayClass advertises
			// where the target runs it: every extended feature of the
			// cluster profile, which refproxy implements.
			i := slices.IndexFunc(Profiles, func(p ConformanceProfile) bool { return p.Name == ProfileCluster })
			for _, f := range Profiles[i].ExtendedFeatures {
				o.Cluster.ReferenceFeatures = append(o.Cluster.ReferenceFeatures, string(f))
			}
		}
		return cluster.New(o.Cluster), nil
	default:
		return nil, fmt.Errorf("unknown target %q: want inprocess, process, container or cluster", o.Target)
	}
}

// Run runs the suite and returns its report; the report is also written to
// the paths of the options. err is about the run itself (a target that
// cannot start, an output that cannot be written); failed scenarios are in
// the report (report.Failed()).
func Run(ctx context.Context, opts Options) (*ConformanceReport, error) {
	o := opts.withDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	defer termtext.NewWriter(o.Output).Flush()
	if o.Secrets == nil {
		o.Secrets = stepdefs.NewSecrets()
	}
	var baseline *Baseline
	if o.Baseline != "" {
		var err error
		if baseline, err = LoadBaseline(o.Baseline); err != nil {
			return nil, err
		}
	}
	var progress *progressCopy
	if o.PlantCredentials {
		progress = &progressCopy{}
		o.Output = io.MultiWriter(o.Output, progress)
	}
	tgt, err := newTarget(o)
	if err != nil {
		return nil, err
	}
	profiles, fsys, err := checkBeforeStart(o, tgt, baseline)
	if err != nil {
		return nil, err
	}
	// Interrupted while the target started (a local node takes a minute):
	// the run goes on, and every scenario is reported not started, so
	// that the report says interrupted rather than nothing at all.
	// So does one whose target lacks what it needs of this machine (no
	// Docker daemon): every scenario is not run, with the fix.
	startErr := tgt.Start(ctx)
	var missing *targets.EnvironmentError
	if startErr != nil && ctx.Err() == nil && !errors.As(startErr, &missing) {
		return nil, startErr
	}
	var rep *ConformanceReport
	defer func() {
		// Last, after the clean-up: the progress output ends with it.
		if rep != nil && rep.StoppedEarly != nil {
			fmt.Fprintln(o.Output, rep.StoppedEarly.line())
		}
		if rep != nil && rep.Interrupted != nil {
			fmt.Fprintln(o.Output, rep.Interrupted.line())
		}
		if rep != nil && rep.Incomplete != nil {
			fmt.Fprintln(o.Output, rep.Incomplete.line())
		}
	}()
	if startErr == nil {
		removeLeftovers := interrupt.OnForcedExit(ctx, func() []string { return targets.LeftoversOf(tgt) })
		defer func() {
			if err := tgt.Stop(context.WithoutCancel(ctx)); err != nil {
				fmt.Fprintf(o.Output, "warning: stopping the %s target: %v\n", tgt.Name(), err)
			}
			removeLeftovers()
		}()
	}
	var inferredFrom string
	if startErr == nil {
		inferredFrom = inferClaims(ctx, &o, tgt, profiles)
	}
	if opts.Implementation.Name == "" && opts.TargetImpl == nil && o.Target == "inprocess" {
		o.Implementation.Name = "gwdiag refproxy (in process)"
	}
	start := time.Now()
	rls := &rateLimitServices{external: o.RateLimitService, target: tgt}
	defer rls.stop()
	r := &runner{opts: &o, target: tgt, profiles: profiles, out: o.Output, missing: missing, baseline: baseline, stepConfig: stepdefs.Config{
		Target: tgt, RequestTimeout: time.Duration(o.Timeouts.Request), TraceTimeout: time.Duration(o.Timeouts.Trace),
		ReadyGrace: time.Duration(o.Timeouts.ReadyGrace), OnTrace: o.OnTrace, RateLimit: rls,
		Limits: o.Limits, Secrets: o.Secrets, PlantCredentials: o.PlantCredentials, Record: o.BundleDir != "", OTLPProtocol: o.OTLPProtocol}}
	rls.progress = lockedWriter{&r.mu, r.out}

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
			Format: format,
			Strict: true,
			// Colours on: godog's colourless writer writes each character
			// with a call of its own, a system call per byte of the JUnit
			// and Cucumber JSON files (a fifth of the suite's own CPU,
			// docs/ci.md, "What is built or started once"), where its colour writer
			// passes them through in whole writes. Neither format has
			// colours, and the progress format, which has, goes to
			// io.Discard.
			NoColors:       false,
			Concurrency:    o.Concurrency,
			Tags:           tagsFor(o.Tags, profiles),
			FS:             fsys,
			Paths:          []string{"."},
			Output:         io.Discard, // the runner prints its own progress view
			DefaultContext: ctx,
		},
	}
	fmt.Fprintf(r.out, "gwdiag conformance: target %s, implementation %s, profiles %v\n", tgt.Name(), o.Implementation.Name, profiles)
	status, results := r.attempts(ctx, suite)
	rep = buildReport(o, tgt.Name(), profiles, start, results, interrupt.Reason(ctx))
	rep.Claims.InferredFrom = inferredFrom
	r.summary(rep)
	if slices.ContainsFunc(results, func(s scenarioResult) bool {
		return slices.Contains([]Result{NotRun, ExpectedFailure, StaleBaseline, Flaky}, s.Result) || s.Bundle != "" || s.Tries > 1
	}) {
		// godog wrote the scenarios not run as skipped steps; JUnit
		// readers want a skipped test case, and both a reason. And the
		// verdicts godog does not know (expected, flaky, stale), and the
		// bundles.
		if err := rewriteJUnit(o.JUnit, fsys, results); err != nil {
			return rep, err
		}
		if err := rewriteCucumber(o.CucumberJSON, results); err != nil {
			return rep, err
		}
	}
	if status != 0 && !rep.Failed() && rep.Summary.ExpectedFailures == 0 && rep.Interrupted == nil {
		// godog failed before or outside any scenario: a parse error, an
		// output it could not write, an undefined step in a skipped spot.
		return rep, fmt.Errorf("godog run failed (status %d) with no failed scenario: check the features and output paths", status)
	}
	if o.Report != "" {
		if err := rep.WriteFile(o.Report); err != nil {
			return rep, err
		}
	}
	if o.RunScenario != "" && rep.Interrupted == nil {
		// The selection was checked before the start: a scenario asked
		// for that did not run was skipped (an exempt feature, say).
		if why, skipped := r.skippedAll(o.RunScenario); skipped {
			return rep, fmt.Errorf("scenario %q did not run: %s", o.RunScenario, why)
		}
	}
	if o.PlantCredentials {
		return rep, checkPlanted(o, progress.bytes())
	}
	return rep, nil
}

// attempts runs the suite once, or --repeat times, and returns godog's
// status and the results: one per scenario, its attempts merged and the
// baseline applied.
func (r *runner) attempts(ctx context.Context, suite godog.TestSuite) (int, []scenarioResult) {
	o := r.opts
	status := 0
	for attempt := 1; attempt <= max(o.Repeat, 1); attempt++ {
		if o.Repeat > 1 {
			r.attempt = attempt
			fmt.Fprintf(r.out, "attempt %d of %d\n", attempt, o.Repeat)
		}
		status |= suite.Run()
		if ctx.Err() != nil || r.stopped() != "" {
			break
		}
	}
	if o.Repeat > 1 {
		// Each attempt is a try already: the merge takes the verdicts.
		r.notRunInconclusive()
	} else {
		status |= r.tryInconclusiveAgain(ctx, suite)
	}
	results := r.results
	if o.Repeat > 1 {
		results = mergeAttempts(results)
	}
	applyBaseline(r.baseline, o.Baseline, results)
	return status, results
}

// featureAdvertiser is a target that can say which features the
// implementation claims (the cluster target: its GatewayClass's
// status.supportedFeatures).
type featureAdvertiser interface {
	AdvertisedFeatures(ctx context.Context) (names []string, source string, err error)
}

// inferClaims: a cluster-profile run that claims nothing (no supported
// features, not all) takes its claims from what the implementation
// advertises, as the Gateway API suite takes them from the GatewayClass.
// Names that are not extended features of gwdiag (the Gateway API's own
// features share the list) are left out, and counted. It returns where the
// claims came from, for the report; "" when none were inferred.
func inferClaims(ctx context.Context, o *Options, tgt targets.Target, profiles []ConformanceProfileName) string {
	a, ok := tgt.(featureAdvertiser)
	if !ok || len(o.SupportedFeatures) > 0 || o.AllFeatures || !slices.Contains(profiles, ProfileCluster) {
		return ""
	}
	names, source, err := a.AdvertisedFeatures(ctx)
	if err != nil {
		fmt.Fprintf(o.Output, "claims: none given, none inferred: %v\n", err)
		return ""
	}
	var claimed []FeatureName
	other := 0
	for _, n := range names {
		if _, extended, ok := profileOf(FeatureName(n)); ok && extended && !slices.Contains(claimed, FeatureName(n)) {
			claimed = append(claimed, FeatureName(n))
		} else {
			other++
		}
	}
	o.SupportedFeatures = claimed
	fmt.Fprintf(o.Output, "claims: none given; inferred from %s: %v", source, claimed)
	if other > 0 {
		fmt.Fprintf(o.Output, " (%d other names left out: not extended features of gwdiag)", other)
	}
	fmt.Fprintln(o.Output)
	return source
}

// tagsFor adds to the user's tag expression the exclusion of every feature
// that belongs to none of the profiles the run covers, so that they are not
// even listed. A feature of several profiles runs when the run covers any.
func tagsFor(user string, profiles []ConformanceProfileName) string {
	parts := []string{}
	if user != "" {
		parts = append(parts, user)
	}
	for _, f := range allFeatures() {
		if _, ok := profileIn(f, profiles); !ok {
			parts = append(parts, "~@"+string(f))
		}
	}
	return strings.Join(parts, " && ")
}

type runner struct {
	opts       *Options
	target     targets.Target
	stepConfig stepdefs.Config
	profiles   []ConformanceProfileName
	out        io.Writer

	mu      sync.Mutex
	results []scenarioResult
	// again holds, while inconclusive scenarios are tried again, the
	// index in results of each, by name and example line.
	again map[scenarioKey]int
	// stoppedBy names the first failed scenario of a --fail-fast run.
	stoppedBy string
	// missing is what the target lacked to start: no scenario runs.
	missing *targets.EnvironmentError
	// missingSaid are the reasons of not run scenarios printed so far.
	missingSaid []string
	// attempt is the attempt under way of a --repeat run (0 without).
	attempt int
	// baseline lists the scenarios expected to fail (--baseline).
	baseline *Baseline
}

// stopped names the failed scenario that stopped a --fail-fast run, or "".
func (r *runner) stopped() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stoppedBy
}

// tagExtended marks a scenario of an extended feature; the feature's own tag
// follows it.
const tagExtended = "@extended"

// tagSpecPrefix starts the tags naming the spec part a scenario enforces
// (@spec-7.2); features/spec.go lists the parts.
const tagSpecPrefix = "@spec-"

// scenarioRun is the engine's record of one scenario, beside the step
// definitions' state (stepdefs.Begin).
type scenarioRun struct {
	feature  FeatureName
	profile  ConformanceProfileName
	extended bool
	started  time.Time
	// skip is why the scenario did not run ("" when it ran).
	skip string
	// notStarted is set when the run was interrupted before the scenario
	// began.
	notStarted bool
	// stoppedBy is set when --fail-fast kept the scenario from starting:
	// the failed scenario that stopped the run.
	stoppedBy string
	// missing is set when the target could not start for want of
	// something of this machine (the short form and the whole error).
	missing, missingDetail string
	// steps are the steps that ran, with how each ended.
	steps []bundle.Step
	// attempt is the attempt of a --repeat run (0 without).
	attempt int
}

type runKey struct{}

func (r *runner) initScenario(sc *godog.ScenarioContext) {
	sc.Before(func(ctx context.Context, p *godog.Scenario) (context.Context, error) {
		run := &scenarioRun{feature: featureOf(p), started: time.Now(), attempt: r.attempt}
		ctx = context.WithValue(ctx, runKey{}, run)
		_, ext, ok := profileOf(run.feature)
		if !ok {
			return ctx, fmt.Errorf("scenario %q: feature %q belongs to no profile (profiles.go)", p.Name, run.feature)
		}
		run.extended = ext
		// Reported under the profile of the run it belongs to; a feature
		// of no profile of the run is skipped below (a user's tags can
		// bring it in), reported under its first profile.
		if run.profile, ok = profileIn(run.feature, r.profiles); !ok {
			run.profile = profilesOf(run.feature)[0].Name
		}
		ctx = stepdefs.Begin(ctx, r.stepConfig, p.Name, ext && !r.opts.claims(run.feature))
		if ctx.Err() != nil {
			// Interrupted: godog goes on through every scenario, so each
			// one left is skipped here, before it starts anything.
			run.notStarted = true
			return ctx, godog.ErrSkip
		}
		if r.retrying() && !r.triesAgain(p) {
			run.skip = "not tried again"
			return ctx, godog.ErrSkip
		}
		if reason := r.skipReason(run, p); reason != "" {
			run.skip = reason
			return ctx, godog.ErrSkip
		}
		if run.stoppedBy = r.stopped(); run.stoppedBy != "" {
			return ctx, godog.ErrSkip
		}
		if r.missing != nil {
			run.missing, run.missingDetail = r.opts.Secrets.Scrub(r.missing.Summary()), r.opts.Secrets.Scrub(r.missing.Error())
			return ctx, godog.ErrSkip
		}
		return ctx, nil
	})
	sc.StepContext().After(func(ctx context.Context, st *godog.Step, status godog.StepResultStatus, _ error) (context.Context, error) {
		if run, _ := ctx.Value(runKey{}).(*scenarioRun); run != nil {
			run.steps = append(run.steps, bundle.Step{Text: st.Text, Status: status.String()})
		}
		return ctx, nil
	})
	sc.After(func(ctx context.Context, p *godog.Scenario, err error) (context.Context, error) {
		run, _ := ctx.Value(runKey{}).(*scenarioRun)
		var evidence *bundle.Bundle
		if run != nil && r.opts.BundleDir != "" && err != nil && !errors.Is(err, godog.ErrSkip) && ctx.Err() == nil {
			// Before End tears the scenario down: the config dump is
			// the proxy's at the failure.
			if b, ok := stepdefs.Collect(ctx); ok {
				evidence = &b
			}
		}
		end, ok := stepdefs.End(ctx)
		if run == nil || !ok {
			return ctx, err
		}
		res := scenarioResult{feature: run.feature, profile: run.profile, extended: run.extended,
			attempt: run.attempt, ScenarioReport: ScenarioReport{Name: p.Name, File: p.Uri, Example: r.exampleLine(p)}}
		switch {
		case run.stoppedBy != "":
			res.Result, res.stoppedBy = NotRun, run.stoppedBy
			res.Message = fmt.Sprintf("not run (--fail-fast: the run stopped after %q failed)", run.stoppedBy)
		case run.notStarted:
			res.Result, res.Message = NotRun, fmt.Sprintf("not run (interrupted by %s before it started)", interrupt.Reason(ctx))
		case end.Interrupted, err != nil && !errors.Is(err, godog.ErrSkip) && ctx.Err() != nil:
			// Cut short: its steps failed because the run's context
			// ended, whatever the proxy does.
			res.Result, res.Message, res.cutShort = NotRun, fmt.Sprintf("not run (interrupted by %s while it ran)", interrupt.Reason(ctx)), true
		case run.skip != "" && r.retrying():
			// Not one of the scenarios tried again: its result stands.
			return ctx, nil
		case run.skip != "":
			res.Result, res.Message = Skipped, run.skip
		case run.missing != "" || end.Missing != "":
			res.missing = run.missing + end.Missing
			res.Result, res.Message = NotRun, "not run: "+run.missingDetail+end.MissingDetail
		case end.Inconclusive != "":
			res.Result, res.inconclusive = NotRun, end.Inconclusive
			res.Message = "not run to a verdict: " + end.Inconclusive
		case end.Unsupported != "":
			res.Result, res.Message = Unsupported, end.Unsupported
		case err != nil && !errors.Is(err, godog.ErrSkip):
			res.Result, res.Message = Failed, err.Error()
		default:
			res.Result = Passed
		}
		if res.Result == Failed {
			res.Step, res.ProxyLogs = end.FailedStep, end.ProxyLogs
			if evidence != nil {
				res.Bundle = r.writeBundle(evidence, run, p, res, end)
			}
		}
		r.record(res, time.Since(run.started))
		// nil keeps the step's error as it is; returning it would repeat it.
		return ctx, nil
	})
	stepdefs.Register(sc)
}

// skippedAll reports whether no scenario of that name ran (every one was
// skipped, or none came), and why the last was skipped.
func (r *runner) skippedAll(name string) (why string, skipped bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	why = "godog ran no scenario of that name"
	for _, res := range r.results {
		if res.Name == name && res.Result != Skipped {
			return "", false
		}
		if res.Name == name && res.Message != notAskedFor && res.Message != notExampleAskedFor {
			why = res.Message
		}
	}
	return why, true
}

// The skip reasons of the scenarios --run-scenario and --run-example
// leave out: reported, but not a progress line each.
const (
	notAskedFor        = "not the scenario asked for"
	notExampleAskedFor = "not the example asked for"
)

func (r *runner) skipReason(s *scenarioRun, p *godog.Scenario) string {
	if slices.Contains(r.opts.ExemptFeatures, s.feature) {
		return fmt.Sprintf("feature %s is exempt", s.feature)
	}
	if !slices.Contains(r.profiles, s.profile) {
		return fmt.Sprintf("feature %s is in the %s profile, which this run (the %s target) does not cover", s.feature, s.profile, r.target.Name())
	}
	// A target that could not start has no capabilities to judge by: its
	// scenarios are not run for what it lacked.
	if need, ok := featureNeeds[s.feature]; ok && r.missing == nil && !slices.Contains(r.target.Capabilities(), need) {
		return fmt.Sprintf("feature %s needs %s (capability %s), which the %s target does not have in this run", s.feature, capabilityMeaning[need], need, r.target.Name())
	}
	if s.feature == FeatureGlobalRateLimit && r.opts.RateLimitService == "" {
		if _, ok := serviceAddr(r.target); !ok {
			return fmt.Sprintf("feature %s: the %s target's proxy cannot reach a rate-limit service the suite runs on this machine (a remote Docker daemon?); name one it reaches with --ratelimit-service", s.feature, r.target.Name())
		}
	}
	if slices.Contains(r.opts.SkipScenarios, p.Name) {
		return "skipped by request"
	}
	if r.opts.RunScenario != "" && p.Name != r.opts.RunScenario {
		return notAskedFor
	}
	if r.opts.RunScenario != "" && r.opts.RunExample != 0 && r.exampleLine(p) != r.opts.RunExample {
		return notExampleAskedFor
	}
	return ""
}

// featureOf names a scenario's feature: for an extended scenario the tag
// after @extended, otherwise the feature file's tag (the first).
func featureOf(p *godog.Scenario) FeatureName {
	var names []string
	extended := false
	for _, t := range p.Tags {
		switch {
		case t.Name == tagExtended:
			extended = true
		case !strings.HasPrefix(t.Name, tagSpecPrefix):
			names = append(names, strings.TrimPrefix(t.Name, "@"))
		}
	}
	if len(names) == 0 {
		return FeatureName(strings.TrimSuffix(p.Uri, ".feature"))
	}
	if extended {
		return FeatureName(names[len(names)-1])
	}
	return FeatureName(names[0])
}

func (r *runner) record(res scenarioResult, took time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results = append(r.results, res)
	expected := res.Result == Failed && r.baseline.lists(res.feature, res.Name, res.Example)
	if res.Result == Failed && !expected && r.opts.FailFast && r.stoppedBy == "" {
		r.stoppedBy = res.Name
	}
	if res.Result == NotRun && !res.cutShort && res.missing == "" && res.inconclusive == "" {
		// Never started: one line for all of them at the end.
		return
	}
	if res.Result == Skipped && (res.Message == notAskedFor || res.Message == notExampleAskedFor) {
		// One scenario asked for: the others are counted in the summary.
		return
	}
	label := map[Result]string{Passed: "PASS", Failed: "FAIL", Skipped: "SKIP", Unsupported: "UNSUPPORTED", NotRun: "NOT RUN"}[res.Result]
	if expected {
		// The baseline says it fails: it does not fail the run.
		label = "XFAIL"
	}
	if res.inconclusive != "" {
		label = "NO VERDICT"
	}
	name := res.Name
	if res.Example > 0 {
		name += fmt.Sprintf(" [example at line %d]", res.Example)
	}
	fmt.Fprintf(r.out, "%-11s %-30s %s (%s)\n", label, res.feature, name, took.Round(time.Millisecond))
	switch {
	case res.Result == NotRun && res.missing != "" && slices.Contains(r.missingSaid, res.missing):
		fmt.Fprintf(r.out, "    not run: as above, the suite's environment lacks what it needs\n")
	case res.Result == NotRun:
		r.missingSaid = append(r.missingSaid, res.missing)
		fmt.Fprintf(r.out, "    %s\n", res.Message)
	}
	if res.Result == Failed {
		fmt.Fprintf(r.out, "    step: %s\n    %s\n", res.Step, strings.ReplaceAll(res.Message, "\n", "\n    "))
		if res.ProxyLogs != "" {
			fmt.Fprintf(r.out, "    (the proxy's last %d log lines are in the report, under proxyLogs)\n", strings.Count(strings.TrimSuffix(res.ProxyLogs, "\n"), "\n")+1)
		}
		if res.Bundle != "" {
			fmt.Fprintf(r.out, "    evidence: %s (gwdiag conformance replay %s)\n", res.Bundle, res.Bundle)
		}
	}
}

func (r *runner) summary(rep *ConformanceReport) {
	s := rep.Summary
	fmt.Fprintf(r.out, "\n%d passed, %d failed, %d skipped, %d unsupported", s.Passed, s.Failed, s.Skipped, s.Unsupported)
	if s.NotRun > 0 {
		fmt.Fprintf(r.out, ", %d not run", s.NotRun)
	}
	if s.ExpectedFailures > 0 {
		fmt.Fprintf(r.out, ", %d expected failures (--baseline)", s.ExpectedFailures)
	}
	if s.Flaky > 0 {
		fmt.Fprintf(r.out, ", %d flaky", s.Flaky)
	}
	fmt.Fprintf(r.out, " in %s\n", rep.Duration)
	for _, f := range rep.Features {
		for _, sc := range f.Scenarios {
			switch sc.Result {
			case StaleBaseline:
				fmt.Fprintf(r.out, "STALE BASELINE: %q of %s passed: %s\n", sc.Name, f.Name, sc.Message)
			case Flaky:
				fmt.Fprintf(r.out, "FLAKY: %q of %s: %s\n", sc.Name, f.Name, firstLine(sc.Message))
			}
		}
	}
	for _, p := range rep.Profiles {
		fmt.Fprintf(r.out, "profile %s: core %s (%d passed, %d failed", p.Name, p.Core.Result, p.Core.Passed, p.Core.Failed)
		if p.Core.Skipped > 0 {
			fmt.Fprintf(r.out, ", %d skipped", p.Core.Skipped)
		}
		if p.Core.NotRun > 0 {
			fmt.Fprintf(r.out, ", %d not run", p.Core.NotRun)
		}
		fmt.Fprint(r.out, ")")
		if e := p.Extended; e.Result != Skipped {
			fmt.Fprintf(r.out, "; extended %s: supported %v, unsupported %v", e.Result, e.SupportedFeatures, e.UnsupportedFeatures)
			if len(e.FailedFeatures) > 0 {
				fmt.Fprintf(r.out, ", failed (claimed) %v", e.FailedFeatures)
			}
			if len(e.InterruptedFeatures) > 0 {
				fmt.Fprintf(r.out, ", interrupted %v", e.InterruptedFeatures)
			}
		}
		fmt.Fprintln(r.out)
	}
	for _, f := range rep.Features {
		kind := "core"
		if f.Extended {
			kind = "extended"
		}
		fmt.Fprintf(r.out, "  %-30s %-9s %s\n", f.Name, kind, f.Result)
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
