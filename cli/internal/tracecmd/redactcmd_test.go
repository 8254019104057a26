package tracecmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
)

// TestRedactCommand: gwdiag trace redact's exits (0; 1 when the capture
// cannot be read or OUT written, which is then not left behind; 2 for a
// usage error), its summary on stderr, and -o written whole.
func TestRedactCommand(t *testing.T) {
	sseFile, _ := saveCapture(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.sse")
	stdout, stderr, err := runTrace(t, "redact", sseFile, "-o", out)
	if err != nil || stdout != "" {
		t.Fatalf("redact -o: %v, stdout %q", err, stdout)
	}
	if want := sseFile + ": 20 events read, 12 redacted; 30 other lines (comments, blank, not events), 4 changed\n"; stderr != want {
		t.Errorf("summary\n got  %q\n want %q", stderr, want)
	}
	b, err := os.ReadFile(out)
	if err != nil || len(leaks(string(b))) > 0 || !strings.HasPrefix(string(b), ": ready\n\n") {
		t.Errorf("output: %v\n%s", err, b)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".out.sse.*"))
	if len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no file", []string{"redact"}, 2, "redact takes one trace file (- for stdin), received 0"},
		{"two files", []string{"redact", "a", "b"}, 2, "received 2"},
		{"nothing to redact with", []string{"redact", sseFile, "--redact=false"}, 2, "--redact=false and no --redact-header or --redact-query-param: nothing to redact"},
		{"a bad header name", []string{"redact", sseFile, "--redact-header", "a:b"}, 2, `--redact-header "a:b"`},
		{"a bad query parameter name", []string{"redact", sseFile, "--redact-query-param", "a=b"}, 2, `--redact-query-param "a=b": want a query parameter name`},
		{"onto itself", []string{"redact", sseFile, "-o", sseFile}, 2, "is the capture itself"},
		{"a missing capture", []string{"redact", filepath.Join(dir, "missing.sse")}, 1, "no such file"},
		{"an unwritable output", []string{"redact", sseFile, "-o", filepath.Join(dir, "no", "dir", "out.sse")}, 1, "no such file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runTrace(t, tt.args...)
			if err == nil || exitcode.Code(err) != tt.code || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v (exit %d), want exit %d and %q", err, exitcode.Code(err), tt.code, tt.want)
			}
		})
	}
	// A line past the bound: exit 1, naming it, and no output file.
	long := filepath.Join(dir, "long.jsonl")
	os.WriteFile(long, []byte("{}\n"+strings.Repeat("x", 16<<20+1)+"\n"), 0o600)
	_, _, err = runTrace(t, "redact", long, "-o", out+"2")
	if err == nil || exitcode.Code(err) != 1 || !strings.Contains(err.Error(), "long.jsonl:2: longer than 16 MiB") {
		t.Errorf("a line too long: %v", err)
	}
	if _, serr := os.Stat(out + "2"); serr == nil {
		t.Error("an output cut short was left")
	}
}

// TestRedactQueryParams: a capture's URLs lose the values of the default
// credential query parameters and of --redact-query-param's, with
// --redact=false only of the latter; the other parameters stay.
func TestRedactQueryParams(t *testing.T) {
	in := filepath.Join(t.TempDir(), "q.jsonl")
	ev := `{"eventStart":null,"eventEnd":1,"severity":"info","message":{"type":"requestSnapshot","stage":"initial request","requestState":{"request":{"uri":"http://g/v1/m:generateContent?key=AIzaPlantedQuery01&tenant_sig=ts-planted-02&page=3"}}}}` + "\n"
	if err := os.WriteFile(in, []byte(ev), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args         []string
		gone, stayed []string
	}{
		{nil, []string{"AIzaPlantedQuery01"}, []string{"ts-planted-02", "page=3"}},
		{[]string{"--redact-query-param", "Tenant_Sig"}, []string{"AIzaPlantedQuery01", "ts-planted-02"}, []string{"page=3"}},
		{[]string{"--redact=false", "--redact-query-param", "tenant_sig"}, []string{"ts-planted-02"}, []string{"AIzaPlantedQuery01", "page=3"}},
	} {
		stdout, _, err := runTrace(t, append([]string{"redact", in}, tt.args...)...)
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		for _, v := range tt.gone {
			if strings.Contains(stdout, v) {
				t.Errorf("%v: %q left in %s", tt.args, v, stdout)
			}
		}
		for _, v := range tt.stayed {
			if !strings.Contains(stdout, v) {
				t.Errorf("%v: %q gone from %s", tt.args, v, stdout)
			}
		}
	}
}
