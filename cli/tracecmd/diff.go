package tracecmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/cli/exitcode"
	"github.com/gwdiag/gwdiag/golden"
	"github.com/gwdiag/gwdiag/refproxy/trace"
)

// ErrDiffer is returned by `gwdiag trace diff` when the traces differ: exit 1.
var ErrDiffer = exitError{code: 1, err: errors.New("traces differ")}

func newDiffCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "diff A.jsonl[#REQUEST-ID] B.jsonl[#REQUEST-ID]",
		Short: "Compare two saved traces of one request, ignoring what differs from run to run",
		Long: `Diff reads two saved traces (JSON Lines or SSE captures; - reads one from
stdin) and prints an event-by-event, field-level difference. Only what differs
between two runs of the same request is ignored: times (compared by order and
shown as times), client ports, request ids, dates and pod names. A different
bind, listener, route or upstream endpoint is a difference, named first
("moved: bind 3000 -> 3001"). It exits 0 when they are equal, 1 when they
differ and 2 when a trace cannot be read.

A followed capture (gwdiag trace --follow --raw) holds many requests: FILE#ID
picks one by its request id. Two followed captures with as many requests are
compared request by request, in order.`,
		Example: `  # Compare a fresh trace with a golden one
  gwdiag trace --local --raw --port 3000 -- http://example.com/ > got.jsonl
  gwdiag trace diff golden/traces/basic.jsonl got.jsonl

  # Two requests of one followed capture
  gwdiag trace diff follow.jsonl#6f1c0e3a9b2d4c5e follow.jsonl#0a9b8c7d6e5f4a3b

  # Two followed captures, request by request
  gwdiag trace diff before.jsonl after.jsonl`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return exitcode.Usage(fmt.Errorf("diff takes two trace files, received %d", len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "-" && args[1] == "-" {
				return exitcode.Usagef("only one of the two traces can come from stdin (-)")
			}
			a, err := readRequests(args[0], cmd.InOrStdin())
			if err != nil {
				return exitError{code: 2, err: err}
			}
			b, err := readRequests(args[1], cmd.InOrStdin())
			if err != nil {
				return exitError{code: 2, err: err}
			}
			if len(a) != len(b) {
				return exitError{code: 2, err: fmt.Errorf("%s has %d requests and %s has %d: pick one of each with FILE#REQUEST-ID (%s: %s; %s: %s)",
					args[0], len(a), args[1], len(b), args[0], ids(a), args[1], ids(b))}
			}
			var out []string
			for i := range a {
				d := golden.Compare(a[i].events, b[i].events)
				if d == "" {
					continue
				}
				if len(a) > 1 || a[i].id != "" || b[i].id != "" {
					d = fmt.Sprintf("request %d (%s ↔ %s):\n%s", i+1, orDash(a[i].id), orDash(b[i].id), d)
				}
				out = append(out, d)
			}
			if len(out) == 0 {
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout(), strings.Join(out, "\n\n"))
			return ErrDiffer
		},
	}
}

// requestTrace is one request's events in a saved trace.
type requestTrace struct {
	id     string
	events []trace.Event
}

// readRequests reads FILE or FILE#ID (JSON Lines or an SSE capture; - is
// stdin): the file's requests split by request id (one, without id, for a
// one-shot trace), or the one named.
func readRequests(arg string, stdin io.Reader) ([]requestTrace, error) {
	file, want := arg, ""
	if _, err := os.Stat(arg); err != nil {
		if i := strings.LastIndexByte(arg, '#'); i > 0 {
			file, want = arg[:i], arg[i+1:]
		}
	}
	events, err := golden.Read(file, stdin)
	if err != nil {
		// A trace with bad lines would be compared without them, and the
		// diff would blame the proxy for the file's damage.
		return nil, err
	}
	order, byID := trace.ByRequest(events)
	if want != "" {
		evs, ok := byID[want]
		if !ok {
			return nil, fmt.Errorf("%s has no request %s (it has: %s)", file, want, strings.Join(order, ", "))
		}
		return []requestTrace{{id: want, events: evs}}, nil
	}
	out := make([]requestTrace, 0, len(order))
	for _, id := range order {
		out = append(out, requestTrace{id: id, events: byID[id]})
	}
	if len(out) == 0 {
		out = append(out, requestTrace{})
	}
	return out, nil
}

func ids(rs []requestTrace) string {
	var s []string
	for _, r := range rs {
		s = append(s, orDash(r.id))
	}
	return strings.Join(s, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// exitError carries an exit status for the root command.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// ExitCode returns the process exit status.
func (e exitError) ExitCode() int { return e.code }
