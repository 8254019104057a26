package steps

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/gwdiag/gwdiag/features"
	"github.com/gwdiag/gwdiag/steps/targets"
)

// checkBeforeStart returns the profiles a run covers and its feature
// set, or the usage error that keeps it from starting: profiles the target
// does not host, a selection that picks nothing (checkSelection), an
// output that cannot be written (checkOutputs). It runs before the target
// starts, so a typo costs no cluster.
func checkBeforeStart(o Options, tgt targets.Target) ([]ConformanceProfileName, fs.FS, error) {
	profiles, fsys, _, err := selection(o, tgt)
	if err != nil {
		return nil, nil, err
	}
	return profiles, fsys, checkOutputs(o)
}

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
	Feature  FeatureName
	Profile  ConformanceProfileName
	Extended bool
	Name     string
	// Example is the line of its Examples row in File, 0 for a plain
	// scenario (what --run-example takes).
	Example int
	File    string
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

// checkOutputs refuses, before the target starts, an output the run could
// not write at its end, when the scenarios have run: a report, JUnit or
// Cucumber JSON file in a folder that does not exist or cannot be
// written, or a path that is a folder; a bundle folder under something
// that is not a folder, or where nothing can be written.
func checkOutputs(o Options) error {
	for _, f := range []struct{ flag, path string }{{"--report", o.Report}, {"--junit", o.JUnit}, {"--cucumber-json", o.CucumberJSON}} {
		if f.path == "" {
			continue
		}
		if st, err := os.Stat(f.path); err == nil && st.IsDir() {
			return &usageError{fmt.Sprintf("%s %s is a folder: name the file to write", f.flag, f.path)}
		}
		if err := writable(filepath.Dir(f.path)); err != nil {
			return &usageError{fmt.Sprintf("%s %s: %v", f.flag, f.path, err)}
		}
	}
	if o.BundleDir == "" {
		return nil
	}
	// The folder is made at the first failure: what exists of it now
	// must be a folder that takes files.
	dir := o.BundleDir
	for {
		st, err := os.Stat(dir)
		if err == nil && !st.IsDir() {
			return &usageError{fmt.Sprintf("--bundle-dir %s: %s is not a folder", o.BundleDir, dir)}
		}
		missing := errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) // under a file
		if err == nil || !missing || filepath.Dir(dir) == dir {
			break
		}
		dir = filepath.Dir(dir)
	}
	if err := writable(dir); err != nil {
		return &usageError{fmt.Sprintf("--bundle-dir %s: %v", o.BundleDir, err)}
	}
	return nil
}

// writable says whether a file can be made in dir, by making one.
func writable(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("the folder %s does not exist", dir)
	case err != nil:
		return err
	case !st.IsDir():
		return fmt.Errorf("%s is not a folder", dir)
	}
	f, err := os.CreateTemp(dir, ".gwdiag-write-check-*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("nothing can be written in %s: %v", dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}
