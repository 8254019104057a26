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
	fsys := o.Features
	if fsys == nil {
		fsys = features.FS
	}
	b.Feature, _ = fs.ReadFile(fsys, p.Uri)
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
		ProxyConfig: b.Meta.ProxyConfig, ConfigDumpError: b.Meta.ConfigDumpError, EvidenceError: b.Meta.EvidenceError, Attempt: run.attempt}
	dir := bundle.Dir(o.BundleDir, string(run.feature), p.Name, run.attempt)
	if err := bundle.Write(dir, b, o.Secrets); err != nil {
		fmt.Fprintf(r.out, "warning: the failure bundle of %q: %v\n", p.Name, err)
		return ""
	}
	return dir
}
