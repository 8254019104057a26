// Package golden keeps canonical JSONL traces, normalises their volatile fields
// (times, ports, addresses, dates, pod names) in one place, and shows a
// readable event-by-event, field-level diff between two traces.
package golden

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/gwdiag/gwdiag/refproxy/trace"
	"github.com/gwdiag/gwdiag/refproxy/trace/sse"
)

// Placeholders that replace volatile values.
const (
	Time = "<time>"
	Addr = "<addr>"
	Port = "<port>"
	Pod  = "<pod>"
	Date = "<date>"
	// RequestID replaces a followed request's id, in requestId and in
	// x-request-id headers.
	RequestID = "<request-id>"
)

var (
	timestampRe = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?`)
	// bracketed IPv6 or IPv4, with an optional port
	hostPortRe  = regexp.MustCompile(`(\[[0-9a-fA-F:]+\]|\b\d{1,3}(\.\d{1,3}){3}\b)(:\d+)?`)
	bareV6Re    = regexp.MustCompile(`^[0-9a-fA-F]*:[0-9a-fA-F:]*:[0-9a-fA-F:]*$`)
	localhostRe = regexp.MustCompile(`\blocalhost:\d+`)
	bindPortRe  = regexp.MustCompile(`/bind/\d+/`)
)

// volatile keys whose values are replaced wherever they appear.
var (
	portKeys = map[string]bool{"port": true, "rawPort": true}
	podKeys  = map[string]bool{"podName": true}
	dateKeys = map[string]bool{"date": true, "startTime": true}
	// durations of newer proxies' raw-response state
	durationKeys = map[string]bool{"requestProcessingDuration": true, "upstreamDuration": true}
)

// Normalize returns a copy of events with volatile values replaced by stable
// placeholders, keeping event order and relative timing. Microseconds differ
// from run to run, so times become positions: eventEnd is the event's index
// (it never decreases, so order is all it carries), and eventStart is the
// index of the last event that had ended when this one started; a timed
// event keeps which events it overlapped.
func Normalize(events []trace.Event) []trace.Event {
	out := make([]trace.Event, len(events))
	for i, e := range events {
		n := trace.Event{EventEnd: int64(i), Severity: e.Severity, Scope: slices.Clone(e.Scope)}
		if e.RequestID != "" {
			n.RequestID = RequestID
		}
		if e.EventStart != nil {
			s := int64(0)
			for j := range events {
				if events[j].EventEnd <= *e.EventStart {
					s = int64(j)
				}
			}
			n.EventStart = &s
		}
		n.Message, _ = normalizeValue("", e.Message).(map[string]any)
		out[i] = n
	}
	return out
}

func normalizeValue(key string, v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, val := range x {
			m[k] = normalizeValue(k, val)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, val := range x {
			s[i] = normalizeValue(key, val)
		}
		return s
	case float64:
		if portKeys[key] {
			return Port
		}
		if strings.HasSuffix(key, "Micros") {
			// a follow stream's timings
			return "<micros>"
		}
		return x
	case string:
		switch {
		case podKeys[key]:
			return Pod
		case strings.EqualFold(key, "date"):
			return Date
		case strings.EqualFold(key, "x-ratelimit-reset"):
			// seconds left in the window, whatever the run's timing
			return "<seconds>"
		case strings.EqualFold(key, "content-length"):
			// bodies echo addresses, so their length varies with them
			return "<length>"
		case dateKeys[key]:
			return Time
		case durationKeys[key]:
			return "<duration>"
		case strings.EqualFold(key, "x-request-id"):
			return RequestID
		}
		return normalizeString(x)
	}
	return v
}

func normalizeString(s string) string {
	s = timestampRe.ReplaceAllString(s, Time)
	s = bindPortRe.ReplaceAllString(s, "/bind/"+Port+"/")
	s = localhostRe.ReplaceAllString(s, "localhost:"+Port)
	if bareV6Re.MatchString(s) && strings.Count(s, ":") >= 2 {
		return Addr
	}
	return hostPortRe.ReplaceAllStringFunc(s, func(m string) string {
		if hostPortRe.FindStringSubmatch(m)[3] == "" {
			return Addr
		}
		return Addr + ":" + Port
	})
}

// Diff returns a readable event-by-event, field-level diff of two normalised
// traces; "" when they are equal. Events are paired by type and stage (a
// longest common subsequence), so one missing event shows as one line and
// not as a shift of every later event. Lines start with "-" for what only
// want has, "+" for what only got has and "~" for a paired event whose
// fields differ; event numbers are 1-based positions in want and got.
func Diff(want, got []trace.Event) string {
	var b strings.Builder
	for _, p := range align(want, got) {
		switch {
		case p.g < 0:
			fmt.Fprintf(&b, "- event %d %s: missing\n", p.w+1, label(want[p.w]))
		case p.w < 0:
			fmt.Fprintf(&b, "+ event %d %s: unexpected\n", p.g+1, label(got[p.g]))
		default:
			if d := fieldDiff(want[p.w], got[p.g], p); d != "" {
				pos := fmt.Sprint(p.w + 1)
				if p.w != p.g {
					pos = fmt.Sprintf("%d/%d", p.w+1, p.g+1)
				}
				fmt.Fprintf(&b, "~ event %s %s:\n%s\n", pos, label(want[p.w]), d)
			}
		}
	}
	return b.String()
}

// pair is an event of want (w) and of got (g); -1 when only one side has it.
type pair struct{ w, g int }

// align pairs events with equal labels along a longest common subsequence.
func align(want, got []trace.Event) []pair {
	n, m := len(want), len(got)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if label(want[i]) == label(got[j]) {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []pair
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && label(want[i]) == label(got[j]):
			out = append(out, pair{i, j})
			i++
			j++
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			out = append(out, pair{-1, j})
			j++
		default:
			out = append(out, pair{i, -1})
			i++
		}
	}
	return out
}

func fieldDiff(want, got trace.Event, at pair) string {
	w, g := flatten(want), flatten(got)
	// Normalised eventEnd is the position; when both are their positions a
	// difference only repeats what the alignment already shows.
	if want.EventEnd == int64(at.w) && got.EventEnd == int64(at.g) {
		delete(w, "eventEnd")
		delete(g, "eventEnd")
	}
	var diffs []string
	for _, k := range unionKeys(w, g) {
		wv, wok := w[k]
		gv, gok := g[k]
		switch {
		case !gok:
			diffs = append(diffs, fmt.Sprintf("  - %s: %s", k, wv))
		case !wok:
			diffs = append(diffs, fmt.Sprintf("  + %s: %s", k, gv))
		case wv != gv:
			diffs = append(diffs, fmt.Sprintf("  ~ %s: want %s, got %s", k, wv, gv))
		}
	}
	return strings.Join(diffs, "\n")
}

func label(e trace.Event) string {
	l := string(e.Type())
	if s := e.Stage(); s != "" {
		l += " (" + s + ")"
	}
	return l
}

// flatten maps every leaf of an event to its dotted path and JSON text.
func flatten(e trace.Event) map[string]string {
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if len(x) == 0 {
				out[prefix] = "{}"
			}
			for k, val := range x {
				walk(prefix+"."+k, val)
			}
		case []any:
			if len(x) == 0 {
				out[prefix] = "[]"
			}
			for i, val := range x {
				walk(fmt.Sprintf("%s[%d]", prefix, i), val)
			}
		default:
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			enc.Encode(x)
			out[prefix] = strings.TrimSpace(b.String())
		}
	}
	var start any
	if e.EventStart != nil {
		start = float64(*e.EventStart)
	}
	walk("eventStart", start)
	walk("eventEnd", float64(e.EventEnd))
	walk("severity", string(e.Severity))
	if len(e.Scope) > 0 {
		walk("scope", toAny(e.Scope))
	}
	walk("message", e.Message)
	return out
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func unionKeys(a, b map[string]string) []string {
	var k []string
	for x := range a {
		k = append(k, x)
	}
	for x := range b {
		if _, ok := a[x]; !ok {
			k = append(k, x)
		}
	}
	sort.Strings(k)
	return k
}

// Read reads a saved trace, JSON Lines or an SSE capture, from the file at
// path ("-" reads stdin) through the project's one capture reader
// (sse.ReadCapture). A trace with bad lines gives its valid events and a
// *sse.CaptureError naming each bad line.
func Read(path string, stdin io.Reader) ([]trace.Event, error) {
	var out []trace.Event
	err := sse.ReadCaptureFile(path, stdin, func(c sse.Captured) error {
		out = append(out, c.Event)
		return nil
	})
	return out, err
}

// WriteJSONL writes events as JSON Lines, one event per line.
func WriteJSONL(path string, events []trace.Event) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	// Placeholders such as <port> stay readable.
	enc.SetEscapeHTML(false)
	for _, e := range events {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
