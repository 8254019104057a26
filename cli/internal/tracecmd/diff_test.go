package tracecmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
)

// writeCapture writes a capture of n copies of the real proxy's trace
// (8 events each) to dir/name: with request ids r1..rn when ids is set,
// in the order of order (1-based trace numbers; nil is 1..n), and with
// change applied to the lines of the trace numbered changed.
func writeCapture(t *testing.T, dir, name string, n int, ids bool, order []int, changed int, change func(string) string) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(readFile(t, realTraces+"standalone-12x.deelided.jsonl")), "\n")
	if order == nil {
		for i := range n {
			order = append(order, i+1)
		}
	}
	var b strings.Builder
	for _, k := range order {
		for _, l := range lines {
			if ids {
				l = fmt.Sprintf(`{"requestId":"r%d",%s`, k, l[1:])
			}
			if k == changed {
				l = change(l)
			}
			b.WriteString(l + "\n")
		}
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDiffCaptures: captures of many requests pair trace by trace (by
// request id when they share ids, else in order), and one changed event is
// reported as its request, with its lines, and that event.
func TestDiffCaptures(t *testing.T) {
	dir := t.TempDir()
	to503 := func(l string) string { return strings.Replace(l, `"status":200`, `"status":503`, 1) }
	same := func(l string) string { return l }
	reversed := make([]int, 40)
	for i := range reversed {
		reversed[i] = 40 - i
	}
	tests := []struct {
		name string
		a, b string
		code int
		want []string
	}{
		{"a capture with itself", writeCapture(t, dir, "ids.jsonl", 40, true, nil, 0, same), filepath.Join(dir, "ids.jsonl"), 0, nil},
		{"one changed event, by id, in another order",
			writeCapture(t, dir, "ids.jsonl", 40, true, nil, 0, same), writeCapture(t, dir, "ids-rev.jsonl", 40, true, reversed, 17, to503), 1,
			[]string{"(r17, lines 129-136 ↔ r17, lines 185-192):", "~ event 6 backendCallResult", "~ message.status: want 200, got 503"}},
		{"one changed event, without ids, in order",
			writeCapture(t, dir, "plain.jsonl", 40, false, nil, 0, same), writeCapture(t, dir, "plain-changed.jsonl", 40, false, nil, 3, to503), 1,
			[]string{"request 3 (-, lines 17-24 ↔ -, lines 17-24):", "~ message.status: want 200, got 503"}},
		{"one trace each: no header",
			writeCapture(t, dir, "one.jsonl", 1, false, nil, 0, same), writeCapture(t, dir, "one-changed.jsonl", 1, false, nil, 1, to503), 1,
			[]string{"~ message.status: want 200, got 503"}},
		{"more requests on one side",
			writeCapture(t, dir, "plain.jsonl", 40, false, nil, 0, same), writeCapture(t, dir, "short.jsonl", 39, false, nil, 0, same), 2, nil},
		{"a request only one capture by id holds",
			writeCapture(t, dir, "ids.jsonl", 40, true, nil, 0, same), writeCapture(t, dir, "ids-39.jsonl", 39, true, nil, 0, same), 1,
			[]string{"- request r40: only in " + filepath.Join(dir, "ids.jsonl") + " (lines 313-320)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := execute(t, "", "diff", tt.a, tt.b)
			if code := exitcode.Code(err); code != tt.code {
				t.Fatalf("exit %d (%v), want %d; output:\n%s", code, err, tt.code, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if tt.name == "one trace each: no header" && strings.Contains(out, "request 1") {
				t.Errorf("a diff of two one-request traces has a request header:\n%s", out)
			}
			if tt.code == 2 && !strings.Contains(err.Error(), "has 40 requests and") {
				t.Errorf("error %v does not count the requests", err)
			}
		})
	}
}
