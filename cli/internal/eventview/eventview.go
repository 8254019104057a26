// Package eventview renders trace events for people: agctl's type labels and
// one-line summaries, an event as YAML, the request state of a snapshot, and
// the difference between two snapshots (what a policy changed).
package eventview

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gwdiag/gwdiag/golden/trace"
)

// kind is how one event type is shown: agctl's label and a summary.
type kind struct {
	label   string
	summary func(m map[string]any, ev trace.Event) string
}

// kinds are the event types of the real proxy (1.2 to main, REFERENCE.md)
// with agctl's labels and summaries, and `event`, a free message that
// agctl's own tests use.
var kinds = map[trace.MessageType]kind{
	trace.RequestStarted:      {"Request Start", func(map[string]any, trace.Event) string { return "request started" }},
	trace.RequestSnapshot:     {"Snapshot", requestSnapshot},
	trace.ResponseSnapshot:    {"Snapshot", responseSnapshot},
	"bodySnapshot":            {"Body Snapshot", bodySnapshot},
	trace.RouteSelection:      {"Route", routeSelection},
	trace.PolicySelection:     {"Policies", policySelection},
	"policy":                  {"Policy", policy},
	"policyEvent":             {"Policy Event", policyEvent},
	"cel":                     {"CEL", celResult},
	"traceSampling":           {"Tracing", func(m map[string]any, _ trace.Event) string { return text(m["decision"]) }},
	"authorizationResult":     {"Authz", authorization},
	trace.BackendCallStart:    {"Backend Start", func(m map[string]any, _ trace.Event) string { return "target=" + text(m["target"]) }},
	trace.BackendCallResult:   {"Backend Result", backendResult},
	"llmRouteResolved":        {"LLM Route", fields},
	"llmRequestDetected":      {"LLM Request", llmRequest},
	"llmStreamingTranslation": {"LLM Stream", fields},
	trace.RequestFinished:     {"Request Done", requestFinished},
	"event":                   {"Event", func(m map[string]any, _ trace.Event) string { return text(m["message"]) }},
}

// maxSummary is where agctl cuts a summary.
const maxSummary = 120

// Label returns agctl's label for an event's type; an unknown type is shown
// as itself.
func Label(ev trace.Event) string {
	if k, ok := kinds[ev.Type()]; ok {
		return k.label
	}
	if ev.Type() == "" {
		return "(no type)"
	}
	return string(ev.Type())
}

// Summary returns the one-line summary shown beside the label: agctl's for
// the types it knows, the event's fields for any other (so that a newer
// proxy's events are never blank), prefixed with the scope of a nested
// outbound call (`scope1 > scope2: `) and cut at 120 characters as agctl
// cuts it.
func Summary(ev trace.Event) string {
	m := ev.Message
	s := ""
	if k, ok := kinds[ev.Type()]; ok {
		s = k.summary(m, ev)
	}
	if s == "" {
		s = fields(m, ev)
	}
	if len(ev.Scope) > 0 {
		s = strings.Join(ev.Scope, " > ") + ": " + s
	}
	return cut(s, maxSummary)
}

// cut shortens s to n characters, marking the cut; it counts runes, so a
// cut never splits a character.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// text renders a message field for a summary: strings as they are, other
// values as compact JSON, nothing as "".
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// fields summarises any event from its fields, sorted by name: the
// summary of a type nobody here has seen yet.
func fields(m map[string]any, _ trace.Event) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if k != "type" && v != nil {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+text(m[k]))
	}
	return strings.Join(parts, " ")
}

func requestSnapshot(_ map[string]any, ev trace.Event) string {
	s := ev.Stage()
	if method, path := Request(ev); method != "" || path != "" {
		s += ": " + strings.TrimSpace(method+" "+path)
	}
	return s
}

func responseSnapshot(_ map[string]any, ev trace.Event) string {
	s := ev.Stage()
	if code, ok := ResponseCode(ev); ok {
		s += fmt.Sprintf(": %d", code)
	}
	return s
}

func bodySnapshot(_ map[string]any, ev trace.Event) string {
	return strings.TrimSpace(ev.Stage() + " body snapshot")
}

func routeSelection(m map[string]any, _ trace.Event) string {
	n := 0
	if ev, ok := m["evaluatedRoutes"].([]any); ok {
		n = len(ev)
	}
	route, _ := m["selectedRoute"].(string)
	if route == "" {
		return fmt.Sprintf("no route selected (%d evaluated)", n)
	}
	return fmt.Sprintf("selected %q (%d evaluated)", route, n)
}

func policySelection(m map[string]any, _ trace.Event) string {
	var names []string
	if p, ok := m["effectivePolicy"].(map[string]any); ok {
		for k, v := range p {
			if v != nil {
				names = append(names, k)
			}
		}
	}
	sort.Strings(names)
	list := strings.Join(names, ", ")
	if len(names) == 0 {
		list = "none"
	}
	s := "effective policies: " + list
	if phase, ok := m["phase"].(string); ok && phase != "" {
		s = phase + " " + s
	}
	return s
}

// policy is one policy's decision: skipped with a reason, or applied.
func policy(m map[string]any, _ trace.Event) string {
	kind := text(m["kind"])
	r, _ := m["result"].(map[string]any)
	switch text(r["type"]) {
	case "skip":
		return strings.TrimSpace(kind + " skipped: " + text(r["reason"]))
	case "apply":
		if d := text(r["details"]); d != "" {
			return kind + " applied: " + d
		}
		return kind + " applied"
	}
	return ""
}

func policyEvent(m map[string]any, _ trace.Event) string {
	d := text(m["details"])
	if d == "" {
		return text(m["kind"])
	}
	return text(m["kind"]) + ": " + d
}

func celResult(m map[string]any, _ trace.Event) string {
	s := text(m["expr"])
	if r := text(m["result"]); r != "" {
		s += " = " + r
	}
	if e := text(m["error"]); e != "" {
		s += " error: " + e
	}
	return s
}

// authorization counts the matched rules by mode, as agctl shows them:
// `allowed (1 allow, 0 deny, 0 require matches)`.
func authorization(m map[string]any, _ trace.Event) string {
	var allow, deny, require int
	rules, _ := m["rules"].([]any)
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		if matched, _ := rule["matched"].(bool); !matched {
			continue
		}
		switch strings.ToLower(text(rule["mode"])) {
		case "allow":
			allow++
		case "deny":
			deny++
		case "require":
			require++
		}
	}
	return fmt.Sprintf("%s (%d allow, %d deny, %d require matches)", text(m["result"]), allow, deny, require)
}

func backendResult(m map[string]any, _ trace.Event) string {
	s := "status=?"
	if st, ok := m["status"].(float64); ok {
		s = fmt.Sprintf("status=%d", int(st))
	}
	if e := m["error"]; e != nil {
		s += " error=" + text(e)
	}
	return s
}

// llmRequest names the provider, model and formats of an LLM request;
// 1.3 calls upstreamRouteType nativeFormat.
func llmRequest(m map[string]any, _ trace.Event) string {
	var parts []string
	for _, k := range []string{"provider", "requestModel"} {
		if v := text(m[k]); v != "" {
			parts = append(parts, v)
		}
	}
	in, up := text(m["inputFormat"]), text(m["upstreamRouteType"])
	if up == "" {
		up = text(m["nativeFormat"])
	}
	if in != "" || up != "" {
		parts = append(parts, strings.TrimSpace(in+" -> "+up))
	}
	if st, _ := m["streaming"].(bool); st {
		parts = append(parts, "streaming")
	}
	return strings.Join(parts, " ")
}

// requestFinished adds the status and error that 1.4 carries.
func requestFinished(m map[string]any, _ trace.Event) string {
	s := "request finished"
	if st, ok := m["status"].(float64); ok {
		s += fmt.Sprintf(" status=%d", int(st))
	}
	if e := m["error"]; e != nil {
		s += " error=" + text(e)
	}
	return s
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

// JSON renders a JSON document (an event as received) indented, keys in
// the order received.
func JSON(raw []byte) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return fmt.Sprintf("cannot render event as JSON: %v\n%s", err, raw)
	}
	return b.String() + "\n"
}

// isSnapshot reports whether ev carries a request or response state.
func isSnapshot(ev trace.Event) bool {
	t := ev.Type()
	return t == trace.RequestSnapshot || t == trace.ResponseSnapshot
}

// SnapshotAt returns the index of the last snapshot at or before i, or -1.
func SnapshotAt(events []trace.Event, i int) int {
	for j := min(i, len(events)-1); j >= 0; j-- {
		if isSnapshot(events[j]) {
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

// SnapshotJSON renders a snapshot's stage and request state as indented
// JSON.
func SnapshotJSON(ev trace.Event) string {
	b, err := json.MarshalIndent(ev.Message["requestState"], "", "  ")
	if err != nil {
		return fmt.Sprintf("cannot render snapshot: %v", err)
	}
	return fmt.Sprintf("%s (%s)\n%s\n", ev.Stage(), ev.Type(), b)
}

// diff returns the changes from prev's request state to cur's, one line per
// changed leaf: `+ path: value`, `- path: value`, `~ path: old -> new`. An
// empty slice means no change.
func diff(prev, cur trace.Event) []string {
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
	lines := diff(events[prev], events[cur])
	head += fmt.Sprintf(" vs %s", events[prev].Stage())
	if len(lines) == 0 {
		return head + "\nno changes\n"
	}
	return head + "\n" + strings.Join(lines, "\n") + "\n"
}
