package conformance

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/cli/exitcode"
	"github.com/gwdiag/gwdiag/steps"
	"github.com/gwdiag/gwdiag/steps/reportview"
)

// newReportCommand is `gwdiag conformance report`: a report YAML made
// readable, as Markdown for a CI job page or as a self-contained HTML page.
func newReportCommand() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "report FILE --format markdown|html",
		Short: "Render a conformance report (YAML) as Markdown for a CI page or as an HTML page",
		Long: `Report reads the ConformanceReport YAML that 'conformance run --report' writes
and renders it: markdown is a summary fit for a CI job page (the results per
profile and each failure, folded), html a self-contained page (no script, no
external resource) with the feature × profile matrix and each failure's step,
what was wanted and what came. The output goes to stdout.`,
		Example: `  gwdiag conformance report conformance-report.yaml --format markdown >> "$GITHUB_STEP_SUMMARY"
  gwdiag conformance report conformance-report.yaml --format html > conformance-report.html`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return exitcode.Usagef("report needs one report file, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			render, ok := map[string]func(io.Writer, *steps.ConformanceReport) error{
				"markdown": reportview.Markdown, "html": reportview.HTML}[format]
			if !ok {
				return exitcode.Usagef("--format %q: want markdown or html", format)
			}
			r, err := reportview.Read(args[0])
			if err != nil {
				return err
			}
			return render(cmd.OutOrStdout(), r)
		},
	}
	cmd.Flags().StringVar(&format, "format", "markdown", "markdown or html")
	return cmd
}
