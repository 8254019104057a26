package conformance

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
	"github.com/gwdiag/gwdiag/steps"
	"github.com/gwdiag/gwdiag/steps/reportview"
)

// newReportCommand is `gwdiag conformance report`: a report YAML made
// readable, as Markdown for a CI job page or as a self-contained HTML page;
// several reports side by side, a column each.
func newReportCommand() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "report FILE... --format markdown|html",
		Short: "Render a conformance report (YAML), or several side by side, as Markdown for a CI page or as an HTML page",
		Long: `Report reads the ConformanceReport YAML that 'conformance run --report' writes
and renders it: markdown is a summary fit for a CI job page (the results per
profile and each failure, folded), html a self-contained page (no script, no
external resource) with the feature × profile matrix and each failure's step,
what was wanted and what came. The output goes to stdout.

Given several reports (implementations, versions or targets), it renders one
matrix of them side by side instead: a column per report in the order given
(implementation and version, target, date, verdict, gwdiag version and feature
set), a row per profile's core result and per feature any of them ran (core
features first, then extended), each cell the feature's result in that report
(passed, failed, unsupported, skipped, not run, interrupted, or — when the
report lacks it) and, for an extended feature, whether the run claimed it.
Reports of different feature sets are flagged under the table: their results
are not comparable.`,
		Example: `  gwdiag conformance report conformance-report.yaml --format markdown >> "$GITHUB_STEP_SUMMARY"
  gwdiag conformance report conformance-report.yaml --format html > conformance-report.html
  gwdiag conformance report reports/*-report.yaml --format html > implementations.html`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return exitcode.Usagef("report needs a report file, or several to set side by side")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			render, ok := map[string]func(io.Writer, *steps.ConformanceReport) error{
				"markdown": reportview.Markdown, "html": reportview.HTML}[format]
			matrix := map[string]func(io.Writer, []*steps.ConformanceReport) error{
				"markdown": reportview.MatrixMarkdown, "html": reportview.MatrixHTML}[format]
			if !ok {
				return exitcode.Usagef("--format %q: want markdown or html", format)
			}
			var rs []*steps.ConformanceReport
			for _, path := range args {
				r, err := reportview.Read(path)
				if err != nil {
					return err
				}
				rs = append(rs, r)
			}
			if len(rs) == 1 {
				return render(cmd.OutOrStdout(), rs[0])
			}
			return matrix(cmd.OutOrStdout(), rs)
		},
	}
	cmd.Flags().StringVar(&format, "format", "markdown", "markdown or html")
	return cmd
}
