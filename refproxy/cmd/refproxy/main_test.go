package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
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
		{"every feature not implemented, at once", []string{"-f", "../../config/testdata/corpus/examples__traffic-http__config.yaml", "--validate-only"}, 2,
			"refproxy: config refused: 4 places use features refproxy does not implement:\n" +
				"../../config/testdata/corpus/examples__traffic-http__config.yaml:47: binds[0].listeners[0].routes[1].policies.urlRewrite: not implemented by refproxy\n" +
				"../../config/testdata/corpus/examples__traffic-http__config.yaml:58: binds[0].listeners[0].routes[1].policies.requestMirror: not implemented by refproxy\n" +
				"../../config/testdata/corpus/examples__traffic-http__config.yaml:62: binds[0].listeners[0].routes[1].policies.retry: not implemented by refproxy\n" +
				"../../config/testdata/corpus/examples__traffic-http__config.yaml:65: binds[0].listeners[0].routes[1].policies.timeout: not implemented by refproxy\n"},
		{"the docs' gateways style", []string{"-f", "../../config/testdata/corpus/website__rate-limits__L78.yaml", "--validate-only"}, 0,
			"website__rate-limits__L78.yaml: valid\n"},
		{"config.tracing is served (OpenTelemetry export)", []string{"-f", "../../config/testdata/corpus/examples__traffic-ratelimiting-local__config.yaml", "--validate-only"}, 0,
			"examples__traffic-ratelimiting-local__config.yaml: valid\n"},
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

// TestRunSaysIgnored: a setting that changes no traffic is said to be
// ignored, naming its place.
func TestRunSaysIgnored(t *testing.T) {
	f := t.TempDir() + "/c.yaml"
	if err := os.WriteFile(f, []byte("config:\n  statsAddr: 127.0.0.1:9000\nbinds: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := capture(t, func() int { return run([]string{"-f", f, "--validate-only"}) })
	if want := "c.yaml:2: config.statsAddr: accepted and ignored (refproxy serves no Prometheus metrics)\n"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("run = %d, %q; want 0 and %q", code, out, want)
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

// TestValidateOnlyQuotesNoSecret: --validate-only, on a config holding
// secrets (a provider's API key, inline and from the environment, a
// backend's Authorization set by a header modifier) valid or not, and a
// setting said to be ignored, says what it must without quoting one; the
// credentials flag is taken.
func TestValidateOnlyQuotesNoSecret(t *testing.T) {
	const inline, env, header = "sk-validate-inline-91f3", "sk-validate-env-4c2d", "validate-header-7e0a"
	t.Setenv("GWDIAG_VALIDATE_KEY", env)
	cfg := `
config:
  tracing: {otlpEndpoint: "http://127.0.0.1:4317"}
binds:
- port: 0
  listeners:
  - routes:
    - name: r
      policies:
        requestHeaderModifier: {set: {authorization: "Bearer ` + header + `"}}
      backends: [{host: "127.0.0.1:1"}]
llm:
  port: 0
  models:
  - {name: a, provider: openAI, params: {hostOverride: "127.0.0.1:1", apiKey: "` + inline + `"}}
  - {name: b, provider: openAI, params: {hostOverride: "127.0.0.1:2", apiKey: "$GWDIAG_VALIDATE_KEY"}}
`
	dir := t.TempDir()
	for _, tc := range []struct {
		name, yaml string
		code       int
		want       string
	}{
		{"valid", cfg, 0, "valid"},
		{"invalid elsewhere", cfg + "bogus: 1\n", 1, `unknown field "bogus"`},
		{"not implemented elsewhere", cfg + "mcp: {port: 0, targets: [{name: x, stdio: {cmd: x}}]}\n", 2, "not implement"},
	} {
		f := dir + "/" + strings.ReplaceAll(tc.name, " ", "-") + ".yaml"
		if err := os.WriteFile(f, []byte(tc.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out := capture(t, func() int { return run([]string{"-f", f, "--validate-only", "--trace-credentials-in-clear"}) })
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d %q, want %d and %q", tc.name, code, out, tc.code, tc.want)
		}
		for _, s := range []string{inline, env, header} {
			if strings.Contains(out, s) {
				t.Errorf("%s: the output quotes the secret %q:\n%s", tc.name, s, out)
			}
		}
	}
}

// freePorts returns three distinct free loopback ports: each is held until
// all are chosen, so that a port closed at once does not come back as the
// next.
func freePorts(t *testing.T) (a, b, c string) {
	t.Helper()
	var ports [3]string
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		_, ports[i], _ = net.SplitHostPort(ln.Addr().String())
	}
	return ports[0], ports[1], ports[2]
}

func TestSIGHUPReloadsAndQuitStops(t *testing.T) {
	var hits [2]atomic.Int32
	var backends [2]string
	for i := range backends {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits[i].Add(1) }))
		t.Cleanup(s.Close)
		backends[i] = strings.TrimPrefix(s.URL, "http://")
	}
	bind, admin, ready := freePorts(t)
	cfg := func(backend string) []byte {
		return fmt.Appendf(nil, "config: {adminAddr: \"127.0.0.1:%s\"}\nbinds:\n- port: %s\n  listeners:\n  - routes:\n    - backends: [{host: %q}]\n", admin, bind, backend)
	}
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, cfg(backends[0]), 0o644); err != nil {
		t.Fatal(err)
	}
	exit := make(chan int, 1)
	go func() {
		exit <- run([]string{"-f", file, "--bind-host", "127.0.0.1", "--watch=false", "--log-level", "off", "--readiness-addr", "127.0.0.1:" + ready})
	}()
	send := func() error {
		resp, err := http.Get("http://127.0.0.1:" + bind + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for send() != nil {
		if time.Now().After(deadline) {
			t.Fatal("proxy did not come up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	readiness := func() (int, error) {
		resp, err := http.Get("http://127.0.0.1:" + ready + "/healthz/ready")
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := readiness(); err != nil || code != http.StatusOK {
		t.Errorf("readiness once serving: %d, %v; want 200", code, err)
	}
	if err := os.WriteFile(file, cfg(backends[1]), 0o644); err != nil {
		t.Fatal(err)
	}
	// Without --watch only SIGHUP reloads.
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for hits[1].Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("traffic did not move to the new backend after SIGHUP")
		}
		if err := send(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := http.Post("http://127.0.0.1:"+admin+"/quitquitquit", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("exit code %d after /quitquitquit, want 0", code)
		}
		if _, err := readiness(); err == nil {
			t.Error("readiness still answers after exit")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("refproxy did not exit after /quitquitquit")
	}
}

// TestSettingsFromConfig: in the docs' gateways style, config.readinessAddr
// and config.logging stand in for --readiness-addr and --log-level.
func TestSettingsFromConfig(t *testing.T) {
	bind, admin, ready := freePorts(t)
	file := filepath.Join(t.TempDir(), "c.yaml")
	cfg := fmt.Sprintf("config:\n  adminAddr: 127.0.0.1:%s\n  readinessAddr: 127.0.0.1:%s\n  logging: {level: error}\n  tracing: {otlpEndpoint: \"http://localhost:4317\"}\n"+
		"gateways:\n  default: {port: %s}\nroutes:\n- policies: {directResponse: {status: 200, body: ok}}\n", admin, ready, bind)
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	type result struct {
		code int
		out  string
	}
	exit := make(chan result, 1)
	go func() {
		code, out := capture(t, func() int { return run([]string{"-f", file, "--bind-host", "127.0.0.1", "--watch=false"}) })
		exit <- result{code, out}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://127.0.0.1:" + ready + "/healthz/ready")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no readiness endpoint at config.readinessAddr")
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := http.Get("http://127.0.0.1:" + bind + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("the gateway's route: %d, want 200", resp.StatusCode)
	}
	resp, err = http.Post("http://127.0.0.1:"+admin+"/quitquitquit", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case r := <-exit:
		// At level error, neither the start-up line nor the warning that
		// config.tracing is ignored is logged.
		if r.code != 0 || strings.Contains(r.out, "refproxy started") || strings.Contains(r.out, "config.tracing") {
			t.Errorf("exit %d, output %q; want 0 and nothing logged below error", r.code, r.out)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("refproxy did not exit after /quitquitquit")
	}
}
