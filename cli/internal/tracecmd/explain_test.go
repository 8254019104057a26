package tracecmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
)

// TestExplainFile: trace explain on saved traces: the real proxy's (one
// line each, what the events show and that it gave no reason; the docs'
// elided lines named after the verdict, exit 1 as trace -f), several requests of one
// capture on stdin, and the errors.
func TestExplainFile(t *testing.T) {
	out, err := execute(t, "", "explain", "-f", realTraces+"standalone-12x.docs.jsonl")
	if want := realTraces + "standalone-12x.docs.jsonl: 3 lines are not trace events:"; err == nil || !strings.Contains(err.Error(), want) || exitcode.Code(err) != 1 {
		t.Fatalf("explain a capture with elided lines: error %v (exit %d), want %q and exit 1\n%s", err, exitcode.Code(err), want, out)
	}
	if want := "200 from route default/httpbin: backend 127.0.0.1:8000 answered 200; the proxy gave no reason\n"; !strings.Contains(out, want) {
		t.Errorf("the valid events are not explained first: output lacks %q:\n%s", want, out)
	}

	two := readFile(t, realTraces+"k8s-12x.docs.jsonl") + readFile(t, realTraces+"standalone-12x.deelided.jsonl")
	out, err = execute(t, two, "explain", "-f", "-", "-v")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "200 from route httpbin/httpbin.00.http: backend 10.244.0.7:8080 answered 200") ||
		!strings.Contains(out, "\n#2: 200 from route default/httpbin: backend 127.0.0.1:8000 answered 200") ||
		!strings.Contains(out, "\n  route: httpbin/httpbin.00.http (2 evaluated)\n") {
		t.Errorf("two traces on stdin, -v:\n%s", out)
	}

	empty := filepath.Join(t.TempDir(), "empty.jsonl")
	if err := os.WriteFile(empty, []byte("\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"explain", "-f", empty}, empty + ": no trace events to explain", 1},
		{[]string{"explain", "-f", "missing.jsonl"}, "no such file", 1},
		{[]string{"explain", "-f", empty, "-o", "yaml"}, `invalid --output "yaml": want text or json`, 2},
		{[]string{"explain", "--local", "--port", "3000"}, "--port requires a request URL after --", 2},
		{[]string{"explain", "-f", empty, "--local"}, "--file replays a saved trace and cannot be combined with --local", 2},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := execute(t, "", tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) || exitcode.Code(err) != tt.code {
				t.Errorf("error %v (exit %d), want %q and exit %d", err, exitcode.Code(err), tt.want, tt.code)
			}
		})
	}
}
