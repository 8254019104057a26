package process_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/clusters/toolbin"
	"github.com/gwdiag/gwdiag/steps"
	"github.com/gwdiag/gwdiag/steps/targets"
	"github.com/gwdiag/gwdiag/steps/targets/local"
	"github.com/gwdiag/gwdiag/steps/targets/process"
	"github.com/gwdiag/gwdiag/steps/targets/targettest"
)

// startOneRoute starts p and configures it with targettest.OneRoute; p stops when the
// test ends.
func startOneRoute(t *testing.T, p *process.Process) targets.Deployment {
	t.Helper()
	ctx := context.Background()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(ctx) })
	d, err := p.Configure(ctx, targettest.OneRoute)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// buildRefproxy builds the real refproxy binary for the process target.
func buildRefproxy(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "refproxy")
	if err := toolbin.BuildStatic(context.Background(), "", bin, "github.com/gwdiag/gwdiag/refproxy/cmd/refproxy"); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestProcessConformance runs every feature against the real refproxy
// binary started by the process target from a command template, with the
// config written in each style: binds (spec part 2.2), and gateways with
// routes (the reference's current docs).
func TestProcessConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the refproxy binary")
	}
	bin := buildRefproxy(t)
	for _, style := range []local.ConfigStyle{local.StyleBinds, local.StyleGateways} {
		t.Run(string(style), func(t *testing.T) {
			// The proxy starts only from a config in the style asked for.
			cmd := `sh -c 'grep -q "^` + string(style) + `:" "$0" && exec ` + bin + ` --bind-host 127.0.0.1 -f "$0"' {config}`
			var out strings.Builder
			// Every request carries credentials: the run fails if its
			// progress view or report holds one.
			rep, err := steps.Run(context.Background(), steps.Options{Target: "process", ProxyCommand: cmd,
				ConfigStyle: style, AllFeatures: true, Output: &out, PlantCredentials: true,
				Report: filepath.Join(t.TempDir(), "report.yaml")})
			t.Log(out.String())
			if err != nil {
				t.Fatal(err)
			}
			if rep.Failed() || rep.Summary.Passed == 0 || rep.Summary.Unsupported > 0 {
				t.Errorf("refproxy binary, %s style: got %+v, want every scenario passed", style, rep.Summary)
			}
			if rep.Target != "process" || rep.Options.ConfigStyle != string(style) {
				t.Errorf("report target %q, style %q; want process, %s", rep.Target, rep.Options.ConfigStyle, style)
			}
		})
	}
}

func TestProcessTargetErrors(t *testing.T) {
	setup := targettest.OneRoute
	tests := []struct {
		name    string
		command string
		wantErr string // at Start or Configure
	}{
		{"empty command", "", "--proxy-cmd is empty"},
		{"no config placeholder", "sleep 10", "no {config} placeholder"},
		{"binary not found", "/nonexistent/proxy -f {config}", "/nonexistent/proxy"},
		{"exits at once", "sh -c exit {config}", "exited before it was ready"},
		// Ready never comes: the wait fails at ReadyTimeout, naming the
		// address and what its last dial said.
		{"never listens", "sh -c 'sleep 30' {config}", "proxy not accepting connections on 127.0.0.1:"},
		{"unbalanced quote", `refproxy -f "{config}`, "invalid command line string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := process.New(tt.command)
			ctx := context.Background()
			err := p.Start(ctx)
			if err == nil {
				defer p.Stop(ctx)
				var d targets.Deployment
				d, err = p.Configure(ctx, setup)
				if d != nil {
					d.Stop(ctx)
				}
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestProcessTargetStopsStubbornProxy checks the SIGTERM-then-kill stop of
// the whole process group: a wrapper script that ignores SIGTERM is killed
// after the grace period, with the proxy it started.
func TestProcessTargetStopsStubbornProxy(t *testing.T) {
	bin := buildRefproxy(t)
	script := filepath.Join(t.TempDir(), "stubborn.sh")
	body := "#!/bin/sh\ntrap '' TERM\n" + bin + " --bind-host 127.0.0.1 -f \"$1\" &\nwhile :; do sleep 0.05; done\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	p := process.New(script + " {config}")
	p.StopGrace = 200 * time.Millisecond
	ctx := context.Background()
	d := startOneRoute(t, p)
	admin := d.AdminAddr()
	err := d.Stop(ctx)
	if err == nil || !strings.Contains(err.Error(), "did not exit within 200ms of SIGTERM; killed") {
		t.Errorf("Stop of a wrapper ignoring SIGTERM: got %v, want a killed-after-grace error", err)
	}
	if c, err := net.DialTimeout("tcp", admin, time.Second); err == nil {
		c.Close()
		t.Errorf("admin %s still accepts connections after Stop: the proxy outlived its wrapper", admin)
	}
}

// TestProcessCommandQuoting: --proxy-cmd is split as a shell would, so a
// quoted argument with spaces, and a placeholder inside a quoted argument,
// reach the proxy as one argument each. The proxy here is a wrapper script
// that records its arguments, one per line, then runs refproxy on {config}.
func TestProcessCommandQuoting(t *testing.T) {
	bin := buildRefproxy(t)
	dir := t.TempDir()
	argsFile := filepath.Join(dir, "args")
	script := filepath.Join(dir, "proxy with space.sh")
	body := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + argsFile + "\nexec " + bin + " --bind-host 127.0.0.1 -f \"$2\" --watch=false\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	p := process.New(`'` + script + `' -c "{config}" --flag "a b" --admin='{admin}' plain\ word`)
	d := startOneRoute(t, p)
	defer d.Stop(context.Background())
	b, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(got) != 6 || got[0] != "-c" || !strings.HasSuffix(got[1], ".yaml") || got[2] != "--flag" || got[3] != "a b" ||
		got[4] != "--admin="+d.AdminAddr() || got[5] != "plain word" {
		t.Errorf("arguments the proxy got: %q, want -c <config> --flag \"a b\" --admin=<admin> \"plain word\"", got)
	}
}

// TestProcessTargetStopsLeftoverGroup: a proxy that exits on SIGTERM but
// leaves a helper behind (here one that ignores SIGTERM) does not leave it
// running: Stop kills what is left of the group once its leader is gone.
func TestProcessTargetStopsLeftoverGroup(t *testing.T) {
	bin := buildRefproxy(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "helper.pid")
	script := filepath.Join(dir, "forking.sh")
	body := "#!/bin/sh\n(trap '' TERM; exec sleep 300) &\necho $! > " + pidFile + "\nexec " + bin + " --bind-host 127.0.0.1 -f \"$1\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	d := startOneRoute(t, process.New(script+" {config}"))
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	// The helper is our grandchild: once killed it is reaped by init, so
	// it vanishes soon after; a bounded wait for that, not a sleep.
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("helper %d of the proxy still runs after Stop: got it alive, want the whole group stopped", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
