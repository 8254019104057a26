package reportview

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/gwdiag/gwdiag/steps"
)

// submissionName is the report's file name the way the Gateway API suite
// names submitted reports, <channel>-<version>-<mode>-report.yaml: the
// channel is extended when the run claimed extended features, core
// otherwise; the version is the implementation's (unversioned when not
// given); the mode is the target the proxy ran on.
func submissionName(r *steps.ConformanceReport) string {
	channel := "core"
	if r.Claims.AllFeatures || len(r.Claims.SupportedFeatures) > 0 {
		channel = "extended"
	}
	version := r.Implementation.Version
	if version == "" {
		version = "unversioned"
	}
	return fmt.Sprintf("%s-%s-%s-report.yaml", channel, fileSafe(version), fileSafe(r.Target))
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._+]+`)

func fileSafe(s string) string { return strings.Trim(unsafeChars.ReplaceAllString(s, "_"), "_.") }

// WriteSubmission writes into dir the report under SubmissionName and a
// README.md with the results table and the command that reproduces the
// run; it returns the report's path.
func WriteSubmission(dir string, r *steps.ConformanceReport, command string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("--report-dir: %w", err)
	}
	name := submissionName(r)
	path := filepath.Join(dir, name)
	if err := r.WriteFile(path); err != nil {
		return "", err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s: gwdiag conformance\n\n", r.Implementation.Name)
	fmt.Fprintf(&b, "Result: **%s** on the %s target, %s, features %s (%s), %s.\n\n", verdict(r), r.Target, producer(r),
		r.Producer.FeatureSet, r.Producer.FeatureDigest, when(r))
	if r.Implementation.URL != "" {
		fmt.Fprintf(&b, "Implementation: %s\n\n", r.Implementation.URL)
	}
	b.WriteString("## Results\n\n")
	b.WriteString(resultsTable(r))
	fmt.Fprintf(&b, "\nThe whole report: [%s](%s).\n\n", name, name)
	b.WriteString("## Reproduce\n\n")
	b.WriteString("With gwdiag " + strings.TrimPrefix(producer(r), "gwdiag ") + ":\n\n")
	fmt.Fprintf(&b, "```sh\n%s\n```\n", command)
	if err := os.WriteFile(filepath.Join(dir, "README.md"), b.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("--report-dir: %w", err)
	}
	return path, nil
}
