package tracecmd

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
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

func TestReadJSONL(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr string
	}{
		{"two events, blank lines and spaces", "\n{ \"eventEnd\": 1, \"message\": {\"type\":\"requestStarted\"} }\n\n{\"eventEnd\":2,\"message\":{\"type\":\"requestFinished\"}}\n",
			[]string{`{"eventEnd":1,"message":{"type":"requestStarted"}}`, `{"eventEnd":2,"message":{"type":"requestFinished"}}`}, ""},
		{"empty", "", nil, ""},
		{"not json", "{\"eventEnd\":1}\n{oops\n", nil, "t.jsonl:2: not a JSON trace event"},
		{"not an object", "[1,2]\n", nil, "t.jsonl:1: not a JSON trace event: want an object"},
		{"wrong field type", "{\"eventEnd\":\"soon\"}\n", nil, "t.jsonl:1: json: cannot unmarshal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadJSONL(strings.NewReader(tt.in), "t.jsonl")
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("error:\ngot  %v\nwant %s...", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var raws []string
			for _, e := range got {
				raws = append(raws, string(e.Raw))
			}
			if strings.Join(raws, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("events:\ngot  %q\nwant %q", raws, tt.want)
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
