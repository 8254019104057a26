package reportview

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/steps/bundle"
)

// traceLine is one event of a failure's trace, as the report shows it.
type traceLine struct {
	N     int
	Label string
	// Failing marks the event the failure message names ("event 5: ...").
	Failing bool
}

// eventNumber finds the event a failure message names.
var eventNumber = regexp.MustCompile(`\bevent (\d+)\b`)

// bundleTrace reads the last trace stream of a failure bundle (the trace
// the failed step checked) as lines, the event the message names marked;
// the trace's file in the bundle, or "" when the bundle has none (or cannot
// be read where the report is rendered).
func bundleTrace(dir, message string) ([]traceLine, string) {
	if dir == "" {
		return nil, ""
	}
	_, files, err := bundle.Read(dir)
	if err != nil || len(files) == 0 {
		return nil, ""
	}
	f := files[len(files)-1]
	failing := 0
	if m := eventNumber.FindStringSubmatch(message); m != nil {
		failing, _ = strconv.Atoi(m[1])
	}
	var lines []traceLine
	sse.ReadCapture(bytes.NewReader(f.Data), f.Name, func(c sse.Captured) error {
		n := len(lines) + 1
		lines = append(lines, traceLine{N: n, Label: label(c.Event), Failing: n == failing})
		return nil
	})
	return lines, f.Name
}

// label is an event's type, with its stage where it has one.
func label(e trace.Event) string {
	if s := e.Stage(); s != "" {
		return fmt.Sprintf("%s (%s)", e.Type(), s)
	}
	return string(e.Type())
}

// markdownTrace is the trace as a code block, the failing event marked.
func markdownTrace(lines []traceLine) string {
	var b strings.Builder
	for _, l := range lines {
		mark := "  "
		if l.Failing {
			mark = "→ "
		}
		fmt.Fprintf(&b, "%s%2d %s\n", mark, l.N, l.Label)
	}
	return b.String()
}
