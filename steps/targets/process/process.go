// Package process is the process target: any proxy binary started from a
// command template, one process per scenario, with the standalone config
// the suite writes.
package process

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mattn/go-shellwords"

	"github.com/gwdiag/gwdiag/steps/procout"
	"github.com/gwdiag/gwdiag/steps/targets"
	"github.com/gwdiag/gwdiag/steps/targets/local"
)

// Process runs any proxy binary from a command template, one process per
// scenario. The suite writes a standalone config (REFERENCE.md format) with
// the ports it chose, starts the command, waits until the admin server and
// the listeners accept connections, and stops it with SIGTERM, then SIGKILL.
type Process struct {
	// Command is the command template; {config} is replaced by the path of
	// the config file and {admin} by the admin host:port. It is split into
	// arguments as a POSIX shell would (quotes and backslashes; no
	// expansion, pipes or redirections), then each placeholder is replaced
	// inside its argument, so a path with spaces stays one argument.
	Command string
	// StopGrace is how long the proxy has to exit after SIGTERM.
	StopGrace time.Duration
	// Style is how the config is laid out (default binds).
	Style local.ConfigStyle
	dir   string
	args  []string // Command split, placeholders not yet replaced

	// running are the process groups of the proxies not yet exited, with
	// their commands: what a forced exit leaves (LeftBehind).
	mu      sync.Mutex
	running map[int]string
}

// New returns a process target for a command template such as
// "refproxy -f {config}".
func New(command string) *Process {
	return &Process{Command: command, StopGrace: 5 * time.Second}
}

// Name implements Target.
func (*Process) Name() string { return "process" }

// ServiceAddr implements targets.ServiceHost: the proxy runs on this
// machine.
func (*Process) ServiceAddr() (string, bool) { return "127.0.0.1", true }

// Capabilities implements Target.
func (*Process) Capabilities() []string {
	return []string{targets.CapabilityStandalone, targets.CapabilityDataPlane}
}

// Start implements Target: it checks the command and makes a folder for configs.
func (p *Process) Start(context.Context) error {
	args, err := shellwords.Parse(p.Command)
	if err != nil {
		return fmt.Errorf("process target: --proxy-cmd %q: %w", p.Command, err)
	}
	if len(args) == 0 {
		return errors.New("process target: --proxy-cmd is empty; want a command such as 'refproxy -f {config}'")
	}
	p.args = args
	if !strings.Contains(p.Command, "{config}") {
		return fmt.Errorf("process target: --proxy-cmd %q has no {config} placeholder for the config file", p.Command)
	}
	if _, err := exec.LookPath(args[0]); err != nil {
		return fmt.Errorf("process target: %w", err)
	}
	dir, err := os.MkdirTemp("", "gwdiag-conformance-")
	if err != nil {
		return err
	}
	p.dir = dir
	return nil
}

// Stop implements Target.
func (p *Process) Stop(context.Context) error {
	if p.dir == "" {
		return nil
	}
	return os.RemoveAll(p.dir)
}

// LeftBehind implements targets.LeftBehind: the proxies run in process
// groups of their own, so they outlive gwdiag; the config folder stays.
func (p *Process) LeftBehind() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	pgids := slices.Sorted(maps.Keys(p.running))
	out := make([]string, 0, len(pgids)+1)
	for _, pg := range pgids {
		out = append(out, fmt.Sprintf("proxy process group %d (%s): kill -- -%d", pg, p.running[pg], pg))
	}
	if p.dir != "" {
		out = append(out, fmt.Sprintf("the proxies' config files: rm -r %s", p.dir))
	}
	return out
}

// Configure implements Target. The ports are chosen before the proxy binds
// them, so another process may take one first; start-up is then retried
// with new ports.
func (p *Process) Configure(ctx context.Context, setup targets.Setup) (targets.Deployment, error) {
	return local.RetryTakenPorts(func() (targets.Deployment, error) { return p.configureOnce(ctx, setup) })
}

func (p *Process) configureOnce(ctx context.Context, setup targets.Setup) (targets.Deployment, error) {
	d, yml, err := local.Prepare(setup, true, p.Style)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(p.dir, "config-*.yaml")
	if err != nil {
		d.Stop(ctx)
		return nil, err
	}
	_, err = f.Write(yml)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		d.Stop(ctx)
		return nil, err
	}
	path, _ := filepath.Abs(f.Name())
	args := make([]string, len(p.args))
	for i, a := range p.args {
		args[i] = strings.NewReplacer("{config}", path, "{admin}", d.Admin).Replace(a)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "ADMIN_ADDR="+d.Admin)
	// Its own process group, so that stopping it also stops whatever a
	// wrapper script started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &procout.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	// A helper the proxy left behind may hold its output open: Wait would
	// wait for it, and the proxy's exit would go unseen until then.
	cmd.WaitDelay = 200 * time.Millisecond
	if err := cmd.Start(); err != nil {
		d.Stop(ctx)
		return nil, fmt.Errorf("process target: %w", err)
	}
	pgid := cmd.Process.Pid
	p.mu.Lock()
	if p.running == nil {
		p.running = map[int]string{}
	}
	p.running[pgid] = args[0]
	p.mu.Unlock()
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		p.mu.Lock()
		delete(p.running, pgid)
		p.mu.Unlock()
		close(exited)
	}()
	d.Output = out.String
	d.StopProxy = func(context.Context) error {
		// The whole group, even when its leader has exited: a wrapper
		// script or a forked helper of the proxy must not outlive the run.
		// The group's id stays reserved while a member lives, so it names
		// no one else.
		pgid := -cmd.Process.Pid
		syscall.Kill(pgid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(p.StopGrace):
			syscall.Kill(pgid, syscall.SIGKILL)
			<-exited
			return fmt.Errorf("process target: %s did not exit within %s of SIGTERM; killed", args[0], p.StopGrace)
		}
		// The leader is gone; what is left of its group gets no grace.
		syscall.Kill(pgid, syscall.SIGKILL)
		return nil
	}
	readyCtx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-exited:
			cancel()
		case <-readyCtx.Done():
		}
	}()
	err = local.WaitReady(readyCtx, d)
	cancel()
	if err == nil {
		// Ready means its ports answered; a proxy that has exited by now
		// did not answer them (another program took a port it was told
		// to bind): it fails as below, and its output saying so ("address
		// already in use") has it retried on new ports.
		select {
		case <-exited:
			err = errors.New("exited")
		default:
		}
	}
	if err != nil {
		// Whether it exited is read before Stop, which would end it too.
		select {
		case <-exited:
			d.Stop(ctx)
			return nil, fmt.Errorf("process target: %q exited before it was ready (%v); output:\n%s", strings.Join(args, " "), cmd.ProcessState, out.String())
		default:
		}
		d.Stop(ctx)
		return nil, fmt.Errorf("process target: %w; output:\n%s", err, out.String())
	}
	return d, nil
}
