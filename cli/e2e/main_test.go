package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/clusters/toolbin"
	"github.com/gwdiag/gwdiag/refproxy"
	"github.com/gwdiag/gwdiag/refproxy/refproxytest"
	"github.com/gwdiag/gwdiag/steps/freeport"
	"github.com/gwdiag/gwdiag/steps/mock"

	"github.com/gwdiag/gwdiag/refproxy/config/configtest"
)

// gwdiagBin is the binary under test, built once by TestMain; peakRSSBin
// runs it when a test measures its memory (cli/e2e/peakrss says why).
var gwdiagBin, peakRSSBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gwdiag-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gwdiagBin = filepath.Join(dir, "gwdiag")
	peakRSSBin = filepath.Join(dir, "peakrss")
	// Static, as make build makes it: the container target builds its mock
	// image FROM scratch from gwdiag itself.
	if err := toolbin.BuildStatic(context.Background(), "", dir+"/", "github.com/gwdiag/gwdiag/cli/cmd/gwdiag", "github.com/gwdiag/gwdiag/cli/e2e/peakrss"); err != nil {
		fmt.Fprintln(os.Stderr, "building gwdiag:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is one finished run of the binary.
type result struct {
	stdout, stderr string
	code           int
	// elapsed is how long it ran, maxRSS its peak resident memory in bytes.
	elapsed time.Duration
	maxRSS  int64
}

// gwdiag runs the binary to completion (bounded by a deadline) with env
// added to the environment.
func gwdiag(t *testing.T, env []string, stdin io.Reader, args ...string) result {
	t.Helper()
	return gwdiagWithin(t, 30*time.Second, env, stdin, args...)
}

// gwdiagWithin is gwdiag with another deadline, for runs that start
// containers.
func gwdiagWithin(t *testing.T, deadline time.Duration, env []string, stdin io.Reader, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	rssFile := filepath.Join(t.TempDir(), "peak-rss")
	cmd := exec.CommandContext(ctx, peakRSSBin, append([]string{"-o", rssFile, gwdiagBin}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), elapsed: time.Since(start)}
	if kib, rerr := os.ReadFile(rssFile); rerr == nil {
		n, _ := strconv.ParseInt(string(kib), 10, 64)
		r.maxRSS = n << 10
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("running gwdiag %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("gwdiag %v did not finish in time; stderr:\n%s", args, r.stderr)
	}
	return r
}

// seenRequest is what the backend received.
type seenRequest struct {
	Method, Host, Path, Body string
	Header                   http.Header
}

// backend is the mock echo backend, recording every request it gets.
type backend struct {
	addr string
	mu   sync.Mutex
	seen []seenRequest
}

func startBackend(t *testing.T) *backend {
	t.Helper()
	b := &backend{}
	echo := mock.NewEcho()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.seen = append(b.seen, seenRequest{r.Method, r.Host, r.URL.RequestURI(), string(body), r.Header.Clone()})
		b.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		echo.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	b.addr = srv.Listener.Addr().String()
	return b
}

func (b *backend) requests() []seenRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]seenRequest(nil), b.seen...)
}

// proxy is a running reference proxy with one route to a recording backend.
type proxy struct {
	*refproxy.Proxy
	backend  *backend
	adminURL string
	port     int // the listener port
}

func startProxy(t *testing.T) *proxy {
	t.Helper()
	be := startBackend(t)
	p := startProxyYAML(t, configtest.OneRoute(be.addr))
	p.backend = be
	return p
}

// startProxyYAML runs the reference proxy in-process for a config (binds on
// port 0, admin on a free port) until the test ends.
func startProxyYAML(t *testing.T, yaml string) *proxy {
	t.Helper()
	p := refproxytest.Start(t, yaml, refproxy.WithEnv("", "", ""))
	_, portStr, err := net.SplitHostPort(p.BindAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(portStr)
	return &proxy{Proxy: p, adminURL: "http://" + p.AdminAddr(), port: port}
}

// get sends a request to the proxy listener with the given path.
func (p *proxy) get(t *testing.T, path string) {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", p.port, path))
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// adminPort returns the admin server's port.
func (p *proxy) adminPort(t *testing.T) string {
	t.Helper()
	_, port, err := net.SplitHostPort(p.AdminAddr())
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// noCurlPATH is a PATH without curl, so the binary uses its built-in client.
func noCurlPATH(t *testing.T) string {
	return "PATH=" + t.TempDir()
}

func hasCurl() bool {
	_, err := exec.LookPath("curl")
	return err == nil
}

// fakeAdmin serves h as an admin server, for error paths the reference proxy
// does not produce.
func fakeAdmin(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func lines(s string) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// closedURL returns the URL of a loopback port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	return "http://" + closedPort(t)
}

// closedPort returns a loopback address nothing listens on: a port below
// the ephemeral range. One a server on port 0 had and closed is the
// kernel's to hand out again, and under a loaded make test another test's
// server took one and answered gwdiag.
func closedPort(t *testing.T) string {
	t.Helper()
	ports, err := freeport.Pick("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
}

// portOf returns the port of an http://host:port URL.
func portOf(t *testing.T, u string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(strings.TrimPrefix(u, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	return port
}
