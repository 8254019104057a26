package e2e

import (
	"bufio"
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dockercontainer "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/gwdiag/gwdiag/clusters/toolbin"
	"github.com/gwdiag/gwdiag/steps/targets/container"
)

// hostileBin is the hostile proxy (./hostileproxy), built on first use
// beside gwdiag (TestMain removes the directory).
var hostileBin = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(filepath.Dir(gwdiagBin), "hostileproxy")
	if err := toolbin.BuildStatic(context.Background(), "", bin, "github.com/gwdiag/gwdiag/cli/e2e/hostileproxy"); err != nil {
		return "", err
	}
	return bin, nil
})

// startHostile runs the hostile proxy for one case on a free admin port and
// returns its admin URL; it is stopped when the test ends.
func startHostile(t *testing.T, bin, name string) string {
	t.Helper()
	cmd := exec.Command(bin, "-case", name, "-admin", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "admin ")
	if err != nil || !ok {
		t.Fatalf("hostile proxy: got %q, %v; want its admin address", line, err)
	}
	return "http://" + addr
}

// processesWith returns the processes whose command line holds marker.
func processesWith(marker string) []string {
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err == nil && strings.Contains(string(b), marker) {
			out = append(out, filepath.Base(filepath.Dir(f))+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// Small bounds, so that each case ends in a few seconds; the defaults are
// the same code with larger numbers (sse.DefaultLimits).
var (
	streamBounds = []string{"--max-event-bytes", "65536", "--max-trace-events", "100", "--max-trace-bytes", "1048576", "--frame-timeout", "2s"}
	bodyBounds   = []string{"--max-body-bytes", "1048576", "--timeout", "3s"}
	// deep-json needs frames and bodies larger than its 2 MB to reach the
	// JSON decoder's depth bound.
	largeStream = []string{"--max-event-bytes", "4194304", "--max-trace-bytes", "8388608"}
	largeBody   = []string{"--max-body-bytes", "4194304"}
)

// maxRSS bounds gwdiag's peak memory against a hostile proxy: a few times
// the largest bound above on top of the binary's own footprint.
const maxRSS = 200 << 20

// hostileVerdict is what gwdiag says against a hostile proxy.
type hostileVerdict struct {
	// trace and config are what `gwdiag trace` and `gwdiag config all`
	// say (exit 1), or "" for a case they read whole (exit 0).
	trace, config string
	// suite is what the failing scenarios say, in the run's output.
	suite string
}

// hostileCase is one case of the hostile-proxy matrix, run by both
// TestHostileProxies (process target) and TestHostileProxiesContainer
// (container target): a case added here runs on both.
type hostileCase struct {
	// name is the hostile proxy's -case (HOSTILE_CASE in a container).
	name string
	want hostileVerdict
	// container is the verdict when the proxy runs in a container, where
	// it differs from want (nil: the same), and why stays why it differs.
	container *hostileVerdict
	why       string
	// large runs the case with bounds above its 2 MB of JSON.
	large bool
}

// on returns the case's verdict on a target: "process" or "container".
func (c hostileCase) on(target string) hostileVerdict {
	if target == "container" && c.container != nil {
		return *c.container
	}
	return c.want
}

var hostileCases = []hostileCase{
	{name: "endless-frame", want: hostileVerdict{trace: "trace event exceeds 64 KiB (proxy sent at least", config: "config dump exceeds 1 MiB (proxy sent at least 1048577 bytes)", suite: "trace event exceeds 64 KiB"}},
	{name: "endless-dump", want: hostileVerdict{trace: "trace exceeds 1 MiB (proxy sent at least", config: "config dump exceeds 1 MiB (proxy sent at least 1048577 bytes)", suite: "trace exceeds 1 MiB"}},
	{name: "endless-trace", want: hostileVerdict{trace: "trace exceeds 100 events (proxy sent at least 101)", config: "config dump exceeds 1 MiB", suite: "trace exceeds 100 events"}},
	{name: "drip", want: hostileVerdict{trace: "trace event took longer than 2s to arrive", config: "config dump did not arrive within 3s", suite: "trace event took longer than 2s to arrive"}},
	{name: "reset", want: hostileVerdict{trace: "connection reset by peer", config: "connection reset by peer", suite: "connection reset by peer"},
		container: &hostileVerdict{trace: "trace stream ended before requestFinished (after 0 events): unexpected EOF", config: "/config_dump: unexpected EOF", suite: "unexpected EOF"},
		why:       "gwdiag's connection to a published port ends at Docker's port proxy, which answers the container's reset by closing its own side: gwdiag sees the stream end mid-frame, not the reset"},
	{name: "invalid-utf8", want: hostileVerdict{suite: "trace lacks routeSelection, policySelection, backendCallStart, backendCallResult; got [requestStarted, requestFinished]"}},
	{name: "deep-json", want: hostileVerdict{trace: "exceeded max depth", config: "exceeded max depth", suite: "exceeded max depth"}, large: true},
	{name: "restart", want: hostileVerdict{suite: "got [requestStarted, routeSelection, requestStarted, routeSelection, requestFinished]"}},
	{name: "endless-body", want: hostileVerdict{suite: "response body exceeds 1 MiB (proxy sent at least 1048577 bytes)"}},
	{name: "terminal-escapes", want: hostileVerdict{suite: `routeSelection\u001b[2K\u009b1A\u202e`}},
	{name: "huge-headers", want: hostileVerdict{trace: "/debug/trace: response header block exceeds 64 KiB", config: "/config_dump: response header block exceeds 64 KiB", suite: "server response headers exceeded 65536 bytes"}},
}

// TestHostileProxies is the hostile-proxy matrix: for each way a proxy can
// be hostile, `gwdiag trace --local --raw`, `gwdiag config all --local` and
// a conformance run on the process target each end in bounded time and
// memory with a clear message; the run writes its report and leaves no
// proxy process behind. Figures are logged (go test -v) for
// docs/hostile-proxies.md.
func TestHostileProxies(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts many processes")
	}
	bin, err := hostileBin()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range hostileCases {
		t.Run(tt.name, func(t *testing.T) {
			admin := startHostile(t, bin, tt.name)
			want := tt.on("process")
			checkHostileCLI(t, admin, tt, want)

			dir := t.TempDir()
			report := filepath.Join(dir, "report.yaml")
			// The marker is this case's binary path and case name, so
			// the leftover check sees only the proxies this run started.
			args := append([]string{"conformance", "run", "--target", "process",
				"--proxy-cmd", bin + " -case " + tt.name + " -f {config}",
				"--tags", "@trace-order", "--report", report, "--request-timeout", "3s", "--trace-timeout", "3s"}, tt.runBounds()...)
			r := gwdiag(t, nil, nil, args...)
			t.Logf("gwdiag conformance run: exit %d in %s, peak RSS %d MiB", r.code, r.elapsed.Round(time.Millisecond), r.maxRSS>>20)
			shownNotObeyed(t, "gwdiag conformance run", r)
			if r.code != 1 || !strings.Contains(r.stdout+r.stderr, want.suite) {
				t.Errorf("conformance run: got exit %d; want exit 1 with %q in its output:\n%s\n%s", r.code, want.suite, r.stdout, r.stderr)
			}
			if r.maxRSS > maxRSS {
				t.Errorf("conformance run: peak RSS %d MiB, want at most %d MiB", r.maxRSS>>20, maxRSS>>20)
			}
			if fi, err := os.Stat(report); err != nil || fi.Size() == 0 {
				t.Errorf("conformance run wrote no report: %v", err)
			}
			if left := processesWith(bin + "\x00-case\x00" + tt.name + "\x00-f"); len(left) > 0 {
				t.Errorf("the run left proxies behind:\n%s", strings.Join(left, "\n"))
			}
		})
	}
}

// bounds are the flags a case adds to streamBounds and bodyBounds.
func (c hostileCase) bounds() (stream, body []string) {
	if c.large {
		return largeStream, largeBody
	}
	return nil, nil
}

// runBounds are a conformance run's bounds flags for the case: the
// stream's and the body's, without the CLI's --timeout.
func (c hostileCase) runBounds() []string {
	stream, body := c.bounds()
	return append(append(append(append([]string(nil), streamBounds...), "--max-body-bytes", "1048576"), stream...), body...)
}

// checkHostileCLI runs `gwdiag trace --local --raw` and `gwdiag config all
// --local` against a hostile proxy's admin URL: each says what the case
// wants on its target, with its exit code, under maxRSS.
func checkHostileCLI(t *testing.T, admin string, tt hostileCase, want hostileVerdict) {
	t.Helper()
	stream, body := tt.bounds()
	for _, c := range []struct {
		cmd  string
		args []string
		want string
	}{
		{"trace", append(append([]string{"trace", "--local", "--raw", "--admin-url", admin}, streamBounds...), stream...), want.trace},
		{"config all", append(append([]string{"config", "all", "--local", "--admin-url", admin}, bodyBounds...), body...), want.config},
	} {
		r := gwdiag(t, nil, nil, c.args...)
		t.Logf("gwdiag %s: exit %d in %s, peak RSS %d MiB: %s", c.cmd, r.code, r.elapsed.Round(time.Millisecond), r.maxRSS>>20, firstLine(r.stderr))
		shownNotObeyed(t, "gwdiag "+c.cmd, r)
		switch {
		case c.want == "" && r.code != 0:
			t.Errorf("gwdiag %s: got exit %d, %q; want exit 0", c.cmd, r.code, r.stderr)
		case c.want != "" && (r.code != 1 || !strings.Contains(r.stderr, c.want)):
			t.Errorf("gwdiag %s: got exit %d, %q; want exit 1 and %q", c.cmd, r.code, r.stderr, c.want)
		}
		if r.maxRSS > maxRSS {
			t.Errorf("gwdiag %s: peak RSS %d MiB, want at most %d MiB", c.cmd, r.maxRSS>>20, maxRSS>>20)
		}
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// TestHostileProxiesContainer is the matrix on the container target: the
// hostile proxy is a static binary in a FROM scratch image, its case set by
// HOSTILE_CASE. For each case of hostileCases, `gwdiag trace --local --raw`
// and `gwdiag config all --local` against the proxy's admin port published
// from a container, and a conformance run of one scenario on the container
// target, end with the case's message under maxRSS; the run writes its
// report and leaves no container of the image.
func TestHostileProxiesContainer(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts containers")
	}
	ctx := context.Background()
	p, err := container.DockerProvider()
	if err == nil {
		err = p.Health(ctx)
		defer p.Close()
	}
	if err != nil {
		t.Skipf("no Docker daemon answers, so the container target cannot run: %v", err)
	}
	bin, err := hostileBin()
	if err != nil {
		t.Fatal(err)
	}
	image, err := container.BuildScratchImage(ctx, "gwdiag/hostileproxy-test", bin, "-bind-host", "0.0.0.0", "-f", container.DefaultConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range hostileCases {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.on("container")
			if tt.container != nil {
				if tt.why == "" {
					t.Fatal("the case's container verdict differs from the process target's: say why")
				}
				t.Logf("in a container: %s", tt.why)
			}
			admin, stop := startHostileContainer(t, image, tt.name)
			checkHostileCLI(t, admin, tt, want)
			// Removed before the run, so that the check for containers
			// of the image left behind sees only the run's.
			stop()
			report := filepath.Join(t.TempDir(), "report.yaml")
			args := append([]string{"conformance", "run", "--target", "container", "--image", image, "--pull", "never",
				"--env", "HOSTILE_CASE=" + tt.name, "--run-scenario", "A forwarded request traces every required event in order",
				"--report", report, "--request-timeout", "3s", "--trace-timeout", "3s"}, tt.runBounds()...)
			r := gwdiagWithin(t, 3*time.Minute, nil, nil, args...)
			t.Logf("gwdiag conformance run --target container: exit %d in %s, peak RSS %d MiB", r.code, r.elapsed.Round(time.Millisecond), r.maxRSS>>20)
			shownNotObeyed(t, "gwdiag conformance run --target container", r)
			if r.code != 1 || !strings.Contains(r.stdout+r.stderr, want.suite) {
				t.Errorf("got exit %d; want exit 1 with %q in its output:\n%s\n%s", r.code, want.suite, r.stdout, r.stderr)
			}
			if r.maxRSS > maxContainerRSS {
				t.Errorf("conformance run: peak RSS %d MiB, want at most %d MiB", r.maxRSS>>20, maxContainerRSS>>20)
			}
			if fi, err := os.Stat(report); err != nil || fi.Size() == 0 {
				t.Errorf("the run wrote no report: %v", err)
			}
			cs, err := p.Client().ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("ancestor", image)})
			if err != nil {
				t.Fatal(err)
			}
			if len(cs.Items) > 0 {
				t.Errorf("the run left %d containers of %s behind", len(cs.Items), image)
			}
		})
	}
}

// maxContainerRSS bounds a run on the container target, whose own
// footprint is larger than the process target's: the Docker client, and
// the mock image it builds from the gwdiag binary.
const maxContainerRSS = 400 << 20

// startHostileContainer runs the hostile proxy's image for one case, its
// admin port published on a free host port, and returns its admin URL and
// a stop that removes the container (also run when the test ends).
func startHostileContainer(t *testing.T, image, name string) (adminURL string, stop func()) {
	t.Helper()
	ctx := context.Background()
	const admin = "15000/tcp"
	// Published on loopback and dialled there when the daemon is on this
	// machine, as the container target does (testcontainers' own guess of
	// the daemon's host can be an address this machine cannot reach);
	// else on every address of the daemon's host.
	bind, dial := "127.0.0.1", "127.0.0.1"
	if h := os.Getenv("DOCKER_HOST"); h != "" && !strings.HasPrefix(h, "unix://") {
		p, err := container.DockerProvider()
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if dial, err = p.DaemonHost(ctx); err != nil {
			t.Fatal(err)
		}
		bind = "0.0.0.0"
	}
	ctr, err := testcontainers.Run(ctx, image,
		testcontainers.WithLogger(tclog.NewNoopLogger()),
		testcontainers.WithEnv(map[string]string{"HOSTILE_CASE": name}),
		testcontainers.WithFiles(testcontainers.ContainerFile{Reader: strings.NewReader("config:\n  adminAddr: 0.0.0.0:15000\n"), ContainerFilePath: container.DefaultConfigPath, FileMode: 0o644}),
		testcontainers.WithExposedPorts(admin),
		testcontainers.WithHostConfigModifier(func(hc *dockercontainer.HostConfig) {
			hc.PortBindings = network.PortMap{network.MustParsePort(admin): {{HostIP: netip.MustParseAddr(bind), HostPort: "0"}}}
		}),
		// hostileproxy prints its admin address once it listens.
		testcontainers.WithWaitStrategyAndDeadline(30*time.Second, wait.ForLog("admin ")),
	)
	// Removed even when it did not get ready: Run returns what it created.
	stop = sync.OnceFunc(func() {
		if err := testcontainers.TerminateContainer(ctr); err != nil {
			t.Errorf("removing the hostile proxy container: %v", err)
		}
	})
	t.Cleanup(stop)
	if err != nil {
		t.Fatalf("hostile proxy container: %v", err)
	}
	port, err := ctr.MappedPort(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + net.JoinHostPort(dial, port.Port())
	return u, stop
}
