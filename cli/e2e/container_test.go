package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/gwdiag/gwdiag/steps/targets/container"
	"github.com/gwdiag/gwdiag/steps/targets/container/containertest"
)

// TestConformanceContainerErrors: bad container-target arguments are usage
// errors (exit 2), and a Docker daemon that cannot be reached is a plain
// error (exit 1) that says so.
func TestConformanceContainerErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"no image", nil, []string{"--target", "container"}, 2, "--target container needs --image"},
		{"bad pull policy", nil, []string{"--target", "container", "--image", "x", "--pull", "sometimes"}, 2, `--pull "sometimes": want missing or never`},
		{"bad env", nil, []string{"--target", "container", "--image", "x", "--env", "NOVALUE"}, 2, `--env "NOVALUE": want K=V`},
		{"bad admin port", nil, []string{"--target", "container", "--image", "x", "--admin-port", "70000"}, 2, "--admin-port 70000"},
		{"bad network", nil, []string{"--target", "container", "--image", "x", "--network", "overlay"}, 2, `--network "overlay": want bridge or host`},
		{"host network, another machine's daemon", []string{"DOCKER_HOST=tcp://127.0.0.1:1"}, []string{"--target", "container", "--image", "x", "--network", "host"}, 1,
			"--network host needs a Docker daemon on this machine, and DOCKER_HOST=tcp://127.0.0.1:1"},
		// The machine's lack, not the proxy's: every scenario not run,
		// the run incomplete (exit 3), the fix said.
		{"no daemon", []string{"DOCKER_HOST=unix:///nonexistent/docker.sock"}, []string{"--target", "container", "--image", "x"}, 3,
			"the suite's environment lacks a Docker daemon (fix: start Docker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := gwdiag(t, tt.env, nil, append([]string{"conformance", "run"}, tt.args...)...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", r.code, r.stderr, tt.code, tt.want)
			}
			if tt.name == "no daemon" && !strings.Contains(r.stdout, "no Docker daemon answers at DOCKER_HOST=unix:///nonexistent/docker.sock") {
				t.Errorf("stdout %q: want the daemon address it tried", r.stdout)
			}
		})
	}
}

// TestConformanceContainerInterrupt: SIGINT or SIGTERM in the middle of a
// run on the container target removes every container and network of the
// run before gwdiag exits 128+n, with the report and the JUnit file saying
// interrupted (checkInterrupted), and a second run finds nothing left over.
// The mock image is the one gwdiag builds from itself.
func TestConformanceContainerInterrupt(t *testing.T) {
	t.Parallel()
	proxy, _ := containertest.Images(t)
	for _, s := range interruptSignals {
		t.Run(s.name, func(t *testing.T) {
			run := startInterruptible(t, nil, "--target", "container", "--image", proxy, "--pull", "never")
			pid := run.cmd.Process.Pid
			if cs, ns := leftovers(t, pid); len(cs) == 0 || len(ns) == 0 {
				t.Errorf("when the signal was sent: containers %v, networks %v; want some of each, for the test to see them removed", cs, ns)
			}
			run.interrupt(t, s.sig)
			checkInterrupted(t, run, s.name, s.code)
			if cs, ns := leftovers(t, pid); len(cs)+len(ns) > 0 {
				t.Errorf("left on the Docker host after %s: containers %v, networks %v", s.name, cs, ns)
			}
		})
	}
	// A second run, one scenario, passes and leaves nothing either. Its
	// start builds the mock image from gwdiag itself, which took more than
	// gwdiag's usual 30 s on a loaded machine (a clean clone's CI).
	r := gwdiagWithin(t, 3*time.Minute, nil, nil, "conformance", "run", "--target", "container", "--image", proxy, "--pull", "never",
		"--run-scenario", "A forwarded request traces every required event in order")
	if r.code != 0 || !strings.Contains(r.stdout, "1 passed, 0 failed") {
		t.Errorf("second run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// leftovers lists the names of the containers and networks of the gwdiag
// run of that process id.
func leftovers(t *testing.T, pid int) (containers, networks []string) {
	t.Helper()
	p, err := container.DockerProvider()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	f := client.Filters{}.Add("label", "org.gwdiag.conformance.pid="+strconv.Itoa(pid))
	ctx := context.Background()
	cs, err := p.Client().ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs.Items {
		containers = append(containers, strings.Join(c.Names, ","))
	}
	ns, err := p.Client().NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns.Items {
		networks = append(networks, n.Name)
	}
	return containers, networks
}
