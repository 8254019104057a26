package steps

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

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
