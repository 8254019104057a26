package tracecmd

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
)

// execute runs `trace <args>` in process, as the root command would.
func execute(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "gwdiag", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(NewCommand())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(append([]string{"trace"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestValidateExitCodes(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"a/b", "c/d", "e/f"}, "accepts at most 1 resource arg, received 3"},
		// A mistyped subcommand is named as one, not as a resource -f refuses.
		{[]string{"explian", "-f", "x"}, `unknown command "explian" for "gwdiag trace" (did you mean explain?)`},
		{[]string{"difff", "a", "b"}, `unknown command "difff" for "gwdiag trace" (did you mean diff?)`},
		{[]string{"--local", "gateway/x"}, "--local does not accept a resource argument"},
		{[]string{"--local", "--", "http://x/"}, "a request URL requires --port"},
		{[]string{"--local", "--port", "1"}, "--port requires a request URL after --"},
		{[]string{"--local", "--port", "1", "--", "x.example"}, "request args after -- must include at least one http:// or https:// URL"},
		{[]string{"-f", "x", "gateway/a"}, "--file replays a saved trace and cannot be combined with a resource argument"},
		{[]string{"-f", "x", "--expression", "true"}, "--file replays a saved trace and cannot be combined with --expression"},
		{[]string{"--config", "c.yaml"}, "--config applies to a standalone proxy: add --local"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := execute(t, "", tt.args...)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error:\ngot  %v\nwant %s", err, tt.want)
			}
			if ec, ok := err.(interface{ ExitCode() int }); !ok || ec.ExitCode() != 2 {
				t.Errorf("flag error does not ask for exit status 2")
			}
		})
	}
}

// realTraces holds traces the real proxy and its docs produced; its README
// names their sources.
const realTraces = "../../../golden/trace/sse/testdata/agentgateway/"

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReplayRaw: `trace -f F --raw` prints every valid event of a JSON
// Lines trace or an SSE capture byte for byte, then names each bad line
// and fails (exit 1), as agctl does.
func TestReplayRaw(t *testing.T) {
	docs := readFile(t, realTraces+"k8s-latest.docs.jsonl")
	deelided := strings.Split(strings.TrimSpace(readFile(t, realTraces+"standalone-12x.deelided.jsonl")), "\n")
	tests := []struct {
		name    string
		file    string
		stdin   string
		want    string
		wantErr []string
	}{
		{"SSE capture (curl -N -X POST .../debug/trace)", realTraces + "k8s-latest.DERIVED-sse-framing.sse", "", docs, nil},
		{"SSE capture on stdin", "-", readFile(t, realTraces+"k8s-latest.DERIVED-sse-framing.sse"), docs, nil},
		{"JSON Lines", realTraces + "k8s-latest.docs.jsonl", "", docs, nil},
		{"agctl's uppercase INFO echoed byte for byte", realTraces + "trace_test-event-INFO-uppercase.jsonl", "",
			readFile(t, realTraces+"trace_test-event-INFO-uppercase.jsonl"), nil},
		{"docs with elided lines: the valid events, then each bad line", realTraces + "standalone-12x.docs.jsonl", "",
			strings.Join([]string{deelided[0], deelided[2], deelided[4], deelided[5], deelided[7]}, "\n") + "\n",
			[]string{"standalone-12x.docs.jsonl: 3 lines are not trace events:", "standalone-12x.docs.jsonl:2: not a JSON trace event", "standalone-12x.docs.jsonl:4:", "standalone-12x.docs.jsonl:7:"}},
		{"line 2 bad on stdin", "-", "{\"eventEnd\":1}\n{oops\n{\"eventEnd\":2}\n", "{\"eventEnd\":1}\n{\"eventEnd\":2}\n",
			[]string{"stdin: 1 line is not a trace event:\n  stdin:2: not a JSON trace event"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := execute(t, tt.stdin, "--file", tt.file, "--raw")
			if out != tt.want {
				t.Errorf("output:\ngot  %q\nwant %q", out, tt.want)
			}
			if tt.wantErr == nil {
				if err != nil {
					t.Errorf("error %v, want none", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one naming the bad lines")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if code := exitcode.Code(err); code != 1 {
				t.Errorf("exit status %d, want 1", code)
			}
		})
	}
}

func TestReplayRawFromStdin(t *testing.T) {
	in := "{\"eventStart\":null,\"eventEnd\":1,\"severity\":\"info\",\"message\":{\"type\":\"requestStarted\"}}\n"
	out, err := execute(t, in, "--file", "-", "--raw")
	if err != nil || out != in {
		t.Errorf("replay: %q, %v; want %q", out, err, in)
	}
}

func TestOutcomeExpr(t *testing.T) {
	for _, tt := range []struct {
		status  string
		slower  time.Duration
		outcome string
		want    string
		err     string
	}{
		{"5xx", 0, "", "response.code >= 500 && response.code < 600", ""},
		{"429", 0, "", "response.code == 429", ""},
		{"", 500 * time.Millisecond, "", "latencyMicros > 500000", ""},
		{"4XX", time.Second, "response.code != 404", "response.code >= 400 && response.code < 500 && latencyMicros > 1000000 && (response.code != 404)", ""},
		{"6xx", 0, "", "", `--status "6xx": want a status code (429) or a class (1xx to 5xx)`},
		{"abc", 0, "", "", `--status "abc"`},
		{"", -time.Second, "", "", "--slower-than -1s: want a positive duration"},
	} {
		got, err := outcomeExpr(tt.status, tt.slower, tt.outcome)
		if got != tt.want || (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("outcomeExpr(%q, %v, %q) = %q, %v; want %q, %q", tt.status, tt.slower, tt.outcome, got, err, tt.want, tt.err)
		}
	}
}

// TestDiffNamesWhatMoved: the same request on another bind and upstream
// port is a difference (exit 1) that the diff names, one trace read from
// stdin as an SSE capture; the same capture as JSON Lines and SSE is equal.
func TestDiffNamesWhatMoved(t *testing.T) {
	base := realTraces + "standalone-12x.deelided.jsonl"
	var moved strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, base)), "\n") {
		line = strings.ReplaceAll(strings.ReplaceAll(line, "bind/3000", "bind/3001"), "127.0.0.1:8000", "127.0.0.1:8001")
		moved.WriteString(": keepalive\n\ndata: " + line + "\n\n")
	}
	tests := []struct {
		name  string
		args  []string
		stdin string
		code  int
		want  []string
	}{
		{"another bind and upstream port", []string{base, "-"}, moved.String(), 1, []string{
			`moved: bind 3000 -> 3001; upstream endpoint "127.0.0.1:8000" -> "127.0.0.1:8001"`,
			"~ event 5 backendCallStart at 159µs:"}},
		{"SSE capture and JSON Lines of one trace", []string{realTraces + "k8s-latest.docs.jsonl", realTraces + "k8s-latest.DERIVED-sse-framing.sse"}, "", 0, nil},
		{"a trace with bad lines cannot be compared", []string{base, realTraces + "standalone-12x.docs.jsonl"}, "", 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := execute(t, tt.stdin, append([]string{"diff"}, tt.args...)...)
			if code := exitcode.Code(err); code != tt.code {
				t.Fatalf("exit %d (%v), want %d; output:\n%s", code, err, tt.code, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
