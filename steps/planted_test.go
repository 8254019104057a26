package steps

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/steps/stepdefs"
)

// plantCredentials makes the run of o plant credentials (Run then fails
// if any output holds one) and write every output it can, so that all are
// searched.
func plantCredentials(t *testing.T, o *Options) {
	t.Helper()
	o.PlantCredentials = true
	dir := t.TempDir()
	if o.Report == "" {
		o.Report = filepath.Join(dir, "report.yaml")
	}
	if o.JUnit == "" {
		o.JUnit = filepath.Join(dir, "junit.xml")
	}
	if o.CucumberJSON == "" {
		o.CucumberJSON = filepath.Join(dir, "cucumber.json")
	}
}

// TestCheckPlantedFindsALeak: the check a planting run makes of its
// outputs finds a planted credential in any of them, and names where.
func TestCheckPlantedFindsALeak(t *testing.T) {
	o := Options{}
	plantCredentials(t, &o)
	o = o.withDefaults()
	o.Secrets = stepdefs.NewSecrets()
	leak := o.Secrets.Plant("authorization")
	for _, p := range []string{o.Report, o.JUnit, o.CucumberJSON} {
		os.WriteFile(p, []byte("clean"), 0o644)
	}
	if err := checkPlanted(o, []byte("a clean progress view")); err != nil {
		t.Fatalf("clean outputs: %v", err)
	}
	for _, where := range []string{"progress", o.Report, o.JUnit, o.CucumberJSON} {
		progress := []byte("clean")
		if where == "progress" {
			progress = []byte("step failed: header is Bearer " + leak)
		} else {
			os.WriteFile(where, []byte(`<failure message="`+leak+`"/>`), 0o644)
		}
		err := checkPlanted(o, progress)
		if err == nil || !strings.Contains(err.Error(), "holds a credential the run planted") {
			t.Errorf("leak in %s: got %v, want it found", where, err)
		}
		if where != "progress" {
			os.WriteFile(where, []byte("clean"), 0o644)
		}
	}
}
