// Package golden keeps canonical JSONL traces, normalises their volatile fields
// (times, ports, addresses, dates, pod names) in one place, and shows a
// readable event-by-event, field-level diff between two traces.
package golden

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/gwdiag/gwdiag/refproxy/trace"
)

// Placeholders that replace volatile values.
const (
	Time = "<time>"
	Addr = "<addr>"
	Port = "<port>"
	Pod  = "<pod>"
	Date = "<date>"
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
// placeholders, keeping event order and relative timing: eventStart and
// eventEnd become ranks (0, 1, 2, ...) of the distinct times in the trace, so
// which event ended first, and whether an event started before another
// ended, survive while the microseconds do not.
func Normalize(events []trace.Event) []trace.Event {
	var times []int64
	for _, e := range events {
		times = append(times, e.EventEnd)
		if e.EventStart != nil {
			times = append(times, *e.EventStart)
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	times = slices.Compact(times)
	rank := func(t int64) int64 { i, _ := slices.BinarySearch(times, t); return int64(i) }

	out := make([]trace.Event, len(events))
	for i, e := range events {
		n := trace.Event{EventEnd: rank(e.EventEnd), Severity: e.Severity, Scope: slices.Clone(e.Scope)}
		if e.EventStart != nil {
			s := rank(*e.EventStart)
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
		return x
	case string:
		switch {
		case podKeys[key]:
			return Pod
		case strings.EqualFold(key, "date"):
			return Date
		case dateKeys[key]:
			return Time
		case durationKeys[key]:
			return "<duration>"
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
// traces; "" when they are equal. Lines start with "-" for what only want
// has and "+" for what only got has.
func Diff(want, got []trace.Event) string {
	var b strings.Builder
	for i := 0; i < max(len(want), len(got)); i++ {
		switch {
		case i >= len(got):
			fmt.Fprintf(&b, "- event %d %s: missing\n", i+1, label(want[i]))
			continue
		case i >= len(want):
			fmt.Fprintf(&b, "+ event %d %s: unexpected\n", i+1, label(got[i]))
			continue
		}
		w, g := flatten(want[i]), flatten(got[i])
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
		if len(diffs) > 0 {
			name := label(want[i])
			if l := label(got[i]); l != name {
				name += " / " + l
			}
			fmt.Fprintf(&b, "~ event %d %s:\n%s\n", i+1, name, strings.Join(diffs, "\n"))
		}
	}
	return b.String()
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
			b, _ := json.Marshal(x)
			out[prefix] = string(b)
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

// ReadJSONL reads a JSON Lines trace. Blank lines are skipped; a bad line is
// an error naming the file and line.
func ReadJSONL(path string) ([]trace.Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []trace.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		e, err := trace.Parse([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: not a JSON trace event: %v", path, n, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// WriteJSONL writes events as JSON Lines, one event per line.
func WriteJSONL(path string, events []trace.Event) error {
	var b strings.Builder
	for _, e := range events {
		line, err := json.Marshal(e)
		if err != nil {
			return err
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
