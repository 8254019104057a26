package tracecmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
	"github.com/gwdiag/gwdiag/cli/internal/scrub"
	"github.com/gwdiag/gwdiag/golden/trace/redact"
)

func newRedactCommand() *cobra.Command {
	var red scrub.Flags
	var output string
	cmd := &cobra.Command{
		Use:   "redact FILE|- [-o OUT]",
		Short: "Redact the credentials of a saved trace or capture",
		Long: `Redact copies a saved trace (JSON Lines, as gwdiag trace --raw prints it) or
an SSE capture (as curl -N -X POST .../debug/trace saves it; - reads stdin)
to OUT (-o; default stdout) with its credentials redacted, as every output of
gwdiag trace is (docs/redaction.md): the values of authorization,
proxy-authorization, cookie, set-cookie, x-api-key, api-key, x-goog-api-key,
x-amz-security-token and each --redact-header header in every event, of the
credential query parameters in a URL (key, api_key, access_token, ... and each
--redact-query-param; docs/redaction.md has the list), and the same
credentials wherever else the request's events show them, each replaced by
<redacted:fingerprint> (the auth scheme, cookie names and set-cookie
attributes kept). For a capture saved from a proxy that does not redact (the
real one today), before it is shared.

It reads the capture a line at a time, in bounded memory, whatever its
length. Everything else is copied byte for byte: the SSE framing and comments
(": ready"), and lines that are no trace event (a docs page's elided "...",
notes, curl's output), whose credential headers ("Authorization: ...") are
redacted all the same. A line longer than 16 MiB stops it.

A summary goes to stderr: events read, events redacted. Exits 0, 1 when the
capture cannot be read or OUT written (OUT is then removed), 2 on a usage
error. GWDIAG_REDACT_KEY sets the fingerprints' key: without it, each run
draws its own.`,
		Example: `  # A capture of the real proxy, ready to attach to a bug report
  gwdiag trace redact capture.sse -o capture.redacted.sse

  # Straight from the proxy, and one more header
  curl -sN -X POST http://127.0.0.1:15000/debug/trace | gwdiag trace redact - --redact-header x-tenant-token > trace.sse

  # The same fingerprints in two runs (to find one key in two captures)
  GWDIAG_REDACT_KEY=$(cat ~/.gwdiag-key) gwdiag trace redact monday.jsonl -o monday.redacted.jsonl`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return exitcode.Usage(fmt.Errorf("redact takes one trace file (- for stdin), received %d", len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := red.Check(); err != nil {
				return exitcode.Usage(err)
			}
			sc := red.Scrubber(cmd.ErrOrStderr())
			if sc == nil {
				return exitcode.Usagef("--redact=false and no --redact-header or --redact-query-param: nothing to redact")
			}
			return redactFile(cmd, sc.Redactor(), args[0], output)
		},
	}
	red.Add(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "", "write the redacted capture here (default stdout); written whole or not at all")
	_ = cmd.MarkFlagFilename("output")
	return cmd
}

// redactFile copies the capture in to out (or stdout) redacted, and says
// what it did on stderr.
func redactFile(cmd *cobra.Command, r *redact.Redactor, in, out string) error {
	var src io.Reader = cmd.InOrStdin()
	name := "stdin"
	if in != "-" {
		f, err := os.Open(in)
		if err != nil {
			return err
		}
		defer f.Close()
		src, name = f, in
		if out != "" {
			if fi, oerr := os.Stat(out); oerr == nil {
				if ii, ierr := f.Stat(); ierr == nil && os.SameFile(fi, ii) {
					return exitcode.Usagef("-o %s is the capture itself: write elsewhere, then move it", out)
				}
			}
		}
	}
	dst := cmd.OutOrStdout()
	var tmp *os.File
	if out != "" {
		// A temporary file beside OUT, renamed once whole: a copy cut
		// short by an error is never left looking like a redacted one.
		var err error
		if tmp, err = os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*"); err != nil {
			return err
		}
		defer os.Remove(tmp.Name())
		dst = tmp
	}
	stats, err := redact.NewStream(r).Capture(dst, src)
	if tmp != nil {
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), out)
		}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s read, %d redacted; %s (comments, blank, not events), %d changed\n",
		name, plural(stats.Events, "event"), stats.Redacted, plural(stats.Other, "other line"), stats.OtherChanged)
	var le *redact.LineError
	if errors.As(err, &le) {
		return fmt.Errorf("%s:%d: %w", name, le.Line, le.Err)
	}
	return err
}
