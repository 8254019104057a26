package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/gwdiag/gwdiag/steps/target/container"
)

// hostileBin is the hostile proxy (./hostileproxy), built on first use.
var hostileBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "gwdiag-hostile")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "hostileproxy")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/gwdiag/gwdiag/cli/e2e/hostileproxy").CombinedOutput()
	if err != nil {
		return "", &buildError{out: string(out), err: err}
	}
	return bin, nil
})

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return "go build hostileproxy: " + e.err.Error() + "\n" + e.out }

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

// TestHostileProxies is the hostile-proxy matrix: for each way a proxy can
// be hostile, `gwdiag trace --local --raw`, `gwdiag config all --local` and
// a conformance run on the process target each end in bounded time and
// memory with a clear message; the run writes its report and leaves no
// proxy process behind. Figures are logged (go test -v) for
// docs/hostile-proxies.md.
func TestHostileProxies(t *testing.T) {
	if testing.Short() {
		t.Skip("starts many processes")
	}
	bin, err := hostileBin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(bin)) })
	tests := []struct {
		name string
		// trace and config are what gwdiag says (exit 1), or "" for a
		// case it reads whole (exit 0).
		trace, config string
		// suite is what the failing scenarios say, in the run's output.
		suite string
		large bool
	}{
		{name: "endless-frame", trace: "trace event exceeds 64 KiB (proxy sent at least", config: "config dump exceeds 1 MiB (proxy sent at least 1048577 bytes)", suite: "trace event exceeds 64 KiB"},
		{name: "endless-dump", trace: "trace exceeds 1 MiB (proxy sent at least", config: "config dump exceeds 1 MiB (proxy sent at least 1048577 bytes)", suite: "trace exceeds 1 MiB"},
		{name: "endless-trace", trace: "trace exceeds 100 events (proxy sent at least 101)", config: "config dump exceeds 1 MiB", suite: "trace exceeds 100 events"},
		{name: "drip", trace: "trace event took longer than 2s to arrive", config: "config dump did not arrive within 3s", suite: "trace event took longer than 2s to arrive"},
		{name: "reset", trace: "connection reset by peer", config: "connection reset by peer", suite: "connection reset by peer"},
		{name: "invalid-utf8", suite: "trace lacks routeSelection, policySelection, backendCallStart, backendCallResult; got [requestStarted, requestFinished]"},
		{name: "deep-json", trace: "exceeded max depth", config: "exceeded max depth", suite: "exceeded max depth", large: true},
		{name: "restart", suite: "got [requestStarted, routeSelection, requestStarted, routeSelection, requestFinished]"},
		{name: "endless-body", suite: "response body exceeds 1 MiB (proxy sent at least 1048577 bytes)"},
		{name: "huge-headers", trace: "/debug/trace: response header block exceeds 64 KiB", config: "/config_dump: response header block exceeds 64 KiB", suite: "server response headers exceeded 65536 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			admin := startHostile(t, bin, tt.name)
			var stream, body []string
			if tt.large {
				stream, body = largeStream, largeBody
			}
			for _, c := range []struct {
				cmd  string
				args []string
				want string
			}{
				{"trace", append(append([]string{"trace", "--local", "--raw", "--admin-url", admin}, streamBounds...), stream...), tt.trace},
				{"config all", append(append([]string{"config", "all", "--local", "--admin-url", admin}, bodyBounds...), body...), tt.config},
			} {
				r := gwdiag(t, nil, nil, c.args...)
				t.Logf("gwdiag %s: exit %d in %s, peak RSS %d MiB: %s", c.cmd, r.code, r.elapsed.Round(time.Millisecond), r.maxRSS>>20, firstLine(r.stderr))
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

			dir := t.TempDir()
			report := filepath.Join(dir, "report.yaml")
			// The marker is this case's binary path and case name, so
			// the leftover check sees only the proxies this run started.
			args := append([]string{"conformance", "run", "--target", "process",
				"--proxy-cmd", bin + " -case " + tt.name + " -f {config}",
				"--tags", "@trace-order", "--report", report, "--request-timeout", "3s", "--trace-timeout", "3s"}, streamBounds...)
			args = append(append(append(args, "--max-body-bytes", "1048576"), stream...), body...)
			r := gwdiag(t, nil, nil, args...)
			t.Logf("gwdiag conformance run: exit %d in %s, peak RSS %d MiB", r.code, r.elapsed.Round(time.Millisecond), r.maxRSS>>20)
			if r.code != 1 || !strings.Contains(r.stdout+r.stderr, tt.suite) {
				t.Errorf("conformance run: got exit %d; want exit 1 with %q in its output:\n%s\n%s", r.code, tt.suite, r.stdout, r.stderr)
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

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// TestHostileProxiesContainer: the matrix's cases that end a trace by a
// bound, on the container target: the hostile proxy is a static binary in
// a FROM scratch image, its case set by --env. Each run ends with the
// bound's message, its report, and no container of the image left.
func TestHostileProxiesContainer(t *testing.T) {
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
	dir := t.TempDir()
	bin := filepath.Join(dir, "hostileproxy")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/gwdiag/gwdiag/cli/e2e/hostileproxy")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build hostileproxy: %v\n%s", err, out)
	}
	image, err := container.BuildScratchImage(ctx, "gwdiag/hostileproxy-test", bin, "-bind-host", "0.0.0.0", "-f", container.DefaultConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, want string }{
		{"endless-frame", "trace event exceeds 64 KiB"},
		{"endless-trace", "trace exceeds 100 events"},
		{"drip", "trace event took longer than 2s to arrive"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			report := filepath.Join(t.TempDir(), "report.yaml")
			args := append([]string{"conformance", "run", "--target", "container", "--image", image, "--pull", "never",
				"--env", "HOSTILE_CASE=" + tt.name, "--run-scenario", "A forwarded request traces every required event in order",
				"--report", report, "--request-timeout", "3s", "--trace-timeout", "3s"}, streamBounds...)
			r := gwdiagWithin(t, 3*time.Minute, nil, nil, args...)
			t.Logf("gwdiag conformance run --target container: exit %d in %s, peak RSS %d MiB", r.code, r.elapsed.Round(time.Millisecond), r.maxRSS>>20)
			if r.code != 1 || !strings.Contains(r.stdout, tt.want) {
				t.Errorf("got exit %d; want exit 1 with %q in its output:\n%s\n%s", r.code, tt.want, r.stdout, r.stderr)
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
