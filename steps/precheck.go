package steps

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/gwdiag/gwdiag/steps/targets"
)

// checkBeforeStart returns the profiles a run covers and its feature
// set, or the usage error that keeps it from starting: profiles the target
// does not host, a selection that picks nothing (checkSelection), an
// output that cannot be written (checkOutputs). It runs before the target
// starts, so a typo costs no cluster.
// A baseline entry the features do not have is said on o.Output: it
// matches nothing (a scenario renamed since, or a typo).
func checkBeforeStart(o Options, tgt targets.Target, baseline *Baseline) ([]ConformanceProfileName, fs.FS, error) {
	profiles, fsys, all, err := selection(o, tgt)
	if err != nil {
		return nil, nil, err
	}
	for _, w := range baselineUnknown(baseline, all) {
		fmt.Fprintf(o.Output, "warning: --baseline %s: %s\n", o.Baseline, w)
	}
	return profiles, fsys, checkOutputs(o)
}

// baselineUnknown says of each entry of b that no scenario of the features
// matches, with the name it may mean.
func baselineUnknown(b *Baseline, all []featurePickle) []string {
	if b == nil {
		return nil
	}
	var out []string
	for _, e := range b.ExpectedFailures {
		var names []string
		found := false
		for _, s := range all {
			if featureOf(s.Pickle) != e.Feature {
				continue
			}
			names = append(names, s.Name)
			found = found || s.Name == e.Scenario && (e.Example == 0 || s.example == e.Example)
		}
		switch {
		case found:
		case len(names) == 0:
			out = append(out, fmt.Sprintf("feature %s has no scenario in these features; its entry %q matches nothing", e.Feature, e.Scenario))
		case e.Example != 0 && slices.Contains(names, e.Scenario):
			out = append(out, fmt.Sprintf("%q of %s has no Examples row at line %d; the entry matches nothing", e.Scenario, e.Feature, e.Example))
		default:
			out = append(out, fmt.Sprintf("%s has no scenario %q; the entry matches nothing%s", e.Feature, e.Scenario, suggestName(e.Scenario, names)))
		}
	}
	return out
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
