package steps

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gwdiag/gwdiag/steps/stepdefs"
)

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a run's
// progress view.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// plantCredentials makes the run of o send a credential of its own in
// every credential header of every request (Options.PlantCredentials) and
// write every output it can (report, JUnit, Cucumber JSON, progress);
// the check it returns fails the test if any byte of them holds one of
// those credentials. With a proxy that does not redact, traces show them
// in clear: the suite must not pass them on.
func plantCredentials(t *testing.T, o *Options) (check func(rep *ConformanceReport)) {
	t.Helper()
	o.PlantCredentials = true
	o.Secrets = stepdefs.NewSecrets()
	dir := t.TempDir()
	for _, p := range []*string{&o.Report, &o.JUnit, &o.CucumberJSON} {
		if *p == "" {
			*p = filepath.Join(dir, filepath.Base(dir)+"-"+map[*string]string{&o.Report: "report.yaml", &o.JUnit: "junit.xml", &o.CucumberJSON: "cucumber.json"}[p])
		}
	}
	progress := &syncBuffer{}
	if o.Output == nil {
		o.Output = io.Discard
	}
	o.Output = io.MultiWriter(o.Output, progress)
	prefix := o.Secrets.PlantPrefix()
	return func(rep *ConformanceReport) {
		t.Helper()
		outputs := map[string][]byte{"progress output": progress.Bytes()}
		for _, p := range []string{o.Report, o.JUnit, o.CucumberJSON} {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Errorf("output %s: %v", p, err)
			}
			outputs[p] = b
		}
		if rep != nil {
			p := filepath.Join(dir, "report-again.yaml")
			if err := rep.WriteFile(p); err == nil {
				outputs["the report as returned"], _ = os.ReadFile(p)
			}
		}
		planted := 0
		for name, b := range outputs {
			if i := bytes.Index(b, []byte(prefix)); i >= 0 {
				from, to := max(0, i-200), min(len(b), i+len(prefix)+60)
				t.Errorf("%s holds a credential the run planted (%s...):\n%s", name, prefix, b[from:to])
			}
			planted += strings.Count(string(b), "<redacted:")
		}
		t.Logf("planted credentials with prefix %s; outputs hold none (%d redacted values in them)", prefix, planted)
	}
}
