package tracecmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
	"github.com/gwdiag/gwdiag/cli/internal/scrub"
	"github.com/gwdiag/gwdiag/golden"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
)

// errDiffer is returned by `gwdiag trace diff` when the traces differ: exit 1.
var errDiffer = exitError{code: 1, err: errors.New("traces differ")}

func newDiffCommand() *cobra.Command {
	var red scrub.Flags
	cmd := &cobra.Command{
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
compared request by request, in order.

Both traces are redacted before they are compared, as gwdiag trace redacts
(--redact, the default; --redact-header; docs/redaction.md), with one key:
a credential in both shows the same fingerprint and compares equal, two
different credentials differ without showing either.`,
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
			if err := red.Check(); err != nil {
				return exitcode.Usage(err)
			}
			sc := red.Scrubber(cmd.ErrOrStderr())
			return sc.Error(diffCaptures(cmd.Context(), cmd.OutOrStdout(), args[0], args[1], cmd.InOrStdin(), sc))
		},
	}
	red.Add(cmd.Flags())
	return cmd
}

// maxPending bounds the traces a diff by request id holds while it waits
// for their pair from the other capture.
const maxPending = sse.MaxOpenTraces

// capture is one side of a diff: the traces of FILE or FILE#ID, read as
// they complete by a goroutine.
type capture struct {
	arg, file, want string
	traces          chan sse.CapturedTrace
	err             error // set when traces is closed
	// seen counts the traces read (of the one wanted, with FILE#ID); ids
	// names the first ones, for messages.
	seen int
	ids  []string
}

// openCapture starts reading arg (FILE or FILE#ID; - is stdin), its
// traces redacted by events. The reading stops when ctx is done.
func openCapture(ctx context.Context, arg string, stdin io.Reader, events *scrub.Events) *capture {
	c := &capture{arg: arg, file: arg, traces: make(chan sse.CapturedTrace, 16)}
	if _, err := os.Stat(arg); err != nil {
		if i := strings.LastIndexByte(arg, '#'); i > 0 {
			c.file, c.want = arg[:i], arg[i+1:]
		}
	}
	var others []string // ids seen, when one is wanted
	go func() {
		defer close(c.traces)
		sent := 0
		c.err = sse.ReadTracesFile(c.file, stdin, func(t sse.CapturedTrace) error {
			if c.want != "" && t.ID != c.want {
				if len(others) < 10 {
					others = append(others, orDash(t.ID))
				}
				return nil
			}
			sent++
			events.Trace(&t)
			select {
			case c.traces <- t:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if c.err == nil && c.want != "" && sent == 0 {
			c.err = fmt.Errorf("%s has no request %s (it has: %s)", c.file, c.want, strings.Join(others, ", "))
		}
	}()
	return c
}

// next is the capture's next trace; false at its end.
func (c *capture) next() (sse.CapturedTrace, bool) {
	t, ok := <-c.traces
	if ok {
		c.seen++
		if len(c.ids) < 10 {
			c.ids = append(c.ids, orDash(t.ID))
		}
	}
	return t, ok
}

// decideAfter is how many traces of each capture a diff reads before it
// pairs them in order, when no request id of one is found in the other.
const decideAfter = 64

// pending is the traces of one capture that wait for their pair by
// request id.
type pending map[string]sse.CapturedTrace

// pair takes the trace of t's id from other, when other holds it; if not,
// t waits in p for its pair. ok false (no trace read) does nothing.
func (p pending) pair(t sse.CapturedTrace, ok bool, other pending) (sse.CapturedTrace, bool) {
	if !ok {
		return sse.CapturedTrace{}, false
	}
	if q, found := other[t.ID]; found {
		delete(other, t.ID)
		return q, true
	}
	p[t.ID] = t
	return sse.CapturedTrace{}, false
}

// diffCaptures compares two captures trace by trace, printing each pair
// that differs as soon as it is compared. Traces pair by request id when
// the captures share ids (a capture and a copy of it, in any order), else
// in order (two runs, whose ids differ; captures without ids): the first
// decideAfter traces of each tell which. Memory holds those, and at most
// maxPending traces waiting for their pair by id.
func diffCaptures(ctx context.Context, w io.Writer, argA, argB string, stdin io.Reader, sc *scrub.Scrubber) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a, b := openCapture(ctx, argA, stdin, sc.Events()), openCapture(ctx, argB, stdin, sc.Events())
	out := &diffPrinter{w: w}
	const (
		undecided = iota
		byID
		inOrder
	)
	mode := undecided
	var qa, qb []sse.CapturedTrace // in order, while undecided
	pendA, pendB := pending{}, pending{}
	uneven := false // in order, one capture ended before the other
	// compare prints x and y's differences; a failure to write them ends
	// the diff (exit status 2).
	compare := func(x, y sse.CapturedTrace) error {
		if err := out.compare(x, y); err != nil {
			return exitError{code: 2, err: err}
		}
		return nil
	}
	for !uneven {
		ta, okA := a.next()
		tb, okB := b.next()
		if !okA && !okB && mode != undecided {
			break
		}
		switch mode {
		case undecided:
			if okA {
				qa = append(qa, ta)
				if ta.ID != "" {
					pendA[ta.ID] = ta
				}
			}
			if okB {
				qb = append(qb, tb)
				if tb.ID != "" {
					pendB[tb.ID] = tb
				}
			}
			_, sharedA := pendB[ta.ID]
			_, sharedB := pendA[tb.ID]
			switch {
			case okA && ta.ID != "" && sharedA || okB && tb.ID != "" && sharedB:
				mode = byID
				for _, t := range qa {
					if p, ok := pendB[t.ID]; ok && t.ID != "" {
						delete(pendA, t.ID)
						delete(pendB, t.ID)
						if err := compare(t, p); err != nil {
							return err
						}
					}
				}
				qa, qb = nil, nil
			case len(qa) >= decideAfter || !okA || !okB:
				mode = inOrder
				clear(pendA)
				clear(pendB)
				for i := range min(len(qa), len(qb)) {
					if err := compare(qa[i], qb[i]); err != nil {
						return err
					}
				}
				uneven = len(qa) != len(qb)
				qa, qb = nil, nil
			}
		case inOrder:
			if okA != okB {
				uneven = true
				break
			}
			if err := compare(ta, tb); err != nil {
				return err
			}
		case byID:
			if p, ok := pendA.pair(ta, okA, pendB); ok {
				if err := compare(ta, p); err != nil {
					return err
				}
			}
			if p, ok := pendB.pair(tb, okB, pendA); ok {
				if err := compare(p, tb); err != nil {
					return err
				}
			}
			if len(pendA)+len(pendB) > maxPending {
				return exitError{code: 2, err: fmt.Errorf("more than %d requests of %s and %s wait for their pair: the captures hold different requests; pick one of each with FILE#REQUEST-ID", maxPending, argA, argB)}
			}
		}
	}
	if uneven {
		// Count what the longer capture has left, to say how many.
		for _, c := range []*capture{a, b} {
			for ok := true; ok; _, ok = c.next() {
			}
		}
	}
	cancel()
	for range a.traces {
	}
	for range b.traces {
	}
	for _, c := range []*capture{a, b} {
		if c.err != nil && !errors.Is(c.err, context.Canceled) {
			// A trace with bad lines was compared without them: the diff
			// above may blame the proxy for the file's damage.
			return exitError{code: 2, err: c.err}
		}
	}
	if uneven {
		return exitError{code: 2, err: fmt.Errorf("%s has %d requests and %s has %d: pick one of each with FILE#REQUEST-ID (%s: %s; %s: %s)",
			argA, a.seen, argB, b.seen, argA, a.names(), argB, b.names())}
	}
	for _, t := range byIndex(pendA) {
		out.only("-", argA, t)
	}
	for _, t := range byIndex(pendB) {
		out.only("+", argB, t)
	}
	if out.flush() {
		return errDiffer
	}
	return nil
}

// names lists the ids of the capture's first traces.
func (c *capture) names() string {
	s := strings.Join(c.ids, ", ")
	if c.seen > len(c.ids) {
		s += ", ..."
	}
	return s
}

// byIndex are the traces of m in capture order.
func byIndex(m map[string]sse.CapturedTrace) []sse.CapturedTrace {
	out := make([]sse.CapturedTrace, 0, len(m))
	for _, t := range m {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

// diffPrinter prints the differences of paired traces as they are found.
// The first is held until a second pair shows the captures hold several
// requests: a diff of two one-request traces has no per-request header.
type diffPrinter struct {
	w       io.Writer
	pairs   int
	differs bool
	// header and diff of the first pair, while held
	firstHeader, firstDiff string
}

// compare compares one pair of traces.
func (p *diffPrinter) compare(a, b sse.CapturedTrace) error {
	p.pairs++
	d, err := "", error(nil)
	if !sameBytes(a, b) {
		d, err = golden.Compare(a.TraceEvents(), b.TraceEvents())
	}
	if err != nil {
		return fmt.Errorf("request %d (%s ↔ %s): %w", p.pairs, where(a), where(b), err)
	}
	if p.pairs > 1 {
		p.flushFirst(true)
	}
	if d == "" {
		return nil
	}
	p.differs = true
	header := fmt.Sprintf("request %d (%s ↔ %s):\n", p.pairs, where(a), where(b))
	if p.pairs == 1 && a.ID == "" && b.ID == "" {
		p.firstHeader, p.firstDiff = header, d
		return nil
	}
	fmt.Fprintf(p.w, "%s%s\n", header, d)
	return nil
}

// sameBytes reports whether two traces are the same bytes event for
// event, so equal without normalising them: most requests of a capture and
// its copy.
func sameBytes(a, b sse.CapturedTrace) bool {
	if len(a.Events) != len(b.Events) {
		return false
	}
	for i := range a.Events {
		if !bytes.Equal(a.Events[i].Raw, b.Events[i].Raw) {
			return false
		}
	}
	return true
}

// flushFirst prints the held first difference, with its header or not.
func (p *diffPrinter) flushFirst(header bool) {
	if p.firstDiff == "" {
		return
	}
	if header {
		fmt.Fprint(p.w, p.firstHeader)
	}
	fmt.Fprintln(p.w, p.firstDiff)
	p.firstDiff = ""
}

// only reports a request only one capture holds.
func (p *diffPrinter) only(sign, arg string, t sse.CapturedTrace) {
	p.flushFirst(true)
	p.differs = true
	first, last := t.Lines()
	fmt.Fprintf(p.w, "%s request %s: only in %s (lines %d-%d)\n\n", sign, t.ID, arg, first, last)
}

// flush prints what is held and reports whether anything differed.
func (p *diffPrinter) flush() bool {
	p.flushFirst(p.pairs > 1)
	return p.differs
}

// where names a trace of a capture: its request id and lines.
func where(t sse.CapturedTrace) string {
	first, last := t.Lines()
	return fmt.Sprintf("%s, lines %d-%d", orDash(t.ID), first, last)
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
