package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
)

// capture runs fn with stdout and stderr redirected and returns what it wrote.
func capture(t *testing.T, fn func() int) (code int, out string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	oldOut, oldErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = w, w
	done := make(chan string)
	go func() {
		var b bytes.Buffer
		io.Copy(&b, r)
		done <- b.String()
	}()
	code = fn()
	os.Stdout, os.Stderr = oldOut, oldErr
	w.Close()
	return code, <-done
}

func TestRunExitCodes(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
	}{
		{"valid example", []string{"-f", "../../examples/basic.yaml", "--validate-only"}, 0, "../../examples/basic.yaml: valid\n"},
		{"every example validates", []string{"-f", "../../examples/ratelimit.yaml", "--validate-only"}, 0, "valid"},
		{"unknown field names file, line and field", []string{"-f", "../../config/testdata/invalid/typo.yaml", "--validate-only"}, 1,
			`refproxy: invalid config: ../../config/testdata/invalid/typo.yaml:7: binds[0].listeners[0].routes[0].matches[0].path.pathPrefx: unknown field "pathPrefx" (did you mean "pathPrefix"?)`},
		{"missing file", []string{"-f", "nope.yaml"}, 1, "refproxy: invalid config: open nope.yaml: no such file or directory"},
		{"no -f", nil, 2, "usage: refproxy -f config.yaml"},
		{"unknown flag", []string{"--bogus"}, 2, "flag provided but not defined: -bogus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := capture(t, func() int { return run(tt.args) })
			if code != tt.wantCode || !strings.Contains(out, tt.wantOut) {
				t.Errorf("run(%q) = %d, %q; want %d and output containing %q", tt.args, code, out, tt.wantCode, tt.wantOut)
			}
		})
	}
}

func TestRunRefusesRemoteAdmin(t *testing.T) {
	f := t.TempDir() + "/c.yaml"
	if err := os.WriteFile(f, []byte("config: {adminAddr: \"0.0.0.0:0\"}\nbinds: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := capture(t, func() int { return run([]string{"-f", f, "--validate-only"}) })
	if code != 1 || !strings.Contains(out, "--admin-allow-remote") {
		t.Errorf("got %d %q, want exit 1 naming --admin-allow-remote", code, out)
	}
	code, _ = capture(t, func() int { return run([]string{"-f", f, "--validate-only", "--admin-allow-remote"}) })
	if code != 0 {
		t.Errorf("with --admin-allow-remote: exit %d, want 0", code)
	}
}
