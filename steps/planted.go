package steps

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// A run with Options.PlantCredentials sends credentials made for it in
// every request, and then proves that nothing it wrote holds one: its
// progress view and every file it wrote (report, JUnit, Cucumber JSON, the
// failure bundles) are
// searched for the run's planted prefix, and a hit fails the run itself.
// Every test that plants gets the check; the suite's own tests plant in
// every run they make against a proxy (in process, as a process, in a
// container, in a cluster, and every fault).

// progressCopy keeps the progress view of a planting run, to search it.
type progressCopy struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (p *progressCopy) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.b.Write(b)
}

func (p *progressCopy) bytes() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Clone(p.b.Bytes())
}

// checkPlanted searches what the run of o wrote for the credentials it
// planted, and says where one was found.
func checkPlanted(o Options, progress []byte) error {
	prefix := []byte(o.Secrets.PlantPrefix())
	outputs := []struct {
		name string
		b    []byte
	}{{"the progress view", progress}}
	for _, p := range []string{o.Report, o.JUnit, o.CucumberJSON} {
		if p == "" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("checking %s for planted credentials: %w", p, err)
		}
		outputs = append(outputs, struct {
			name string
			b    []byte
		}{p, b})
	}
	if o.BundleDir != "" {
		// Every file of every failure bundle.
		err := filepath.WalkDir(o.BundleDir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			outputs = append(outputs, struct {
				name string
				b    []byte
			}{p, b})
			return err
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("checking the failure bundles for planted credentials: %w", err)
		}
	}
	for _, out := range outputs {
		if i := bytes.Index(out.b, prefix); i >= 0 {
			from, to := max(0, i-200), min(len(out.b), i+len(prefix)+40)
			return fmt.Errorf("suite defect: %s holds a credential the run planted, at byte %d: ...%s...", out.name, i, out.b[from:to])
		}
	}
	return nil
}
