package steps

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// The JUnit document godog writes, with the <skipped> element it lacks
// (godog marks a skipped step with <error type="skipped">, and a scenario
// skipped after passing steps keeps status "passed").
type (
	junitSuites struct {
		XMLName xml.Name `xml:"testsuites"`
		Name    string   `xml:"name,attr"`
		junitCounts
		Suites []*junitSuite `xml:"testsuite"`
	}
	junitSuite struct {
		Name string `xml:"name,attr"`
		junitCounts
		Cases []*junitCase `xml:"testcase"`
	}
	// junitCounts are the attributes a suite and the document share.
	junitCounts struct {
		Tests    int    `xml:"tests,attr"`
		Skipped  int    `xml:"skipped,attr"`
		Failures int    `xml:"failures,attr"`
		Errors   int    `xml:"errors,attr"`
		Time     string `xml:"time,attr"`
	}
	junitCase struct {
		Name    string         `xml:"name,attr"`
		Status  string         `xml:"status,attr"`
		Time    string         `xml:"time,attr"`
		Skipped *junitMessage  `xml:"skipped,omitempty"`
		Failure *junitMessage  `xml:"failure,omitempty"`
		Errors  []junitMessage `xml:"error"`
		// SystemOut carries a failed scenario's bundle: its path, and as
		// an attachment (GitLab, Jenkins) for CI pages that link it.
		SystemOut string `xml:"system-out,omitempty"`
	}
	junitMessage struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr,omitempty"`
	}
)

// outlineSuffix is what godog adds to the names of a scenario outline's
// test cases (" #2").
var outlineSuffix = regexp.MustCompile(` #(\d+)$`)

// rewriteJUnit rewrites godog's JUnit file at path (none when "") so
// that each scenario not run (or failing as the baseline expects) is a
// skipped test case that says why, and the suites count it as skipped, not
// failed or errored; a flaky or stale scenario is a failure whatever its
// last attempt did, and a failed one carries its bundle.
func rewriteJUnit(path string, fsys fs.FS, results []scenarioResult) error {
	if path == "" {
		return nil
	}
	// Test cases are named by feature title (the suite) and scenario name.
	// An outline's examples share its name: its line tells them apart.
	type key struct {
		suite, name string
		example     int
	}
	notRun := map[key]string{}
	failed := map[key]scenarioResult{}
	titles := map[string]string{}
	files := map[string]string{} // feature title → its file
	for _, r := range results {
		if r.Result != NotRun && r.Result != ExpectedFailure && r.Result != StaleBaseline && r.Bundle == "" && r.Tries <= 1 {
			continue
		}
		title, ok := titles[r.File]
		if !ok {
			title = featureTitle(fsys, r.File)
			titles[r.File] = title
			files[title] = r.File
		}
		switch r.Result {
		case NotRun:
			notRun[key{title, r.Name, r.Example}] = r.Message
		case ExpectedFailure:
			notRun[key{title, r.Name, r.Example}] = "expected failure (--baseline): " + r.Message
		default:
			failed[key{title, r.Name, r.Example}] = r
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("junit: %s: %w", path, err)
	}
	doc.Skipped, doc.Failures, doc.Errors = 0, 0, 0
	for _, s := range doc.Suites {
		s.Skipped, s.Failures, s.Errors = 0, 0, 0
		lines := map[string][]int{} // outline name → its examples' lines
		for _, c := range s.Cases {
			k := key{s.Name, c.Name, 0}
			if m := outlineSuffix.FindStringSubmatch(c.Name); m != nil {
				k.name = strings.TrimSuffix(c.Name, m[0])
				if _, ok := lines[k.name]; !ok {
					src, _ := fs.ReadFile(fsys, files[s.Name])
					lines[k.name] = exampleLines(src, k.name)
				}
				if n, _ := strconv.Atoi(m[1]); n >= 1 && n <= len(lines[k.name]) {
					k.example = lines[k.name][n-1]
				}
			}
			msg, ok := notRun[k]
			// Of an outline's examples, those godog skipped; the others ran.
			if ok && (c.Status != "passed" || hasSkippedStep(c)) {
				*c = junitCase{Name: c.Name, Status: "skipped", Time: c.Time, Skipped: &junitMessage{Message: msg}}
			}
			if r, ok := failed[k]; ok {
				switch {
				case r.Tries > 1 && r.Result == Passed:
					// godog wrote the first try, inconclusive and so
					// skipped; the try that counts passed.
					*c = junitCase{Name: c.Name, Status: "passed", Time: c.Time, SystemOut: r.Message + "\n"}
				case r.Tries > 1 && r.Result == Unsupported:
					*c = junitCase{Name: c.Name, Status: "skipped", Time: c.Time, Skipped: &junitMessage{Message: r.Message}}
				case r.Tries > 1 && r.Result == Failed:
					*c = junitCase{Name: c.Name, Status: "failed", Time: c.Time,
						Failure: &junitMessage{Message: fmt.Sprintf("Step %s: %s (try %d)", r.Step, r.Message, r.Tries), Type: "failed"}}
				case r.Result != Failed:
					// Flaky or stale: the run's verdict, not the last
					// attempt's.
					c.Status, c.Failure = "failed", &junitMessage{Message: r.Message, Type: string(r.Result)}
				}
				if r.Bundle != "" {
					abs, _ := filepath.Abs(r.Bundle)
					c.SystemOut = fmt.Sprintf("gwdiag failure bundle: %s (gwdiag conformance replay %s)\n[[ATTACHMENT|%s]]\n", r.Bundle, r.Bundle, abs)
				}
			}
			switch {
			case c.Skipped != nil:
				s.Skipped++
			case c.Failure != nil:
				s.Failures++
			case c.Status == "undefined" || c.Status == "pending":
				s.Errors++
			}
		}
		doc.Skipped += s.Skipped
		doc.Failures += s.Failures
		doc.Errors += s.Errors
	}
	var out bytes.Buffer
	out.WriteString(xml.Header)
	enc := xml.NewEncoder(&out)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	return nil
}

func hasSkippedStep(c *junitCase) bool {
	for _, e := range c.Errors {
		if e.Type == "skipped" {
			return true
		}
	}
	return false
}

// featureTitle is the title of the feature file at uri, as godog names its
// JUnit test suite ("" when it cannot be read).
func featureTitle(fsys fs.FS, uri string) string {
	b, err := fs.ReadFile(fsys, uri)
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if t, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "Feature:"); ok {
			return strings.TrimSpace(t)
		}
	}
	return ""
}
