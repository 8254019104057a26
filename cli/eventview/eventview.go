// Package eventview renders trace events for people: agctl's type labels and
// one-line summaries, an event as YAML, the request state of a snapshot, and
// the difference between two snapshots (what a policy changed).
package eventview

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gwdiag/gwdiag/refproxy/trace"
)

// Label returns agctl's label for an event's type.
func Label(ev trace.Event) string {
	switch ev.Type() {
	case trace.RequestStarted:
		return "Request Start"
	case trace.RequestSnapshot, trace.ResponseSnapshot:
		return "Snapshot"
	case trace.RouteSelection:
		return "Route"
	case trace.PolicySelection:
		return "Policies"
	case trace.BackendCallStart:
		return "Backend Start"
	case trace.BackendCallResult:
		return "Backend Result"
	case trace.RequestFinished:
		return "Request Done"
	case "bodySnapshot":
		return "Body"
	case "":
		return "(no type)"
	}
	return string(ev.Type())
}

// Summary returns the one-line summary agctl shows beside the label.
func Summary(ev trace.Event) string {
	m := ev.Message
	switch ev.Type() {
	case trace.RequestStarted:
		return "request started"
	case trace.RequestSnapshot:
		s := ev.Stage()
		if method, path := Request(ev); method != "" || path != "" {
			s += ": " + strings.TrimSpace(method+" "+path)
		}
		return s
	case trace.ResponseSnapshot:
		s := ev.Stage()
		if code, ok := ResponseCode(ev); ok {
			s += fmt.Sprintf(": %d", code)
		}
		return s
	case "bodySnapshot":
		return ev.Stage()
	case trace.RouteSelection:
		n := 0
		if ev, ok := m["evaluatedRoutes"].([]any); ok {
			n = len(ev)
		}
		route, _ := m["selectedRoute"].(string)
		if route == "" {
			return fmt.Sprintf("no route selected (%d evaluated)", n)
		}
		return fmt.Sprintf("selected %q (%d evaluated)", route, n)
	case trace.PolicySelection:
		var names []string
		if p, ok := m["effectivePolicy"].(map[string]any); ok {
			for k, v := range p {
				if v != nil {
					names = append(names, k)
				}
			}
		}
		sort.Strings(names)
		s := "effective policies: " + strings.Join(names, ", ")
		if len(names) == 0 {
			s = "no effective policies"
		}
		if phase, ok := m["phase"].(string); ok && phase != "" {
			s = phase + " " + s
		}
		return s
	case trace.BackendCallStart:
		t, _ := m["target"].(string)
		return "target=" + t
	case trace.BackendCallResult:
		s := "status=?"
		if st, ok := m["status"].(float64); ok {
			s = fmt.Sprintf("status=%d", int(st))
		}
		if e := m["error"]; e != nil {
			s += fmt.Sprintf(" error=%v", e)
		}
		return s
	case trace.RequestFinished:
		return "request finished"
	}
	return ""
}

// Request is the method and path (with query) of a request snapshot; empty
// for other events.
func Request(ev trace.Event) (method, path string) {
	req, ok := lookup(ev.Message, "requestState", "request").(map[string]any)
	if !ok {
		return "", ""
	}
	method, _ = req["method"].(string)
	path, _ = req["pathAndQuery"].(string)
	if path == "" {
		path, _ = req["path"].(string)
	}
	return method, path
}

// ResponseCode is the status of a response snapshot.
func ResponseCode(ev trace.Event) (int, bool) {
	code, ok := lookup(ev.Message, "requestState", "response", "code").(float64)
	return int(code), ok
}

func lookup(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

// YAML renders a JSON document (an event as received) as YAML.
func YAML(raw []byte) string {
	y, err := yaml.JSONToYAML(raw)
	if err != nil {
		return fmt.Sprintf("cannot render event as YAML: %v\n%s", err, raw)
	}
	return string(y)
}

// IsSnapshot reports whether ev carries a request or response state.
func IsSnapshot(ev trace.Event) bool {
	t := ev.Type()
	return t == trace.RequestSnapshot || t == trace.ResponseSnapshot
}

// SnapshotAt returns the index of the last snapshot at or before i, or -1.
func SnapshotAt(events []trace.Event, i int) int {
	for j := min(i, len(events)-1); j >= 0; j-- {
		if IsSnapshot(events[j]) {
			return j
		}
	}
	return -1
}

// SnapshotText renders a snapshot's stage and request state as YAML.
func SnapshotText(ev trace.Event) string {
	state := ev.Message["requestState"]
	b, err := json.Marshal(state)
	if err != nil {
		return fmt.Sprintf("cannot render snapshot: %v", err)
	}
	return fmt.Sprintf("%s (%s)\n", ev.Stage(), ev.Type()) + YAML(b)
}

// Diff returns the changes from prev's request state to cur's, one line per
// changed leaf: `+ path: value`, `- path: value`, `~ path: old -> new`. An
// empty slice means no change.
func Diff(prev, cur trace.Event) []string {
	a, b := map[string]string{}, map[string]string{}
	flatten("", prev.Message["requestState"], a)
	flatten("", cur.Message["requestState"], b)
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out []string
	for _, k := range sorted {
		va, ina := a[k]
		vb, inb := b[k]
		switch {
		case ina && !inb:
			out = append(out, fmt.Sprintf("- %s: %s", k, va))
		case !ina && inb:
			out = append(out, fmt.Sprintf("+ %s: %s", k, vb))
		case va != vb:
			out = append(out, fmt.Sprintf("~ %s: %s -> %s", k, va, vb))
		}
	}
	return out
}

// flatten records every leaf of v under its dotted path.
func flatten(prefix string, v any, out map[string]string) {
	switch t := v.(type) {
	case map[string]any:
		if len(t) == 0 && prefix != "" {
			out[prefix] = "{}"
		}
		for k, vv := range t {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			flatten(p, vv, out)
		}
	case nil:
		if prefix != "" {
			out[prefix] = "null"
		}
	default:
		b, _ := json.Marshal(t)
		out[prefix] = string(b)
	}
}

// DiffText renders the snapshot diff for the snapshot at index i of events
// against the snapshot before it.
func DiffText(events []trace.Event, i int) string {
	cur := SnapshotAt(events, i)
	if cur < 0 {
		return "no snapshot at or before this event"
	}
	prev := SnapshotAt(events, cur-1)
	head := fmt.Sprintf("%s (%s)", events[cur].Stage(), events[cur].Type())
	if prev < 0 {
		return head + "\nfirst snapshot: nothing to compare with\n"
	}
	lines := Diff(events[prev], events[cur])
	head += fmt.Sprintf(" vs %s", events[prev].Stage())
	if len(lines) == 0 {
		return head + "\nno changes\n"
	}
	return head + "\n" + strings.Join(lines, "\n") + "\n"
}
