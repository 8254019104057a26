package steps

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInProcessConformance runs every feature against the in-process
// reference proxy: the reference must pass all of them.
func TestInProcessConformance(t *testing.T) {
	var out strings.Builder
	dir := t.TempDir()
	rep, err := Run(context.Background(), Options{
		Target:       "inprocess",
		Output:       &out,
		Report:       filepath.Join(dir, "report.yaml"),
		JUnit:        filepath.Join(dir, "junit.xml"),
		CucumberJSON: filepath.Join(dir, "cucumber.json"),
	})
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed() {
		t.Errorf("the reference proxy failed %d scenarios", rep.Summary.Failed)
	}
	if rep.Summary.Passed == 0 {
		t.Errorf("no scenario passed: %+v", rep.Summary)
	}
	for _, f := range []string{"report.yaml", "junit.xml", "cucumber.json"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("output %s: %v, want a non-empty file", f, err)
		}
	}
}
