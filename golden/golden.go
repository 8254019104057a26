// Package golden keeps canonical JSONL traces, normalises their volatile fields
// (times, ports, addresses, dates, pod names) in one place, and shows a
// readable event-by-event, field-level diff between two traces.
package golden

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
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
	hostPortRe  = regexp.MustCompile(`(\[[0-9a-fA-F]*:[0-9a-fA-F:]*\]|\b\d{1,3}(\.\d{1,3}){3}\b)(:\d+)?`)
	bareV6Re    = regexp.MustCompile(`^[0-9a-fA-F]*:[0-9a-fA-F:]*:[0-9a-fA-F:]*$`)
	localhostRe = regexp.MustCompile(`\blocalhost:\d+`)
	bindPortRe  = regexp.MustCompile(`/bind/\d+/`)
	// a rate limit's time to refill in a reason: "refills in 42 s"
	refillRe = regexp.MustCompile(`\b(refills|resets) in \d+ s\b`)
)

// volatile keys whose values are replaced wherever they appear.
var (
	portKeys = map[string]bool{"port": true, "rawPort": true}
	podKeys  = map[string]bool{"podName": true}
	dateKeys = map[string]bool{"date": true, "startTime": true}
	// durations of newer proxies' raw-response state
	durationKeys = map[string]bool{"requestProcessingDuration": true, "upstreamDuration": true}
)

// Normalize returns a copy of events with the values that differ between
// two runs of the suite replaced by stable placeholders: those Compare
// ignores (times, client ports, ids, dates) and also every address and port,
// since the suite's targets listen and start backends on free ports. Order
// and relative timing are kept: times become positions (eventEnd is the
// event's index, as it never decreases order is all it carries), and
// eventStart is the index of the last event that had ended when this one
// started, so a timed event keeps which events it overlapped. Golden
// traces are stored in this form.
func Normalize(events []trace.Event) []trace.Event { return normalize(events, true) }

// normalize is Normalize; freePorts also replaces the proxy's and the
// backends' addresses and ports, which only the suite's free ports make
// volatile.
func normalize(events []trace.Event, freePorts bool) []trace.Event {
	out := make([]trace.Event, len(events))
	ordered := slices.IsSortedFunc(events, func(a, b trace.Event) int { return cmp.Compare(a.EventEnd, b.EventEnd) })
	for i, e := range events {
		n := trace.Event{EventEnd: int64(i), Severity: e.Severity, Scope: slices.Clone(e.Scope)}
		if e.RequestID != "" {
			n.RequestID = RequestID
		}
		if e.EventStart != nil {
			s := int64(endedBefore(events, *e.EventStart, ordered))
			n.EventStart = &s
		}
		n.Message, _ = normalizeValue("", e.Message, freePorts).(map[string]any)
		out[i] = n
	}
	return out
}

// endedBefore is the index of the last event that ended at or before t (0
// when none did). Events in time order, as a proxy writes them, are
// searched in log time, so a long trace normalises in n log n; others are
// scanned.
func endedBefore(events []trace.Event, t int64, ordered bool) int {
	if ordered {
		return max(sort.Search(len(events), func(j int) bool { return events[j].EventEnd > t })-1, 0)
	}
	s := 0
	for j := range events {
		if events[j].EventEnd <= t {
			s = j
		}
	}
	return s
}

func normalizeValue(key string, v any, freePorts bool) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, val := range x {
			m[k] = normalizeValue(k, val, freePorts)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, val := range x {
			s[i] = normalizeValue(key, val, freePorts)
		}
		return s
	case float64:
		if portKeys[key] {
			// source.port and source.rawPort: the client's own port
			return Port
		}
		if strings.HasSuffix(key, "Micros") {
			// a follow stream's timings
			return "<micros>"
		}
		if key == "resetSeconds" {
			// a limit's time to refill, in a reason
			return "<seconds>"
		}
		return x
	case string:
		switch {
		case podKeys[key]:
			return Pod
		case strings.EqualFold(key, "date"):
			return Date
		case strings.EqualFold(key, "x-ratelimit-reset"), strings.EqualFold(key, "retry-after"):
			// seconds left in the window, whatever the run's timing
			return "<seconds>"
		case strings.EqualFold(key, "content-length"):
			// bodies echo the client's address and port, so their length
			// varies with them
			return "<length>"
		case dateKeys[key]:
			return Time
		case durationKeys[key]:
			return "<duration>"
		case strings.EqualFold(key, "x-request-id"):
			return RequestID
		}
		s := timestampRe.ReplaceAllString(x, Time)
		s = refillRe.ReplaceAllString(s, "$1 in <seconds> s")
		if freePorts {
			s = normalizeAddrs(s)
		}
		return s
	}
	return v
}

// normalizeAddrs replaces addresses and ports in s: route keys' bind
// ports, host:port pairs and bare IPv6 addresses.
func normalizeAddrs(s string) string {
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
// Traces too different to align (AlignError) show as that error, which is
// a difference too.
func Diff(want, got []trace.Event) string {
	d, err := diff(want, got, nil, nil)
	if err != nil {
		return "! " + err.Error() + "\n"
	}
	return d
}

// Compare compares two captures of the same request, taken in two runs
// against the same proxy and config: only what differs between such runs
// is volatile (times, client ports, ids, dates, pod names). A different
// bind, listener, route key or upstream endpoint is a difference, named in
// a first line (`moved: bind 3000 -> 3001; upstream endpoint ...`). Times
// are compared by order only and shown as times. "" when they are equal.
// Traces too different to align within MaxAlignCells give an *AlignError.
func Compare(want, got []trace.Event) (string, error) {
	d, err := diff(normalize(want, false), normalize(got, false), want, got)
	if d == "" || err != nil {
		return "", err
	}
	if m := moved(want, got); m != "" {
		d = "moved: " + m + "\n" + d
	}
	return d, nil
}

// diff is Diff; wantRaw and gotRaw, when set, are the events before
// normalising, whose times it shows.
func diff(want, got, wantRaw, gotRaw []trace.Event) (string, error) {
	at := func(raw []trace.Event, i int) string {
		if raw == nil {
			return ""
		}
		return " at " + micros(raw[i].EventEnd)
	}
	pairs, err := align(want, got)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range pairs {
		switch {
		case p.g < 0:
			fmt.Fprintf(&b, "- event %d %s%s: missing\n", p.w+1, label(want[p.w]), at(wantRaw, p.w))
		case p.w < 0:
			fmt.Fprintf(&b, "+ event %d %s%s: unexpected\n", p.g+1, label(got[p.g]), at(gotRaw, p.g))
		case samePositioned(want[p.w], got[p.g], p):
			// most events of two runs: no leaf by leaf comparison
		default:
			if d := fieldDiff(want[p.w], got[p.g], p, wantRaw, gotRaw); d != "" {
				pos := fmt.Sprint(p.w + 1)
				if p.w != p.g {
					pos = fmt.Sprintf("%d/%d", p.w+1, p.g+1)
				}
				when := ""
				if wantRaw != nil {
					when = " at " + micros(wantRaw[p.w].EventEnd)
					if g := micros(gotRaw[p.g].EventEnd); g != micros(wantRaw[p.w].EventEnd) {
						when += " / " + g
					}
				}
				fmt.Fprintf(&b, "~ event %s %s%s:\n%s\n", pos, label(want[p.w]), when, d)
			}
		}
	}
	return b.String(), nil
}

// micros shows a trace time (microseconds since the request was taken).
func micros(us int64) string { return (time.Duration(us) * time.Microsecond).String() }

// moved names, in words, where two traces of one request went differently:
// bind, listener or route key, and upstream endpoint.
func moved(want, got []trace.Event) string {
	var out []string
	wr, gr := first(want, trace.RouteSelection, "selectedRoute"), first(got, trace.RouteSelection, "selectedRoute")
	if wr != gr {
		wb, wl, wok := bindListener(wr)
		gb, gl, gok := bindListener(gr)
		switch {
		case wok && gok && wb != gb:
			out = append(out, "bind "+wb+" -> "+gb)
		case wok && gok && wl != gl:
			out = append(out, "listener "+wl+" -> "+gl)
		default:
			out = append(out, fmt.Sprintf("route %q -> %q", wr, gr))
		}
	}
	if wt, gt := first(want, trace.BackendCallStart, "target"), first(got, trace.BackendCallStart, "target"); wt != gt {
		out = append(out, fmt.Sprintf("upstream endpoint %q -> %q", wt, gt))
	}
	return strings.Join(out, "; ")
}

// first is a string field of the first event of type t.
func first(events []trace.Event, t trace.MessageType, field string) string {
	for _, e := range events {
		if e.Type() == t {
			s, _ := e.Message[field].(string)
			return s
		}
	}
	return ""
}

// bindListener reads the bind port and listener of a standalone route key
// (`default/default/bind/3000/listener0/default/httpbin`).
func bindListener(route string) (bind, listener string, ok bool) {
	parts := strings.Split(route, "/")
	for i, p := range parts {
		if p == "bind" && i+2 < len(parts) {
			return parts[i+1], parts[i+2], true
		}
	}
	return "", "", false
}

// pair is an event of want (w) and of got (g); -1 when only one side has it.
type pair struct{ w, g int }

// MaxAlignCells bounds the alignment of two traces: after their common
// first and last events (by type and stage), the events left on each side,
// multiplied, may not exceed it. Two runs of one request differ in a few
// events, so the usual pair aligns in time linear in its length; two
// unrelated long traces would need time and memory in the product of their
// lengths, and are refused instead.
const MaxAlignCells = 1 << 20

// AlignError says two traces are too different to align within
// MaxAlignCells.
type AlignError struct {
	// Prefix and Suffix are the common first and last events; Want and Got
	// the events left between them on each side.
	Prefix, Suffix, Want, Got int
}

func (e *AlignError) Error() string {
	return fmt.Sprintf("the traces are too different to align: after %d common first and %d common last events, %d and %d events are left, more than %d pairs to weigh; compare smaller parts (FILE#REQUEST-ID)",
		e.Prefix, e.Suffix, e.Want, e.Got, MaxAlignCells)
}

// align pairs events with equal labels along a longest common subsequence:
// the common first and last events pair one by one, and only the events
// between them are weighed against each other, within MaxAlignCells.
func align(want, got []trace.Event) ([]pair, error) {
	wl, gl := labels(want), labels(got)
	pre := 0
	for pre < len(wl) && pre < len(gl) && wl[pre] == gl[pre] {
		pre++
	}
	suf := 0
	for suf < len(wl)-pre && suf < len(gl)-pre && wl[len(wl)-1-suf] == gl[len(gl)-1-suf] {
		suf++
	}
	n, m := len(wl)-pre-suf, len(gl)-pre-suf
	if n*m > MaxAlignCells {
		return nil, &AlignError{Prefix: pre, Suffix: suf, Want: n, Got: m}
	}
	out := make([]pair, 0, max(len(wl), len(gl)))
	for i := range pre {
		out = append(out, pair{i, i})
	}
	for _, p := range lcs(wl[pre:pre+n], gl[pre:pre+m]) {
		if p.w >= 0 {
			p.w += pre
		}
		if p.g >= 0 {
			p.g += pre
		}
		out = append(out, p)
	}
	for k := suf; k > 0; k-- {
		out = append(out, pair{len(wl) - k, len(gl) - k})
	}
	return out, nil
}

// lcs pairs equal labels along a longest common subsequence, in a table
// of len(want)+1 × len(got)+1 cells.
func lcs(want, got []string) []pair {
	n, m := len(want), len(got)
	w := m + 1
	t := make([]int32, (n+1)*w)
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if want[i] == got[j] {
				t[i*w+j] = t[(i+1)*w+j+1] + 1
			} else {
				t[i*w+j] = max(t[(i+1)*w+j], t[i*w+j+1])
			}
		}
	}
	var out []pair
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && want[i] == got[j]:
			out = append(out, pair{i, j})
			i++
			j++
		case j < m && (i == n || t[i*w+j+1] >= t[(i+1)*w+j]):
			out = append(out, pair{-1, j})
			j++
		default:
			out = append(out, pair{i, -1})
			i++
		}
	}
	return out
}

// labels are the events' labels, computed once for the alignment.
func labels(events []trace.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = label(e)
	}
	return out
}

// samePositioned reports whether two paired events are equal but for
// their eventEnd, which is their position (as fieldDiff ignores it then).
func samePositioned(want, got trace.Event, at pair) bool {
	if want.EventEnd != int64(at.w) || got.EventEnd != int64(at.g) {
		return false
	}
	want.EventEnd, got.EventEnd = 0, 0
	return reflect.DeepEqual(want, got)
}

func fieldDiff(want, got trace.Event, at pair, wantRaw, gotRaw []trace.Event) string {
	w, g := flatten(want), flatten(got)
	// Normalised eventEnd is the position; when both are their positions a
	// difference only repeats what the alignment already shows.
	if want.EventEnd == int64(at.w) && got.EventEnd == int64(at.g) {
		delete(w, "eventEnd")
		delete(g, "eventEnd")
	}
	// eventStart is compared as the position of the event it followed and
	// shown, with times at hand, as the time it was.
	startAt := func(v string, raw []trace.Event, i int) string {
		if raw == nil || raw[i].EventStart == nil {
			return v
		}
		n, _ := strconv.Atoi(v)
		return fmt.Sprintf("%s (after event %d ended)", micros(*raw[i].EventStart), n+1)
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
		case wv != gv && k == "eventStart":
			diffs = append(diffs, fmt.Sprintf("  ~ eventStart: want %s, got %s", startAt(wv, wantRaw, at.w), startAt(gv, gotRaw, at.g)))
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
