package rootcmd

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/cli/internal/versioncmd"

	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
)

// TestEveryCommandHasExamples walks the whole tree: --help shows an Example
// section on every command.
func TestEveryCommandHasExamples(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		t.Run(c.CommandPath(), func(t *testing.T) {
			if strings.TrimSpace(c.Example) == "" {
				t.Errorf("%q has no examples", c.CommandPath())
			}
			if c.Short == "" {
				t.Errorf("%q has no short description", c.CommandPath())
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(New())
}

func TestCommandsAndAliases(t *testing.T) {
	tests := []struct {
		args []string
		want string // command path found
	}{
		{[]string{"trace"}, "gwdiag trace"},
		{[]string{"trace", "diff"}, "gwdiag trace diff"},
		{[]string{"config", "all"}, "gwdiag config all"},
		{[]string{"c", "all"}, "gwdiag config all"},
		{[]string{"cfg", "b"}, "gwdiag config backends"},
		{[]string{"config", "be"}, "gwdiag config backends"},
		{[]string{"conformance"}, "gwdiag conformance"},
		{[]string{"completion", "bash"}, "gwdiag completion bash"},
		{[]string{"version"}, "gwdiag version"},
	}
	root := New()
	for _, tt := range tests {
		c, _, err := root.Find(tt.args)
		if err != nil || c.CommandPath() != tt.want {
			t.Errorf("Find(%v) = %v, %v; want %s", tt.args, c.CommandPath(), err, tt.want)
		}
	}
}

func TestVersionAndHelpOutput(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"version"}, "gwdiag " + versioncmd.Version},
		{[]string{"--version"}, versioncmd.Version},
		{[]string{"trace", "--help"}, "Examples:\n  # Watch: trace the next request"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			root := New()
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetArgs(tt.args)
			if err := root.Execute(); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("output lacks %q:\n%s", tt.want, out.String())
			}
		})
	}
}

type coded struct{ error }

func (coded) ExitCode() int { return 7 }

func TestExitCode(t *testing.T) {
	if got := ExitCode(errors.New("x")); got != 1 {
		t.Errorf("plain error: exit %d, want 1", got)
	}
	if got := ExitCode(coded{errors.New("x")}); got != 7 {
		t.Errorf("coded error: exit %d, want 7", got)
	}
}

func TestBadFlagValueIsAUsageError(t *testing.T) {
	for _, args := range [][]string{
		{"trace", "--local", "--port", "abc", "--", "http://x/"},
		{"config", "backends", "--proxy-admin-port", "many"},
		{"conformance", "run", "--concurrency", "lots"},
		{"trace", "--no-such-flag"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			root := New()
			root.SetOut(io.Discard)
			root.SetErr(io.Discard)
			root.SetArgs(args)
			err := root.Execute()
			if err == nil || ExitCode(err) != 2 {
				t.Errorf("got error %v with exit %d, want a flag error with exit 2", err, ExitCode(err))
			}
		})
	}
}

// TestExitCodes: every usage error (a bad argument, an unknown command or
// option value, anywhere in the tree) exits 2, a command that ran and
// failed exits 1, and a group called bare shows its help.
func TestExitCodes(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.json")
	tests := []struct {
		args []string
		want int
		text string
	}{
		{[]string{"nosuch"}, 2, `unknown command "nosuch" for "gwdiag"`},
		{[]string{"config", "nosuch"}, 2, `unknown command "nosuch" for "gwdiag config"`},
		{[]string{"completion", "nosuch"}, 2, `unknown command "nosuch" for "gwdiag completion"`},
		{[]string{"conformance", "nosuch"}, 2, `unknown command "nosuch" for "gwdiag conformance"`},
		{[]string{"conformance", "run", "extra"}, 2, `unknown command "extra"`},
		{[]string{"conformance", "check"}, 2, "at least one trace file"},
		{[]string{"conformance", "run", "--target", "spaceship"}, 2, `unknown target "spaceship"`},
		{[]string{"conformance", "run", "--target", "process"}, 2, "needs --proxy-cmd"},
		{[]string{"conformance", "run", "--supported-features", "nope"}, 2, `unknown feature "nope"`},
		{[]string{"trace", "diff"}, 2, "diff takes two trace files"},
		{[]string{"trace", "--local", "a", "b"}, 2, "accepts at most 1 resource arg"},
		{[]string{"config", "backends", "--file", missing}, 1, "missing.json"},
		{[]string{"config"}, 0, ""},
		{[]string{"conformance"}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			root := New()
			root.SetOut(io.Discard)
			root.SetErr(io.Discard)
			root.SetArgs(tt.args)
			err := root.Execute()
			if got := exitcode.Code(err); got != tt.want || (err != nil && !strings.Contains(err.Error(), tt.text)) {
				t.Errorf("got exit %d (%v), want %d with %q", got, err, tt.want, tt.text)
			}
		})
	}
}
