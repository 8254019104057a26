package steps

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInProcessConformance runs every feature against the in-process
// reference proxy, claiming every extended feature: the reference must
// pass all of them.
func TestInProcessConformance(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	dir := t.TempDir()
	o := Options{
		Target:       "inprocess",
		AllFeatures:  true,
		Output:       &out,
		Report:       filepath.Join(dir, "report.yaml"),
		JUnit:        filepath.Join(dir, "junit.xml"),
		CucumberJSON: filepath.Join(dir, "cucumber.json"),
	}
	// Every request carries credentials; none may reach an output.
	plantCredentials(t, &o)
	rep, err := Run(context.Background(), o)
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed() {
		t.Errorf("the reference proxy failed %d scenarios", rep.Summary.Failed)
	}
	if rep.Summary.Passed == 0 || rep.Summary.Unsupported != 0 || rep.Summary.Skipped != 0 {
		t.Errorf("got %+v, want every scenario passed", rep.Summary)
	}
	if len(rep.Profiles) != 1 || rep.Profiles[0].Extended.Result != Passed || len(rep.Profiles[0].Extended.SupportedFeatures) != len(Profiles[0].ExtendedFeatures) {
		t.Errorf("profiles: got %+v, want standalone with every extended feature supported", rep.Profiles)
	}
	for _, f := range []string{"report.yaml", "junit.xml", "cucumber.json"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || len(b) == 0 {
			t.Errorf("output %s: %v, want a non-empty file", f, err)
		}
		// godog writes the files with its colours on (runner.go says why):
		// none of them may hold a terminal escape.
		if i := bytes.IndexByte(b, 0x1b); i >= 0 {
			t.Errorf("output %s holds a terminal escape at byte %d: %q", f, i, b[max(0, i-20):min(len(b), i+20)])
		}
	}
}
