package steps

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/agnivade/levenshtein"
	messages "github.com/cucumber/messages/go/v21"

	"github.com/gwdiag/gwdiag/features"
	"github.com/gwdiag/gwdiag/golden/trace/explain"
	"github.com/gwdiag/gwdiag/steps/targets"
)

// usageError is an option of the run that cannot work, found before the
// target starts, so that a typo costs no cluster and no container and
// never passes as a run of nothing: a selection (--tags, --run-scenario,
// --run-example, --skip-scenario) that names no scenario of the feature
// set or leaves none to run, profiles the target does not host, or an
// output that cannot be written.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// ExitCode is 2: a usage error, the command line must change
// (cli/internal/exitcode reads it).
func (*usageError) ExitCode() int { return 2 }

// selection is the profiles a run covers, its feature set and every
// scenario of it, once the selection has passed checkSelection.
func selection(o Options, tgt targets.Target) ([]ConformanceProfileName, fs.FS, []featurePickle, error) {
	profiles := o.profilesFor(tgt)
	if len(profiles) == 0 {
		return nil, nil, nil, &usageError{fmt.Sprintf("--profiles %s: the %s target hosts none of the profiles asked for; it hosts %s",
			profileList(o.Profiles), tgt.Name(), profileList(Options{}.profilesFor(tgt)))}
	}
	fsys := o.Features
	if fsys == nil {
		fsys = features.FS
	}
	all, err := featurePickles(fsys)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading the features: %w", err)
	}
	return profiles, fsys, all, checkSelection(all, o, profiles)
}

// ListedScenario is a scenario a run's selection picks.
type ListedScenario struct {
	Feature  FeatureName            `json:"feature"`
	Profile  ConformanceProfileName `json:"profile"`
	Extended bool                   `json:"extended"`
	Name     string                 `json:"name"`
	// Example is the line of its Examples row in File, 0 for a plain
	// scenario (what --run-example takes).
	Example int    `json:"example,omitempty"`
	File    string `json:"file"`
}

// List returns the scenarios a run with opts would run, in the order of
// the feature files, without starting the target; a selection Run would
// refuse, it refuses with the same error. What the run would then say of
// each (unsupported, skipped for want of a capability) is Run's to say.
func List(opts Options) ([]ListedScenario, error) {
	o := opts.withDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	tgt, err := newTarget(o)
	if err != nil {
		return nil, err
	}
	profiles, _, all, err := selection(o, tgt)
	if err != nil {
		return nil, err
	}
	profileTags := tagsFor("", profiles)
	var out []ListedScenario
	for _, s := range all {
		if !tagsMatch(o.Tags, s.tagNames()) || !tagsMatch(profileTags, s.tagNames()) || slices.Contains(o.SkipScenarios, s.Name) ||
			o.RunScenario != "" && s.Name != o.RunScenario || o.RunExample != 0 && s.example != o.RunExample {
			continue
		}
		f := featureOf(s.Pickle)
		p, _ := profileIn(f, profiles)
		out = append(out, ListedScenario{Feature: f, Profile: p, Extended: slices.Contains(s.tagNames(), tagExtended), Name: s.Name, Example: s.example, File: s.Uri})
	}
	return out, nil
}

// featurePickle is one scenario of the feature set as godog makes it (an
// Examples row of an outline is a scenario of its own), with the line of
// its Examples row (0 for a plain scenario).
type featurePickle struct {
	*messages.Pickle
	example int
}

// tagNames are the names of p's tags, "@" included.
func (p featurePickle) tagNames() []string {
	var out []string
	for _, t := range p.Tags {
		out = append(out, t.Name)
	}
	return out
}

// featurePickles parses every feature file of fsys, as godog finds them
// (Paths "."); a file that does not parse is an error naming it and the
// line.
func featurePickles(fsys fs.FS) ([]featurePickle, error) {
	var out []featurePickle
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".feature" {
			return err
		}
		src, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		ps, err := pickles(src, p)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		for _, e := range ps {
			out = append(out, featurePickle{e.pickle, e.line})
		}
		return nil
	})
	return out, err
}

// tagsMatch is godog's tag filter (v0.15, internal/tags): terms joined by
// "&&" must all hold, terms joined by "," one of them; "~" negates. expr
// has passed checkTags.
func tagsMatch(expr string, tags []string) bool {
	if expr == "" {
		return true
	}
	has := func(name string) bool {
		return slices.ContainsFunc(tags, func(t string) bool { return strings.ReplaceAll(t, "@", "") == name })
	}
	for _, clause := range tagClauses(expr) {
		ok := false
		for _, term := range clause {
			name := strings.ReplaceAll(term, "@", "")
			if negated, found := strings.CutPrefix(name, "~"); found {
				ok = ok || !has(negated)
			} else {
				ok = ok || has(name)
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// checkSelection refuses a selection that picks nothing of the feature
// set: tags no scenario carries, or whose scenarios are all outside the
// run's profiles; a scenario name no scenario has, or one the tags leave
// out; an example line that is no row of that scenario; a scenario to skip
// that does not exist. Each error says what the feature set has instead.
func checkSelection(all []featurePickle, o Options, profiles []ConformanceProfileName) error {
	profileTags := tagsFor("", profiles)
	var byTags, selected []featurePickle
	for _, s := range all {
		if tagsMatch(o.Tags, s.tagNames()) {
			byTags = append(byTags, s)
			if tagsMatch(profileTags, s.tagNames()) {
				selected = append(selected, s)
			}
		}
	}
	if o.RunExample != 0 && o.RunScenario == "" {
		return &usageError{fmt.Sprintf("--run-example %d goes with --run-scenario, the name of the Scenario Outline whose Examples row it is", o.RunExample)}
	}
	names := scenarioNames(all)
	for _, n := range o.SkipScenarios {
		if !slices.Contains(names, n) {
			return &usageError{fmt.Sprintf("--skip-scenario %q: no scenario has this name%s", n, suggestName(n, names))}
		}
	}
	if o.Tags != "" && len(byTags) == 0 {
		return &usageError{fmt.Sprintf("--tags %q selects no scenario%s", o.Tags, missingTags(o.Tags, all))}
	}
	if len(selected) == 0 {
		what := fmt.Sprintf("--tags %q selects", o.Tags)
		if o.Tags == "" {
			what = "the features hold"
		}
		if len(byTags) == 0 {
			return &usageError{what + " no scenario"}
		}
		return &usageError{fmt.Sprintf("%s %d %s, all in the %s profile; this run covers %s",
			what, len(byTags), explain.Plural(len(byTags), "scenario", "scenarios"), profileList(profilesOfPickles(byTags)), profileList(profiles))}
	}
	if o.RunScenario == "" {
		return nil
	}
	i := slices.IndexFunc(all, func(s featurePickle) bool { return s.Name == o.RunScenario })
	switch {
	case i < 0:
		return &usageError{fmt.Sprintf("--run-scenario %q: no scenario has this name%s", o.RunScenario, suggestName(o.RunScenario, names))}
	case !slices.ContainsFunc(byTags, func(s featurePickle) bool { return s.Name == o.RunScenario }):
		return &usageError{fmt.Sprintf("--run-scenario %q: --tags %q leaves it out (its tags: %s)", o.RunScenario, o.Tags, strings.Join(all[i].tagNames(), " "))}
	case !slices.ContainsFunc(selected, func(s featurePickle) bool { return s.Name == o.RunScenario }):
		return &usageError{fmt.Sprintf("--run-scenario %q is in the %s profile (%s); this run covers %s", o.RunScenario, profileList(profilesOfPickles(all[i:i+1])), all[i].Uri, profileList(profiles))}
	case slices.Contains(o.SkipScenarios, o.RunScenario):
		return &usageError{fmt.Sprintf("--run-scenario %q is also a --skip-scenario: nothing would run", o.RunScenario)}
	}
	if o.RunExample == 0 {
		return nil
	}
	var rows []string
	for _, s := range all {
		if s.Name == o.RunScenario && s.example > 0 {
			if s.example == o.RunExample {
				return nil
			}
			rows = append(rows, fmt.Sprint(s.example))
		}
	}
	if len(rows) == 0 {
		return &usageError{fmt.Sprintf("--run-example %d: scenario %q has no Examples rows (it is not a Scenario Outline)", o.RunExample, o.RunScenario)}
	}
	return &usageError{fmt.Sprintf("--run-example %d: scenario %q has no Examples row at that line; its rows are at lines %s", o.RunExample, o.RunScenario, strings.Join(rows, ", "))}
}

// missingTags names the tags of expr (not negated) that no scenario
// carries, with the closest one that exists, or the tags there are.
func missingTags(expr string, all []featurePickle) string {
	var known []string
	for _, s := range all {
		for _, t := range s.tagNames() {
			if !slices.Contains(known, t) {
				known = append(known, t)
			}
		}
	}
	slices.Sort(known)
	var out []string
	for _, clause := range tagClauses(expr) {
		for _, t := range clause {
			if strings.HasPrefix(t, "~") || slices.Contains(known, t) {
				continue
			}
			if c, ok := closest(t, known); ok {
				out = append(out, fmt.Sprintf("no scenario has the tag %s (did you mean %s?)", t, c))
				continue
			}
			var shown []string
			for _, k := range known {
				if !strings.HasPrefix(k, tagSpecPrefix) {
					shown = append(shown, k)
				}
			}
			out = append(out, fmt.Sprintf("no scenario has the tag %s; the features' tags are %s, and %s<part> for each part of the spec (features/README.md)",
				t, strings.Join(shown, " "), tagSpecPrefix))
		}
	}
	if len(out) == 0 {
		return ": every tag it names is on some scenario, but no scenario has the combination"
	}
	return ": " + strings.Join(out, "; ")
}

func scenarioNames(all []featurePickle) []string {
	var out []string
	for _, s := range all {
		if !slices.Contains(out, s.Name) {
			out = append(out, s.Name)
		}
	}
	return out
}

// suggestName is ` (did you mean "…"?)` for the scenario name closest to
// n; when none is close, how to list the names.
func suggestName(n string, names []string) string {
	if c, ok := closest(n, names); ok {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return "; gwdiag conformance run --list [--tags ...] shows the scenarios by name"
}

// closest is the word of known nearest to w: the same but for case, the
// only one that contains w, or the nearest by edit distance within a
// quarter of w's length (at least 2).
func closest(w string, known []string) (string, bool) {
	lw := strings.ToLower(w)
	var within []string
	for _, k := range known {
		lk := strings.ToLower(k)
		if lk == lw {
			return k, true
		}
		if strings.Contains(lk, lw) {
			within = append(within, k)
		}
	}
	if len(within) == 1 {
		return within[0], true
	}
	best, bestD := "", max(2, len(w)/4)+1
	for _, k := range known {
		if d := levenshtein.ComputeDistance(lw, strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best, best != ""
}

// profilesOfPickles are the profiles of the features of ps, in report
// order.
func profilesOfPickles(ps []featurePickle) []ConformanceProfileName {
	var out []ConformanceProfileName
	for _, p := range Profiles {
		if slices.ContainsFunc(ps, func(s featurePickle) bool {
			return slices.ContainsFunc(profilesOf(featureOf(s.Pickle)), func(q ConformanceProfile) bool { return q.Name == p.Name })
		}) {
			out = append(out, p.Name)
		}
	}
	return out
}

// profileList is "standalone" or "standalone and cluster".
func profileList(ps []ConformanceProfileName) string {
	var out []string
	for _, p := range ps {
		out = append(out, string(p))
	}
	return strings.Join(out, " and ")
}
