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
	"strconv"
	"strings"
	"time"

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
		n.Message, _ = normalizeValue("", e.Message, freePorts).(map[string]any)
		out[i] = n
	}
	return out
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
func Diff(want, got []trace.Event) string { return diff(want, got, nil, nil) }

// Compare compares two captures of the same request, taken in two runs
// against the same proxy and config: only what differs between such runs
// is volatile (times, client ports, ids, dates, pod names). A different
// bind, listener, route key or upstream endpoint is a difference, named in
// a first line (`moved: bind 3000 -> 3001; upstream endpoint ...`). Times
// are compared by order only and shown as times. "" when they are equal.
func Compare(want, got []trace.Event) string {
	d := diff(normalize(want, false), normalize(got, false), want, got)
	if d == "" {
		return ""
	}
	if m := moved(want, got); m != "" {
		d = "moved: " + m + "\n" + d
	}
	return d
}

// diff is Diff; wantRaw and gotRaw, when set, are the events before
// normalising, whose times it shows.
func diff(want, got, wantRaw, gotRaw []trace.Event) string {
	at := func(raw []trace.Event, i int) string {
		if raw == nil {
			return ""
		}
		return " at " + micros(raw[i].EventEnd)
	}
	var b strings.Builder
	for _, p := range align(want, got) {
		switch {
		case p.g < 0:
			fmt.Fprintf(&b, "- event %d %s%s: missing\n", p.w+1, label(want[p.w]), at(wantRaw, p.w))
		case p.w < 0:
			fmt.Fprintf(&b, "+ event %d %s%s: unexpected\n", p.g+1, label(got[p.g]), at(gotRaw, p.g))
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
	return b.String()
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
