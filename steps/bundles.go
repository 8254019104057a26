package steps

import (
	"fmt"
	"io/fs"
	"time"

	"github.com/cucumber/godog"

	"github.com/gwdiag/gwdiag/features"
	"github.com/gwdiag/gwdiag/steps/bundle"
	"github.com/gwdiag/gwdiag/steps/stepdefs"
)

// writeBundle writes the failure bundle of a failed scenario under
// --bundle-dir and returns its folder; on an error it says so in the
// progress output and returns "" (the verdict stands without it).
func (r *runner) writeBundle(b *bundle.Bundle, run *scenarioRun, p *godog.Scenario, res scenarioResult, end stepdefs.Ending) string {
	o := r.opts
	b.Feature = r.featureSource(p)
	b.ProxyLog = end.ProxyLogs
	producer := o.Producer.Version
	if o.Producer.Revision != "" {
		producer += " (" + o.Producer.Revision + ")"
	}
	var rec RunOptions
	recordOptions(*o, &rec)
	rec.Profiles = r.profiles
	b.Meta = bundle.Meta{Scenario: p.Name, Feature: string(run.feature), FeatureFile: p.Uri, Result: string(res.Result),
		FailedStep: res.Step, Message: res.Message, Steps: run.steps, Target: r.target.Name(),
		Implementation: o.Implementation.Name, Gwdiag: producer, FeatureSet: features.Version + " " + features.Digest(),
		CommandLine: o.CommandLine, Options: rec, Started: run.started.UTC(), Duration: time.Since(run.started).Round(time.Millisecond).String(),
		ProxyConfig: b.Meta.ProxyConfig, ConfigDumpError: b.Meta.ConfigDumpError, EvidenceError: b.Meta.EvidenceError, Attempt: run.attempt, Example: res.Example}
	dir := bundle.Dir(o.BundleDir, string(run.feature), p.Name, b.Meta.Example, run.attempt)
	if err := bundle.Write(dir, b, o.Secrets); err != nil {
		fmt.Fprintf(r.out, "warning: the failure bundle of %q: %v\n", p.Name, err)
		return ""
	}
	return dir
}

// featureSource is the text of p's feature file (nil if unreadable).
func (r *runner) featureSource(p *godog.Scenario) []byte {
	fsys := r.opts.Features
	if fsys == nil {
		fsys = features.FS
	}
	src, _ := fs.ReadFile(fsys, p.Uri)
	return src
}

// exampleLine is the line of p's Examples row in its feature file (0 for
// a plain scenario, without reading the file).
func (r *runner) exampleLine(p *godog.Scenario) int {
	if len(p.AstNodeIds) < 2 {
		return 0
	}
	return exampleLine(r.featureSource(p), p)
}
