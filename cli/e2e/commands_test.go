package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/charmbracelet/x/exp/golden"
)

func TestVersionCompletionHelp(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"version"}, "gwdiag dev"},
		{[]string{"completion", "bash"}, "bash completion V2 for gwdiag"},
		{[]string{"completion", "zsh"}, "#compdef gwdiag"},
		{[]string{"completion", "fish"}, "complete -c gwdiag"},
		{[]string{"--help"}, "Examples:"},
		{[]string{"trace", "--help"}, "--expression string"},
		{[]string{"config", "backends", "--help"}, "Aliases:\n  backends, b, be"},
		{[]string{"cfg", "--help"}, "Aliases:\n  config, c, cfg"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := gwdiag(t, nil, nil, tt.args...)
			if r.code != 0 || !strings.Contains(r.stdout, tt.want) {
				t.Errorf("exit %d, stdout lacks %q:\n%s%s", r.code, tt.want, r.stdout, r.stderr)
			}
		})
	}
}

func TestTraceDiff(t *testing.T) {
	same := gwdiag(t, nil, nil, "trace", "diff", "testdata/trace.jsonl", "testdata/trace.jsonl")
	if same.code != 0 {
		t.Errorf("diff of a trace with itself: exit %d, stdout %q stderr %q; want 0", same.code, same.stdout, same.stderr)
	}
	b, err := os.ReadFile("testdata/trace.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(t.TempDir(), "changed.jsonl")
	if err := os.WriteFile(changed, []byte(strings.Replace(string(b), `"status":200`, `"status":503`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	diff := gwdiag(t, nil, nil, "trace", "diff", "testdata/trace.jsonl", changed)
	if diff.code != 1 || !strings.Contains(diff.stdout, "503") || !strings.Contains(diff.stderr, "Error: traces differ") {
		t.Errorf("diff of changed traces: exit %d, stdout %q stderr %q; want exit 1 and a diff naming 503", diff.code, diff.stdout, diff.stderr)
	}
	missing := gwdiag(t, nil, nil, "trace", "diff", "testdata/trace.jsonl", "testdata/missing.jsonl")
	if missing.code != 2 || !strings.Contains(missing.stderr, "missing.jsonl") {
		t.Errorf("diff with a missing file: exit %d, stderr %q; want exit 2 naming the file", missing.code, missing.stderr)
	}
}

// volatile matches what changes from run to run in config output: backend
// addresses (free ports) and measured latencies.
var volatile = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "127.0.0.1:PORT"},
	{regexp.MustCompile(`\d+\.\d\dms`), "N.NNms"},
	{regexp.MustCompile(`bind/\d+`), "bind/PORT"},
	// The dump's own statistics (config all -o yaml): a mean latency in
	// seconds; 0 (no request) stays.
	{regexp.MustCompile(`(request_latency|requestLatency): [0-9.e+-]*[1-9][0-9.e+-]*`), "$1: N"},
}

// normalize replaces the backends' addresses by names, then other volatile
// values by placeholders.
func normalize(s string, names map[string]string) string {
	for addr, name := range names {
		s = strings.ReplaceAll(s, addr, name)
	}
	for _, v := range volatile {
		s = v.re.ReplaceAllString(s, v.repl)
	}
	return s
}

// cells turns a table into one "a | b | c" line per row, rows after the
// header sorted, so that column widths and row order that depend on free
// port numbers do not matter.
func cells(table string) string {
	var out []string
	for _, block := range strings.Split(strings.TrimRight(table, "\n"), "\n\n") {
		ls := lines(block)
		var rows []string
		for _, l := range ls {
			rows = append(rows, strings.Join(regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(l), -1), " | "))
		}
		head := 0
		if len(rows) > 0 && !strings.Contains(rows[0], " | ") { // a section title
			head = 1
		}
		if len(rows) > head+1 {
			sort.Strings(rows[head+1:])
		}
		out = append(out, strings.Join(rows, "\n"))
	}
	return strings.Join(out, "\n\n") + "\n"
}

// TestConfigAgainstProxy sends traffic to one of two routes, then checks the
// tables and summary the live proxy yields against golden output.
func TestConfigAgainstProxy(t *testing.T) {
	be1, be2 := startBackend(t), startBackend(t)
	if be1.addr > be2.addr {
		// Output lists backends by name (their address): keep the busy one first.
		be1, be2 = be2, be1
	}
	p := startProxyYAML(t, fmt.Sprintf(`
binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: busy
      matches: [{path: {pathPrefix: /busy}}]
      backends: [{host: %q}]
    - name: idle
      matches: [{path: {pathPrefix: /idle}}]
      backends: [{host: %q}]
`, be1.addr, be2.addr))
	for range 3 {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/busy", p.port))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	names := map[string]string{be1.addr: "busy-backend", be2.addr: "idle-backend"}
	tests := []struct {
		name  string
		args  []string
		table bool
	}{
		{"backends", []string{"config", "backends", "--local", "--admin-url", p.adminURL}, true},
		{"backends_all", []string{"cfg", "be", "--local", "--proxy-admin-port", p.adminPort(t), "--all"}, true},
		{"all_short", []string{"config", "all", "--local", "--admin-url", p.adminURL}, true},
		{"all_yaml", []string{"c", "all", "--local", "--admin-url", p.adminURL, "-o", "yaml"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := gwdiag(t, nil, nil, tt.args...)
			if r.code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
			}
			out := normalize(r.stdout, names)
			if tt.table {
				out = cells(out)
			}
			golden.RequireEqual(t, []byte(out))
		})
	}
}
