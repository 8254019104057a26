package sse

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// ev is one JSON Lines event of type typ, with requestId id when set.
func ev(typ, id string, end int) string {
	rid := ""
	if id != "" {
		rid = fmt.Sprintf(`"requestId":%q,`, id)
	}
	return fmt.Sprintf(`{%s"eventStart":null,"eventEnd":%d,"severity":"info","message":{"type":%q}}`, rid, end, typ)
}

// TestReadTraces splits captures into traces: by request id, else at each
// requestStarted and after each requestFinished.
func TestReadTraces(t *testing.T) {
	lines := func(l ...string) string { return strings.Join(l, "\n") + "\n" }
	tests := []struct {
		name    string
		capture string
		want    []string // index/id@first-last:types, in delivery order
	}{
		{"one trace", lines(ev("requestStarted", "", 1), ev("routeSelection", "", 2), ev("requestFinished", "", 3)),
			[]string{"1/-@1-3:3"}},
		{"two traces without ids", lines(ev("requestStarted", "", 1), ev("requestFinished", "", 2), ev("requestStarted", "", 1), ev("requestFinished", "", 2)),
			[]string{"1/-@1-2:2", "2/-@3-4:2"}},
		{"a trace without requestFinished ends at the next requestStarted", lines(ev("requestStarted", "", 1), ev("routeSelection", "", 2), ev("requestStarted", "", 1), ev("requestFinished", "", 2)),
			[]string{"1/-@1-2:2", "2/-@3-4:2"}},
		{"events after requestFinished start a trace", lines(ev("requestStarted", "", 1), ev("requestFinished", "", 2), ev("routeSelection", "", 3), ev("requestFinished", "", 4)),
			[]string{"1/-@1-2:2", "2/-@3-4:2"}},
		{"interleaved ids, delivered as they finish", lines(ev("requestStarted", "a", 1), ev("requestStarted", "b", 1), ev("requestFinished", "b", 2), ev("requestFinished", "a", 3)),
			[]string{"2/b@2-3:2", "1/a@1-4:2"}},
		{"unfinished traces at the end, by index", lines(ev("requestStarted", "a", 1), ev("requestStarted", "b", 1), ev("routeSelection", "a", 2)),
			[]string{"1/a@1-3:2", "2/b@2-2:1"}},
		{"empty capture", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			err := ReadTraces(strings.NewReader(tt.capture), "c.jsonl", func(tr CapturedTrace) error {
				first, last := tr.Lines()
				id := tr.ID
				if id == "" {
					id = "-"
				}
				got = append(got, fmt.Sprintf("%d/%s@%d-%d:%d", tr.Index, id, first, last, len(tr.TraceEvents())))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got %v\nwant %v", got, tt.want)
			}
		})
	}
}

// TestReadTracesBounds: a capture past the bounds stops with an error
// naming the line, and a bad line is still named after the traces.
func TestReadTracesBounds(t *testing.T) {
	var b strings.Builder
	b.WriteString(ev("requestStarted", "", 1) + "\n")
	for i := range MaxTraceEvents {
		b.WriteString(ev("routeSelection", "", i+2) + "\n")
	}
	err := ReadTraces(strings.NewReader(b.String()), "long.jsonl", func(CapturedTrace) error { return nil })
	if want := fmt.Sprintf("long.jsonl:%d: the trace that starts on line 1 has more than %d events", MaxTraceEvents+1, MaxTraceEvents); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got error %v, want %q", err, want)
	}

	b.Reset()
	for i := range MaxOpenTraces + 1 {
		b.WriteString(ev("requestStarted", fmt.Sprint("r", i), 1) + "\n")
	}
	err = ReadTraces(strings.NewReader(b.String()), "wide.jsonl", func(CapturedTrace) error { return nil })
	if want := fmt.Sprintf("wide.jsonl:%d: more than %d requests under way", MaxOpenTraces+1, MaxOpenTraces); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got error %v, want %q", err, want)
	}

	n := 0
	err = ReadTraces(strings.NewReader(ev("requestStarted", "", 1)+"\nnot json\n"+ev("requestFinished", "", 2)+"\n"), "bad.jsonl", func(CapturedTrace) error { n++; return nil })
	var ce *CaptureError
	if !errors.As(err, &ce) || len(ce.Bad) != 1 || ce.Bad[0].Line != 2 || n != 1 {
		t.Errorf("got %d traces and error %v, want 1 trace and line 2 named", n, err)
	}
}
