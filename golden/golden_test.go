package golden

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/golden/trace"
)

func ev(t *testing.T, s string) trace.Event {
	t.Helper()
	e, err := trace.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestNormalizeStrings(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"ipv4 with port", "127.0.0.1:38121", "<addr>:<port>"},
		{"ipv4 alone", "10.244.0.7", "<addr>"},
		{"ipv6 bracketed with port", "http://[::1]:3000/get", "http://<addr>:<port>/get"},
		{"bare ipv6", "::1", "<addr>"},
		{"timestamp", "at 2026-01-10T08:00:00.123456Z", "at <time>"},
		{"standalone route key", "default/default/bind/3000/listener0/default/httpbin", "default/default/bind/<port>/listener0/default/httpbin"},
		{"localhost", "localhost:40123", "localhost:<port>"},
		{"plain text", "rate limit exceeded", "rate limit exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := normalizeValue("", tt.in, true); got != tt.want {
				t.Errorf("normalizeValue(%q) for free ports: got %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestNormalizeKeepsOrderAndRelativeTiming(t *testing.T) {
	in := []trace.Event{
		ev(t, `{"eventStart":null,"eventEnd":17,"severity":"info","message":{"type":"requestStarted"}}`),
		ev(t, `{"eventStart":null,"eventEnd":40,"severity":"info","message":{"type":"requestSnapshot","stage":"initial request","requestState":{"source":{"address":"127.0.0.1","port":51234},"env":{"podName":"gw-7d9f"}}}}`),
		ev(t, `{"eventStart":35,"eventEnd":900,"severity":"success","message":{"type":"backendCallResult","status":200,"error":null}}`),
		ev(t, `{"eventStart":null,"eventEnd":900,"severity":"success","message":{"type":"requestFinished"}}`),
	}
	got := Normalize(in)
	wantEnds := []int64{0, 1, 2, 3}
	for i, e := range got {
		if e.EventEnd != wantEnds[i] {
			t.Errorf("event %d eventEnd: got %d, want %d", i+1, e.EventEnd, wantEnds[i])
		}
	}
	if got[2].EventStart == nil || *got[2].EventStart != 0 {
		t.Errorf("backendCallResult eventStart: got %v, want 0 (it started after event 0 ended, before event 1)", got[2].EventStart)
	}
	state := got[1].Message["requestState"].(map[string]any)
	if p := state["source"].(map[string]any)["port"]; p != Port {
		t.Errorf("source.port: got %v, want %q", p, Port)
	}
	if p := state["env"].(map[string]any)["podName"]; p != Pod {
		t.Errorf("env.podName: got %v, want %q", p, Pod)
	}
	if in[1].EventEnd != 40 {
		t.Errorf("Normalize changed its input: eventEnd %d", in[1].EventEnd)
	}
}

func TestDiff(t *testing.T) {
	a := []trace.Event{
		ev(t, `{"eventStart":null,"eventEnd":0,"severity":"info","message":{"type":"requestStarted"}}`),
		ev(t, `{"eventStart":null,"eventEnd":1,"severity":"info","message":{"type":"routeSelection","selectedRoute":"a","evaluatedRoutes":["a"]}}`),
	}
	b := []trace.Event{
		ev(t, `{"eventStart":null,"eventEnd":0,"severity":"info","message":{"type":"requestStarted"}}`),
		ev(t, `{"eventStart":null,"eventEnd":1,"severity":"error","message":{"type":"routeSelection","selectedRoute":"b","evaluatedRoutes":["a"],"extra":1}}`),
		ev(t, `{"eventStart":null,"eventEnd":2,"severity":"info","message":{"type":"requestFinished"}}`),
	}
	if d := Diff(a, a); d != "" {
		t.Errorf("Diff of a trace with itself: got %q, want empty", d)
	}
	d := Diff(a, b)
	for _, want := range []string{
		`~ event 2 routeSelection:`,
		`~ message.selectedRoute: want "a", got "b"`,
		`~ severity: want "info", got "error"`,
		`+ message.extra: 1`,
		`+ event 3 requestFinished: unexpected`,
	} {
		if !strings.Contains(d, want) {
			t.Errorf("Diff lacks %q; got:\n%s", want, d)
		}
	}
	if d := Diff(b, a); !strings.Contains(d, "- event 3 requestFinished: missing") {
		t.Errorf("Diff(b, a) lacks the missing event; got:\n%s", d)
	}
	// An event missing in the middle is one line, not a shift of the rest.
	c := []trace.Event{a[0], b[2]}
	d = Diff(b[:1:1], nil)
	if d != "- event 1 requestStarted: missing\n" {
		t.Errorf("Diff against nothing: got %q", d)
	}
	d = Diff([]trace.Event{a[0], a[1], b[2]}, c)
	if d != "- event 2 routeSelection: missing\n" {
		t.Errorf("Diff with a middle event missing: got %q, want only that event", d)
	}
}

func TestReadAndWrite(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	os.WriteFile(good, []byte(`{"eventStart":null,"eventEnd":1,"severity":"info","message":{"type":"requestStarted"}}`+"\n\n"), 0o644)
	events, err := Read(good, nil)
	if err != nil || len(events) != 1 {
		t.Fatalf("Read: got %d events, %v; want 1, nil", len(events), err)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{}\nnot json\n"), 0o644)
	if got, err := Read(bad, nil); len(got) != 1 || err == nil || !strings.Contains(err.Error(), "bad.jsonl:2:") {
		t.Errorf("Read of a bad line: got %d events, %v; want the good one and an error naming bad.jsonl:2", len(got), err)
	}
	sse := ": ready\n\ndata: {\"eventEnd\":1,\"message\":{\"type\":\"requestStarted\"}}\n\n: keepalive\n\n"
	if got, err := Read("-", strings.NewReader(sse)); err != nil || len(got) != 1 || got[0].Type() != trace.RequestStarted {
		t.Errorf("Read of an SSE capture on stdin: %+v, %v; want one requestStarted", got, err)
	}
	round := filepath.Join(dir, "round.jsonl")
	if err := WriteJSONL(round, events); err != nil {
		t.Fatal(err)
	}
	again, err := Read(round, nil)
	if err != nil || Diff(events, again) != "" {
		t.Errorf("WriteJSONL round trip: %v, diff %q", err, Diff(events, again))
	}
}

// TestCompare: two captures of one request differ only in what two runs
// change (times, client ports, ids, dates, pod names); anything else is a
// difference the comparison names. The bases are the real proxy's traces.
func TestCompare(t *testing.T) {
	const dir = "trace/sse/testdata/agentgateway/"
	read := func(file string) ([]trace.Event, string) {
		t.Helper()
		raw, err := os.ReadFile(dir + file)
		if err != nil {
			t.Fatal(err)
		}
		events, err := Read(dir+file, nil)
		if err != nil {
			t.Fatal(err)
		}
		return events, string(raw)
	}
	standalone, standaloneRaw := read("standalone-12x.deelided.jsonl")
	cluster, clusterRaw := read("k8s-12x.docs.jsonl")
	// edit is a trace with every old replaced by new; old must occur.
	edit := func(raw string, pairs ...string) []trace.Event {
		t.Helper()
		for i := 0; i < len(pairs); i += 2 {
			if !strings.Contains(raw, pairs[i]) {
				t.Fatalf("the base trace has no %q", pairs[i])
			}
			raw = strings.ReplaceAll(raw, pairs[i], pairs[i+1])
		}
		out, err := Read("-", strings.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	later := func(events []trace.Event) []trace.Event {
		out := slices.Clone(events)
		for i := range out {
			out[i].EventEnd += 1000
			if out[i].EventStart != nil {
				s := *out[i].EventStart + 1000
				out[i].EventStart = &s
			}
		}
		return out
	}
	tests := []struct {
		name      string
		want, got []trace.Event
		diff      []string // nil: equal
	}{
		{"itself", standalone, standalone, nil},
		{"another client port", cluster, edit(clusterRaw, `"port":33006`, `"port":40001`, `"rawPort":33006`, `"rawPort":40001`), nil},
		{"other times", cluster, later(cluster), nil},
		{"another date and start time", cluster, edit(clusterRaw, "16:05:22", "17:00:01"), nil},
		{"another pod of the gateway", cluster, edit(clusterRaw, "784ffbfc76-pcpqk", "784ffbfc76-zzzzz"), nil},
		{"another bind", standalone, edit(standaloneRaw, "bind/3000", "bind/3001"), []string{
			"moved: bind 3000 -> 3001\n",
			`~ event 3 routeSelection at 100µs:`,
			`~ message.selectedRoute: want "default/default/bind/3000/listener0/default/httpbin", got "default/default/bind/3001/listener0/default/httpbin"`}},
		{"another listener", standalone, edit(standaloneRaw, "listener0", "listener1"), []string{"moved: listener listener0 -> listener1\n"}},
		{"another route", cluster, edit(clusterRaw, `"selectedRoute":"httpbin/httpbin.00.http"`, `"selectedRoute":"httpbin/httpbin.01.http"`), []string{
			`moved: route "httpbin/httpbin.00.http" -> "httpbin/httpbin.01.http"`}},
		{"another upstream port", standalone, edit(standaloneRaw, "127.0.0.1:8000", "127.0.0.1:8001"), []string{
			`moved: upstream endpoint "127.0.0.1:8000" -> "127.0.0.1:8001"`,
			`~ event 5 backendCallStart at 159µs:`,
			`~ message.target: want "127.0.0.1:8000", got "127.0.0.1:8001"`}},
		{"another upstream pod", cluster, edit(clusterRaw, "10.244.0.7:8080", "10.244.0.9:8080"), []string{
			`moved: upstream endpoint "10.244.0.7:8080" -> "10.244.0.9:8080"`}},
		{"a missing event shown with its time", standalone, slices.Delete(slices.Clone(standalone), 3, 4), []string{"- event 4 policySelection at 117µs: missing"}},
		{"a call that started after a later event", standalone, func() []trace.Event {
			out := slices.Clone(standalone)
			s := int64(9000)
			out[5].EventStart = &s
			return out
		}(), []string{"~ eventStart: want 157µs (after event 4 ended), got 9ms (after event 5 ended)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Compare(tt.want, tt.got)
			if err != nil {
				t.Fatal(err)
			}
			if tt.diff == nil {
				if d != "" {
					t.Errorf("got a difference, want none:\n%s", d)
				}
				return
			}
			for _, w := range tt.diff {
				if !strings.Contains(d, w) {
					t.Errorf("lacks %q; got:\n%s", w, d)
				}
			}
		})
	}
}

// longTrace is a trace of n events whose labels repeat with period kinds.
func longTrace(t *testing.T, n, kinds int) []trace.Event {
	t.Helper()
	out := make([]trace.Event, n)
	for i := range out {
		out[i] = ev(t, fmt.Sprintf(`{"eventStart":null,"eventEnd":%d,"severity":"info","message":{"type":"kind%d","n":%d}}`, i+1, i%kinds, i))
	}
	return out
}

// TestCompareBounded: long traces of one shape compare in linear time and
// name the one changed or missing event; traces too different to align
// are refused with an *AlignError instead of a table of n×m cells.
func TestCompareBounded(t *testing.T) {
	const n = 20_000
	base := longTrace(t, n, 7)
	changed := slices.Clone(base)
	changed[n/2] = ev(t, fmt.Sprintf(`{"eventStart":null,"eventEnd":%d,"severity":"info","message":{"type":"kind%d","n":-1}}`, n/2+1, (n/2)%7))
	missing := slices.Delete(slices.Clone(base), 1000, 1001)
	unrelated := longTrace(t, 5000, 3)
	tests := []struct {
		name    string
		want    []trace.Event
		got     []trace.Event
		diff    string
		wantErr bool
	}{
		{"equal", base, base, "", false},
		{"one changed field", base, changed, fmt.Sprintf("~ event %d kind%d at 10.001ms:\n  ~ message.n: want %d, got -1\n", n/2+1, (n/2)%7, n/2), false},
		{"one missing event", base, missing, "- event 1001 kind6 at 1.001ms: missing", false},
		{"too different", unrelated, longTrace(t, 5000, 5)[1:], "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Compare(tt.want, tt.got)
			var ae *AlignError
			if tt.wantErr != errors.As(err, &ae) {
				t.Fatalf("got error %v, want an *AlignError: %v", err, tt.wantErr)
			}
			if !strings.Contains(d, tt.diff) || (tt.diff == "") != (d == "") {
				t.Errorf("got:\n%s\nwant it to hold:\n%s", d, tt.diff)
			}
		})
	}
}

// TestAlignMatchesPlainLCS proves the alignment's fast path (common first
// and last events paired one by one, the table only for the middle)
// against the plain longest common subsequence over whole traces: on
// random traces of few event kinds both pair as many events, and the
// pairs are in order with equal labels.
func TestAlignMatchesPlainLCS(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 1))
	kinds := []string{"requestStarted", "routeSelection", "policySelection", "backendCallStart", "requestFinished"}
	random := func(n int) []trace.Event {
		out := make([]trace.Event, n)
		for i := range out {
			out[i] = trace.Event{EventEnd: int64(i), Message: map[string]any{"type": kinds[rng.IntN(len(kinds))]}}
		}
		return out
	}
	matched := func(ps []pair) int {
		n := 0
		for _, p := range ps {
			if p.w >= 0 && p.g >= 0 {
				n++
			}
		}
		return n
	}
	for i := range 500 {
		want := random(rng.IntN(30))
		got := slices.Clone(want)
		// a few edits, so that common ends are usual, as between two runs
		for range rng.IntN(4) {
			switch j := rng.IntN(len(got) + 1); {
			case rng.IntN(2) == 0 && j < len(got):
				got = slices.Delete(got, j, j+1)
			default:
				got = slices.Insert(got, j, random(1)...)
			}
		}
		if rng.IntN(5) == 0 {
			got = random(rng.IntN(30))
		}
		fast, err := align(want, got)
		if err != nil {
			t.Fatal(err)
		}
		plain := lcs(labels(want), labels(got))
		if matched(fast) != matched(plain) {
			t.Fatalf("case %d: the fast path pairs %d events, the plain LCS %d\nwant %v\ngot  %v", i, matched(fast), matched(plain), labels(want), labels(got))
		}
		w, g := -1, -1
		for _, p := range fast {
			if p.w >= 0 {
				if p.w != w+1 {
					t.Fatalf("case %d: want events out of order or skipped: %v", i, fast)
				}
				w = p.w
			}
			if p.g >= 0 {
				if p.g != g+1 {
					t.Fatalf("case %d: got events out of order or skipped: %v", i, fast)
				}
				g = p.g
			}
			if p.w >= 0 && p.g >= 0 && label(want[p.w]) != label(got[p.g]) {
				t.Fatalf("case %d: paired %s with %s", i, label(want[p.w]), label(got[p.g]))
			}
		}
		if w != len(want)-1 || g != len(got)-1 {
			t.Fatalf("case %d: not every event is in the alignment: %v", i, fast)
		}
	}
}

// TestGoldenTracesHaveTheirReasonsShape: the golden traces, refproxy's
// own as the suite recorded them, carry reasons of the shapes
// golden/trace writes (trace.StrictReasons), so a golden that gains a
// field no type names is seen when it is recorded.
func TestGoldenTracesHaveTheirReasonsShape(t *testing.T) {
	files, err := filepath.Glob("traces/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden traces (%v)", err)
	}
	for _, f := range files {
		events, err := Read(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			e.Message = numbersBack(e.Message).(map[string]any)
			if err := trace.StrictReasons(e); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
	}
}

// numbersBack puts a number where normalisation wrote a reason's
// resetSeconds as "<seconds>", so that its type can be held too.
func numbersBack(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, val := range x {
			if k == "resetSeconds" && val == "<seconds>" {
				val = 0.0
			}
			m[k] = numbersBack(val)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, val := range x {
			s[i] = numbersBack(val)
		}
		return s
	}
	return v
}
