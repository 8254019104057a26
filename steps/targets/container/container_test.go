package container_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"

	"github.com/gwdiag/gwdiag/clusters/toolbin"
	"github.com/gwdiag/gwdiag/refproxy/config"
	"github.com/gwdiag/gwdiag/steps"
	"github.com/gwdiag/gwdiag/steps/targets"
	"github.com/gwdiag/gwdiag/steps/targets/container"
	"github.com/gwdiag/gwdiag/steps/targets/container/containertest"
	"github.com/gwdiag/gwdiag/steps/targets/local"
	"github.com/gwdiag/gwdiag/steps/targets/targettest"
)

// TestContainerConformance runs every feature, claimed, against the
// reference proxy's image: all must pass, and nothing may be left on the
// Docker host. The containers run in this machine's network
// (container.NetworkHost): a container starts there in half the time and
// CPU, and this test starts one per scenario. The default network, the
// run's own, is under test end to end in TestContainerDeployment/bridge
// (forwarding, an unreachable backend, mock control) and in the CLI's
// container runs (cli/e2e: the hostile proxies, the interrupts, the cgo
// gwdiag), whose scenarios cross it the same way every scenario does.
func TestContainerConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a container per scenario")
	}
	proxy, mocks := containertest.Images(t)
	var out strings.Builder
	// Every request carries credentials: the run fails if its progress
	// view or report holds one.
	rep, err := steps.Run(context.Background(), steps.Options{Target: "container", AllFeatures: true, Output: &out,
		Container:        container.Options{Image: proxy, MockImage: mocks, Pull: container.PullNever, Network: container.NetworkHost},
		PlantCredentials: true, Report: filepath.Join(t.TempDir(), "report.yaml")})
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed() || rep.Summary.Passed == 0 || rep.Summary.Unsupported > 0 {
		t.Errorf("refproxy image: got %+v, want every scenario passed", rep.Summary)
	}
	if rep.Target != "container" {
		t.Errorf("report target: got %q, want container", rep.Target)
	}
	assertNothingLeft(t)
}

// TestContainerTargetErrors: each way a container can fail to start gets an
// error that says what is wrong, and leaves nothing behind.
func TestContainerTargetErrors(t *testing.T) {
	proxy, mocks := containertest.Images(t)
	tests := []struct {
		name string
		opts container.Options
		want []string // in the error of Start or Configure
	}{
		{"image missing, pull never", container.Options{Image: "gwdiag/no-such-image:never", Pull: container.PullNever},
			[]string{"--image gwdiag/no-such-image:never: no such image on the Docker host, and --pull never forbids pulling it"}},
		{"mock image missing, pull never", container.Options{Image: proxy, MockImage: "gwdiag/no-such-mocks:never", Pull: container.PullNever},
			[]string{"--mock-image gwdiag/no-such-mocks:never: no such image"}},
		{"image missing, pull fails", container.Options{Image: "localhost:1/gwdiag/no-such-image:missing", Pull: container.PullMissing},
			[]string{"--image localhost:1/gwdiag/no-such-image:missing is not on the Docker host and pulling it failed"}},
		// The image reads /etc/proxy/config.yaml; the suite wrote elsewhere.
		{"container exits at start", container.Options{Image: proxy, ConfigPath: "/elsewhere/config.yaml"},
			[]string{"the proxy container (image " + proxy + ") exited with code 1 before it was ready; its last log lines:",
				"refproxy: invalid config: open /etc/proxy/config.yaml: no such file or directory"}},
		// The admin server listens where the suite does not look.
		{"admin port not answering", container.Options{Image: proxy, Env: map[string]string{"ADMIN_ADDR": "0.0.0.0:15001"},
			StartupTimeout: config.Duration(2 * time.Second)},
			[]string{"the proxy container (image " + proxy + ") was not ready within 2s",
				"the suite waits for /config_dump on admin port 15000/tcp (--admin-port", "admin=[::]:15001"}},
		// An image that serves no mock pool: refproxy refuses --pool-addr.
		{"mock image without a pool", container.Options{Image: proxy, MockImage: proxy},
			[]string{"the mock backends container (image " + proxy + ") exited with code", "pool-addr"}},
		{"no image", container.Options{}, []string{"--target container needs --image"}},
		{"bad pull policy", container.Options{Image: proxy, Pull: "sometimes"}, []string{`--pull "sometimes": want missing or never`}},
		{"relative config path", container.Options{Image: proxy, ConfigPath: "config.yaml"}, []string{"want an absolute path"}},
		{"bad network", container.Options{Image: proxy, Network: "overlay"}, []string{`--network "overlay": want bridge or host`}},
		// The proxy exits at start in this machine's network too, and says why.
		{"container exits at start, host network", container.Options{Image: proxy, ConfigPath: "/elsewhere/config.yaml", Network: container.NetworkHost},
			[]string{"the proxy container (image " + proxy + ") exited with code 1 before it was ready; its last log lines:",
				"refproxy: invalid config: open /etc/proxy/config.yaml: no such file or directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.opts.MockImage == "" {
				tt.opts.MockImage = mocks
			}
			c := container.New(tt.opts)
			ctx := context.Background()
			err := c.Start(ctx)
			if err == nil {
				var d targets.Deployment
				d, err = c.Configure(ctx, targettest.OneRoute)
				if d != nil {
					d.Stop(ctx)
				}
			}
			if serr := c.Stop(ctx); serr != nil {
				t.Errorf("Stop: %v", serr)
			}
			if err == nil {
				t.Fatalf("got no error, want one containing %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nwant it to contain %q", err, w)
				}
			}
			assertNothingLeft(t)
		})
	}
}

// TestHostNetworkNeedsALocalDaemon: --network host with a daemon that
// may be another machine's is refused before anything starts.
func TestHostNetworkNeedsALocalDaemon(t *testing.T) {
	t.Setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
	err := container.New(container.Options{Image: "any", Network: container.NetworkHost}).Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "--network host needs a Docker daemon on this machine, and DOCKER_HOST=tcp://127.0.0.1:1") {
		t.Errorf("Start: %v; want --network host refused", err)
	}
}

// TestContainerDeployment checks a deployment's addresses and mock control
// end to end, on each network: the proxy forwards to the mock (on the
// run's network, or on this machine's loopback with host), the mock counts
// it, an unreachable backend refuses connections, and the proxy's logs are
// kept after Stop. The config is written in the gateways style
// (TestContainerConformance runs binds).
func TestContainerDeployment(t *testing.T) {
	proxy, mocks := containertest.Images(t)
	for _, nw := range []container.Network{container.NetworkBridge, container.NetworkHost} {
		t.Run(string(nw), func(t *testing.T) {
			t.Parallel()
			checkDeployment(t, container.Options{Image: proxy, MockImage: mocks, Network: nw})
		})
	}
}

func checkDeployment(t *testing.T, o container.Options) {
	c := container.New(o)
	c.Style = local.StyleGateways
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	host := o.Network == container.NetworkHost
	if host {
		defer checkConfigDirRemoved(t, c)
	}
	setup := targettest.OneRoute
	setup.Backends = append(setup.Backends, targets.Backend{Name: "down", Kind: targets.BackendUnreachable})
	setup.Listeners = []targets.Listener{{Name: targets.DefaultListener, Routes: []targets.Route{
		{Name: "down", PathPrefix: "/down", Backend: "down"}, {Name: "r", PathPrefix: "/", Backend: "b"}}}}
	d, err := c.Configure(ctx, setup)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop(ctx)
	addr, _ := d.ListenerAddr(targets.DefaultListener)
	if !strings.HasPrefix(addr, "127.0.0.1:") || !strings.HasPrefix(d.AdminAddr(), "127.0.0.1:") {
		t.Errorf("listener %s, admin %s: want ports on loopback", addr, d.AdminAddr())
	}
	if svc, ok := c.ServiceAddr(); !ok || (o.Network == container.NetworkHost) != (svc == "127.0.0.1") {
		t.Errorf("ServiceAddr: %q, %v; want the network's gateway (bridge) or 127.0.0.1 (host)", svc, ok)
	}
	resp, err := testClient.Get("http://" + addr + "/down/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 500 {
		t.Errorf("GET to the unreachable backend: %d, want a 5xx", resp.StatusCode)
	}
	for range 2 {
		resp, err := testClient.Get("http://" + addr + "/anything")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET through the proxy: %d, want 200", resp.StatusCode)
		}
	}
	if n, err := d.BackendRequests(ctx, "b"); err != nil || n != 2 {
		t.Errorf("BackendRequests: %d, %v; want 2", n, err)
	}
	b, _ := d.BackendAddr("b")
	down, _ := d.BackendAddr("down")
	bHost, _, _ := strings.Cut(b, ":")
	if !strings.HasPrefix(down, bHost+":") || down == b {
		t.Errorf("backend addresses %s and %s: want two ports of the mock container", b, down)
	}
	if err := d.ReleaseHeld(ctx, "b", "k"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("ReleaseHeld on an echo backend: got %v, want the mock's 404", err)
	}
	// A second scenario's mocks are served by the same container, on ports
	// of their own, with counters of their own.
	d2, err := c.Configure(ctx, targettest.OneRoute)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Stop(ctx)
	b2, _ := d2.BackendAddr("b")
	if b2Host, _, _ := strings.Cut(b2, ":"); b2Host != bHost || b2 == b {
		t.Errorf("the second scenario's backend %s: want another port of the mock container %s", b2, bHost)
	}
	if n, err := d2.BackendRequests(ctx, "b"); err != nil || n != 0 {
		t.Errorf("the second scenario's BackendRequests: %d, %v; want 0", n, err)
	}
	if host {
		checkConfigDir(t, c, 2)
	}
	if err := d.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if host {
		checkConfigDir(t, c, 1) // a scenario's config goes with it
	}
	if _, err := d.BackendRequests(ctx, "b"); err == nil || !strings.Contains(err.Error(), "no mock server on port") {
		t.Errorf("BackendRequests after Stop: %v; want the pool's error: the scenario's mocks are closed", err)
	}
	if n, err := d2.BackendRequests(ctx, "b"); err != nil || n != 0 {
		t.Errorf("the second scenario's BackendRequests after the first stopped: %d, %v; want 0", n, err)
	}
	if logs := d.(targets.LogKeeper).ProxyLogs(); !strings.Contains(logs, "refproxy started") {
		t.Errorf("proxy logs after Stop: %q, want refproxy's start line", logs)
	}
	if rt := c.ReadyTimes(); len(rt) != 2 || rt[0] <= 0 {
		t.Errorf("ReadyTimes: %v, want two positive durations", rt)
	}
}

// checkConfigDir checks the folder a NetworkHost run bind-mounts the
// proxies' configs from: nobody may list it, and it holds the config of
// each of the scenarios still deployed, readable by the image's user.
func checkConfigDir(t *testing.T, c *container.Container, scenarios int) {
	t.Helper()
	dir := container.ConfigDir(c)
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatalf("the run's configs folder: %v", err)
	}
	if fi.Mode().Perm() != 0o711 {
		t.Errorf("the run's configs folder %s: mode %v, want -rwx--x--x", dir, fi.Mode().Perm())
	}
	files, _ := os.ReadDir(dir)
	if len(files) != scenarios {
		t.Errorf("the run's configs folder holds %d files, want %d, one per scenario deployed", len(files), scenarios)
	}
	for _, f := range files {
		if fi, err := f.Info(); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("config %s: %v, %v; want -rw-r--r--", f.Name(), fi.Mode(), err)
		}
	}
}

// checkConfigDirRemoved checks that the run's Stop removes its configs
// folder.
func checkConfigDirRemoved(t *testing.T, c *container.Container) {
	t.Helper()
	dir := container.ConfigDir(c)
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("after Stop, the run's configs folder %s: %v; want it removed", dir, err)
	}
}

// TestSweepsConfigDirsOfKilledRuns: a NetworkHost run killed before its
// Stop leaves its configs folder; the next run of the same HostID removes
// it when the pid is dead, and leaves those of live runs and of another
// HostID.
func TestSweepsConfigDirsOfKilledRuns(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	mk := func(name string) string {
		d := filepath.Join(tmp, name)
		if err := os.MkdirAll(d, 0o711); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "1-config.yaml"), []byte("secret"), 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	killed := mk(container.ConfigDirPrefix() + strconv.Itoa(dead.Process.Pid) + "-123")
	live := mk(container.ConfigDirPrefix() + strconv.Itoa(os.Getpid()) + "-456")
	other := mk("gwdiag-configs-00000000-" + strconv.Itoa(dead.Process.Pid) + "-789")
	if err := container.SweepConfigDirs(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(killed); !os.IsNotExist(err) {
		t.Errorf("the killed run's folder: %v, want it removed", err)
	}
	for _, d := range []string{live, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s: %v, want it kept", filepath.Base(d), err)
		}
	}
}

// TestSweepsLeftoversOfKilledRuns: a run killed before its Stop leaves
// containers and a network; the next run of the same HostID removes them.
// It leaves alone those of runs still alive and those made from another
// pid namespace, where its pids mean nothing. What it cannot remove (a
// network someone else's container is attached to) is a warning, and the
// run goes on.
func TestSweepsLeftoversOfKilledRuns(t *testing.T) {
	_, mocks := containertest.Images(t)
	ctx := context.Background()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	labels := func(run, host string, pid int) map[string]string {
		return map[string]string{container.LabelRun: run, container.LabelHost: host, container.LabelPID: strconv.Itoa(pid)}
	}
	p, err := container.DockerProvider()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	docker := p.Client()
	runs := []struct {
		labels map[string]string
		swept  bool
	}{
		{labels("killed", container.HostID(), dead.Process.Pid), true},
		{labels("alive", container.HostID(), os.Getpid()), false},
		{labels("elsewhere", container.HostID()+" pid:[1]", dead.Process.Pid), false},
	}
	network := func(run string) string { return "gwdiag-sweep-test-" + run }
	var ids []string
	for _, r := range runs {
		name := network(r.labels[container.LabelRun])
		if _, err := docker.NetworkCreate(ctx, name, client.NetworkCreateOptions{Labels: r.labels}); err != nil {
			t.Fatal(err)
		}
		defer docker.NetworkRemove(ctx, name, client.NetworkRemoveOptions{})
		ctr, err := testcontainers.Run(ctx, mocks, testcontainers.WithLogger(tclog.NewNoopLogger()),
			testcontainers.WithCmd("--echo-addr", "127.0.0.1:0", "--llm-addr", ""), testcontainers.WithLabels(r.labels),
			tcnetwork.WithNetworkName(nil, name))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ctr.GetContainerID())
		defer testcontainers.TerminateContainer(ctr)
	}
	// A killed run's network that a container of no run is attached to.
	held := labels("held", container.HostID(), dead.Process.Pid)
	if _, err := docker.NetworkCreate(ctx, network("held"), client.NetworkCreateOptions{Labels: held}); err != nil {
		t.Fatal(err)
	}
	defer docker.NetworkRemove(ctx, network("held"), client.NetworkRemoveOptions{})
	stranger, err := testcontainers.Run(ctx, mocks, testcontainers.WithLogger(tclog.NewNoopLogger()),
		testcontainers.WithCmd("--echo-addr", "127.0.0.1:0", "--llm-addr", ""), tcnetwork.WithNetworkName(nil, network("held")))
	if err != nil {
		t.Fatal(err)
	}
	defer testcontainers.TerminateContainer(stranger)

	var warnings bytes.Buffer
	c := container.New(container.Options{Image: mocks, MockImage: mocks, Warnings: &warnings})
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start with a leftover it cannot remove: %v", err)
	}
	c.Stop(ctx)
	for i, r := range runs {
		run := r.labels[container.LabelRun]
		_, err := docker.ContainerInspect(ctx, ids[i], client.ContainerInspectOptions{})
		if got := err != nil; got != r.swept {
			t.Errorf("container of the %s run: removed %v, want %v", run, got, r.swept)
		}
		_, err = docker.NetworkInspect(ctx, network(run), client.NetworkInspectOptions{})
		if got := err != nil; got != r.swept {
			t.Errorf("network of the %s run: removed %v, want %v", run, got, r.swept)
		}
	}
	if _, err := docker.NetworkInspect(ctx, network("held"), client.NetworkInspectOptions{}); err != nil {
		t.Errorf("the network a stranger is attached to was removed: %v", err)
	}
	name, _ := stranger.Name(ctx)
	for _, want := range []string{"container target: warning:", "remove network " + network("held"), "containers not of the run are attached: " + strings.TrimPrefix(name, "/")} {
		if !strings.Contains(warnings.String(), want) {
			t.Errorf("warnings %q: want %q", warnings.String(), want)
		}
	}
}

// assertNothingLeft fails t when any container or network of this
// process's runs is still on the Docker host.
func assertNothingLeft(t *testing.T) {
	t.Helper()
	p, err := container.DockerProvider()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	f := client.Filters{}.Add("label", "org.gwdiag.conformance.pid="+strconv.Itoa(os.Getpid()))
	cs, err := p.Client().ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := p.Client().NetworkList(context.Background(), client.NetworkListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs.Items {
		t.Errorf("container %s (%s) left on the Docker host", c.Names, c.State)
	}
	for _, n := range ns.Items {
		if !strings.HasPrefix(n.Name, "gwdiag-sweep-test-") {
			t.Errorf("network %s left on the Docker host", n.Name)
		}
	}
}

// testClient opens a connection per request, as the suite does.
var testClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

// TestScratchImageRebuildPrunesOlder: building a changed image into a
// repository removes the repository's builds older than PruneGrace, so
// rebuilding gwdiag does not pile up mock images, and keeps a recent one,
// which another run may be about to use.
func TestScratchImageRebuildPrunesOlder(t *testing.T) {
	containertest.Images(t) // skips without a Docker daemon
	bin := filepath.Join(t.TempDir(), "mockbackend")
	if err := toolbin.BuildStatic(context.Background(), "", bin, "github.com/gwdiag/gwdiag/steps/mock/cmd/mockbackend"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const repo = "gwdiag/prune-test"
	p, err := container.DockerProvider()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	recent, err := container.BuildScratchImage(ctx, repo, bin, "--echo-addr", ":0")
	if err != nil {
		t.Fatal(err)
	}
	first, err := container.BuildScratchImage(ctx, repo, bin, "--echo-addr", ":1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Client().ImageInspect(ctx, recent); err != nil {
		t.Errorf("%s, built a moment ago, was removed when %s was built: %v", recent, first, err)
	}
	// Not parallel: no other test of this package builds images.
	defer func(g time.Duration) { container.PruneGrace = g }(container.PruneGrace)
	container.PruneGrace = 0
	second, err := container.BuildScratchImage(ctx, repo, bin, "--echo-addr", ":2")
	if err != nil {
		t.Fatal(err)
	}
	// PruneChildren: the build's intermediate image goes too (without it a
	// dangling 9 MB image was left per run).
	defer p.Client().ImageRemove(ctx, second, client.ImageRemoveOptions{PruneChildren: true})
	if first == second {
		t.Fatalf("both builds are %s: want a tag per content", first)
	}
	for _, old := range []string{recent, first} {
		if _, err := p.Client().ImageInspect(ctx, old); err == nil {
			t.Errorf("%s is still there after %s was built into the same repository, past the grace", old, second)
		}
	}
	if _, err := p.Client().ImageInspect(ctx, second); err != nil {
		t.Errorf("%s: %v", second, err)
	}
	if again, err := container.BuildScratchImage(ctx, repo, bin, "--echo-addr", ":2"); err != nil || again != second {
		t.Errorf("rebuild of the same content: %s, %v; want %s reused", again, err, second)
	}
}
