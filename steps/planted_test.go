package steps

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/gwdiag/gwdiag/golden/trace"
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
	if o.BundleDir == "" {
		o.BundleDir = filepath.Join(dir, "bundles")
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

// TestRecordedCheckScrubsCredentials: `gwdiag conformance check` on a
// capture of a proxy that does not redact: a violation quoting a value
// never quotes a credential the trace's own headers show.
func TestRecordedCheckScrubsCredentials(t *testing.T) {
	const secret = "sk-recorded-secret-0042"
	events, err := parseAll(
		`{"eventStart":null,"eventEnd":1,"severity":"info","message":{"type":"requestStarted"}}`,
		`{"eventStart":null,"eventEnd":2,"severity":"info","message":{"type":"requestSnapshot","stage":"initial request","requestState":{"request":{"method":"GET","uri":"`+secret+`","path":"/","pathAndQuery":"/","host":"h","scheme":"http","version":"HTTP/1.1","headers":{"authorization":"Bearer `+secret+`"},"startTime":"2026-01-02T10:00:00Z"},"source":{"address":"127.0.0.1","port":1,"rawAddress":"127.0.0.1","rawPort":1}}}}`,
		`{"eventStart":null,"eventEnd":3,"severity":"info","message":{"type":"requestFinished"}}`,
	)
	if err != nil {
		t.Fatal(err)
	}
	c := NewRecordedCheck(Implementation{})
	res := c.Add(RecordedTrace{Name: "t", Events: events})
	if res == nil || !strings.Contains(res.Message, "request.uri") {
		t.Fatalf("got %+v, want the trace failed on its request.uri", res)
	}
	if strings.Contains(res.Message, secret) || !strings.Contains(res.Message, "<redacted:") {
		t.Errorf("message %q: want the credential redacted", res.Message)
	}
}

func parseAll(lines ...string) ([]trace.Event, error) {
	var out []trace.Event
	for _, l := range lines {
		e, err := trace.Parse([]byte(l))
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// TestStepErrorsAreScrubbed: a step whose failure quotes what the proxy
// answered (here the echo backend's copy of the request's headers) says
// where the credentials were, never what they were: in the report, JUnit,
// Cucumber JSON and the progress view (which Run searches itself).
func TestStepErrorsAreScrubbed(t *testing.T) {
	feature := `@request-limits
Feature: quoting
  Scenario: a failure quotes the request's headers
    Given an echo backend "httpbin"
    And a route "echo" with path prefix "/" to backend "httpbin"
    When I send a GET request to "/headers"
    Then the response body is "something else"
`
	o := Options{Target: "inprocess", Features: fstest.MapFS{"quoting.feature": {Data: []byte(feature)}}, Output: io.Discard}
	plantCredentials(t, &o)
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	got := rep.Scenario("a failure quotes the request's headers")
	if len(got) != 1 || got[0].Result != Failed || !strings.Contains(got[0].Message, "Authorization") || !strings.Contains(got[0].Message, "<redacted:") {
		t.Fatalf("got %+v, want a failure quoting the headers with the credentials redacted", got)
	}
}
