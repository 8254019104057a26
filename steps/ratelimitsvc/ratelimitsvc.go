// Package ratelimitsvc runs a real global rate-limit service for the
// suite and the tests: github.com/envoyproxy/ratelimit (built from the Go
// module proxy through the tools module beside this file, into .bin, or
// into the user's cache by a gwdiag with no checkout) on Debian's
// redis-server, both on loopback, with a state directory of their own, and
// stopped with everything they made.
package ratelimitsvc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gwdiag/gwdiag/clusters/toolbin"
	"github.com/gwdiag/gwdiag/steps/await"
	"github.com/gwdiag/gwdiag/steps/freeport"
	"github.com/gwdiag/gwdiag/steps/procout"
)

// toolsModule pins github.com/envoyproxy/ratelimit, relative to the
// repository root; cacheModule is where a gwdiag with no checkout writes
// the copy it embeds (pin.go), relative to its cache directory.
const (
	toolsModule = "steps/ratelimitsvc/tools"
	cacheModule = "tools"
)

// service is the program built from the tools module.
var service = []toolbin.Program{{Name: "ratelimit", Pkg: "github.com/envoyproxy/ratelimit/src/service_cmd"}}

// EnvBin names a prebuilt service binary; when set, nothing is built.
const EnvBin = "GWDIAG_RATELIMIT_BIN"

// errEnvironment is matched (errors.Is) by every error saying that the
// machine running the suite lacks something the suite's own rate-limit
// service needs, which is no fault of the proxy under test: ErrNoRedis,
// ErrNoGo, and a build that cannot reach the Go module proxy (which also
// matches toolbin.ErrNoNetwork). Each says in one line what to do.
var errEnvironment = errors.New("the machine running the suite lacks what its rate-limit service needs")

// ErrNoRedis is returned when redis-server is not on PATH.
var ErrNoRedis error = &envError{msg: "redis-server not found on PATH (Debian: apt-get install redis-server; make test installs it)"}

// ErrNoGo is returned (or wrapped, with the go command's complaint) when
// the service must be built and there is no go command on PATH, or one too
// old to build it. The version is the go line of the pin (a test holds
// them together).
var ErrNoGo error = &envError{msg: "the global rate-limit service is built with the Go toolchain: install Go 1.26+ or set $" + EnvBin}

// envError is an error of the machine running the suite (errEnvironment).
type envError struct {
	msg string
	err error // what it wraps: toolbin.ErrNoNetwork's error
}

func (e *envError) Error() string        { return e.msg }
func (e *envError) Unwrap() error        { return e.err }
func (e *envError) Is(target error) bool { return target == errEnvironment }

// EnsureBinary returns the service binary: $GWDIAG_RATELIMIT_BIN, or
// <repo>/.bin/ratelimit in a checkout, or, with no checkout (an installed
// gwdiag), the user's cache's gwdiag/ratelimit-<hash>/ratelimit; built
// there (static) with the Go toolchain on PATH when missing or stale. log
// receives the build's output.
func EnsureBinary(ctx context.Context, log io.Writer) (string, error) {
	return ensureBinary(ctx, log, nil)
}

// ResolveBinary is EnsureBinary, which also writes one line to progress
// (if not nil) before it builds the service: for a caller that starts
// several services and resolves their binary once (Options.Binary).
func ResolveBinary(ctx context.Context, log, progress io.Writer) (string, error) {
	return ensureBinary(ctx, log, progress)
}

// ensureBinary is EnsureBinary, which writes one line to progress (if
// any) before it builds the service.
func ensureBinary(ctx context.Context, log, progress io.Writer) (string, error) {
	if p := os.Getenv(EnvBin); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("$%s: %w", EnvBin, err)
		}
		return p, nil
	}
	root, module, dir := "", toolsModule, ""
	if r, err := toolbin.RepoRoot(toolsModule); err == nil {
		root, dir = r, filepath.Join(r, ".bin")
	} else {
		if root, err = cacheRoot(); err != nil {
			return "", err
		}
		module, dir = cacheModule, root
	}
	if !toolbin.UpToDate(root, module, dir, service) {
		if _, err := exec.LookPath("go"); err != nil {
			return "", ErrNoGo
		}
		if progress != nil {
			fmt.Fprintf(progress, "building the global rate-limit service (%s) with the Go toolchain into %s; the first time takes a minute or two\n", service[0].Pkg, dir)
		}
	}
	if err := toolbin.Build(ctx, root, module, dir, service, log, toolbin.StaticEnv); err != nil {
		return "", buildError(err)
	}
	return filepath.Join(dir, service[0].Name), nil
}

// buildError makes a build that failed for want of the network or of a
// recent enough Go an errEnvironment, in one line with the go command's
// last one; other failures (a compile error) are returned as they are.
func buildError(err error) error {
	msg := strings.TrimRight(err.Error(), "\n")
	last := strings.TrimSpace(msg[strings.LastIndexByte(msg, '\n')+1:])
	// One line of output follows toolbin's own words on the same line.
	if _, after, ok := strings.Cut(last, "go build "+service[0].Pkg+": "); ok {
		last = after
	}
	switch {
	case errors.Is(err, toolbin.ErrNoNetwork):
		return &envError{err: err, msg: fmt.Sprintf("the global rate-limit service is built from the Go module proxy, which the go command cannot reach (%s): let it ($GOPROXY, $HTTPS_PROXY) or set $%s", last, EnvBin)}
	case strings.Contains(msg, "requires go >= "):
		return fmt.Errorf("%w (%s)", ErrNoGo, last)
	}
	return err
}

// Options configure a service.
type Options struct {
	// Binary is the service; empty runs EnsureBinary.
	Binary string
	// Config holds the service's rate-limit configuration files, by file
	// name (one domain each, the service's YAML format).
	Config map[string]string
	// Log receives both programs' output; nil keeps it for errors only.
	Log io.Writer
	// Progress receives one line when the service is to be built first
	// (a minute or two, once per pin); nil, none.
	Progress io.Writer
	// Host is the address the service listens on: 127.0.0.1 (the
	// default), or an address of this machine that containers reach (the
	// gateway of their network).
	Host string
}

// Service is a running rate-limit service and its Redis.
type Service struct {
	// Addr is the service's gRPC address, host:port.
	Addr string
	// HTTPAddr serves /healthcheck and /json.
	HTTPAddr string

	dir    string
	sock   string // Redis's unix socket
	bin    string
	env    []string
	out    *procout.Buffer
	redis  *exec.Cmd
	mu     sync.Mutex
	svc    *exec.Cmd
	exited chan struct{}
}

// readyTimeout bounds each program becoming ready.
const readyTimeout = 30 * time.Second

// Start starts Redis and the service and waits until the service answers
// its health check. On error nothing is left running.
func Start(ctx context.Context, o Options) (_ *Service, err error) {
	redisBin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNoRedis
	}
	if o.Binary == "" {
		if o.Binary, err = ensureBinary(ctx, o.Log, o.Progress); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "gwdiag-ratelimit-")
	if err != nil {
		return nil, err
	}
	// s is not the named result: a failed Start returns nil, and the
	// clean-up below must still see what was started.
	s := &Service{dir: dir, bin: o.Binary, out: &procout.Buffer{Tee: o.Log, Max: 1 << 20}}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	conf := filepath.Join(dir, "runtime", "ratelimit", "config")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		return nil, err
	}
	for name, text := range o.Config {
		if err := os.WriteFile(filepath.Join(conf, name), []byte(text), 0o644); err != nil {
			return nil, err
		}
	}
	sock := filepath.Join(dir, "redis.sock")
	s.sock = sock
	s.redis = exec.Command(redisBin, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", dir)
	s.redis.Stdout, s.redis.Stderr = s.out, s.out
	toolbin.DieWithParent(s.redis, false)
	if err := s.redis.Start(); err != nil {
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	if err := waitFor(ctx, func(ctx context.Context) (bool, string, error) {
		d := net.Dialer{Timeout: time.Second}
		c, err := d.DialContext(ctx, "unix", sock)
		if err != nil {
			return false, err.Error(), nil
		}
		c.Close()
		return true, "", nil
	}); err != nil {
		return nil, fmt.Errorf("redis-server did not listen on %s: %w\n%s", sock, err, s.out.Tail(20))
	}
	host := o.Host
	if host == "" {
		host = "127.0.0.1"
	}
	// The ports are free when picked but not held: another process may
	// take one before the service binds it. A service that exits at start
	// is tried again on new ports, a few times.
	for attempt := 1; ; attempt++ {
		ports, err := freeport.Pick(host, 3)
		if err != nil {
			return nil, err
		}
		s.setPorts(host, sock, ports)
		err = s.Restart(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, errExitedAtStart) || attempt == 3 {
			return nil, err
		}
	}
	return s, nil
}

// setPorts sets the service's addresses and environment for ports
// (gRPC, HTTP, debug) on host, with Redis at sock.
func (s *Service) setPorts(host, sock string, ports []int) {
	s.Addr = net.JoinHostPort(host, strconv.Itoa(ports[0]))
	s.HTTPAddr = net.JoinHostPort(host, strconv.Itoa(ports[1]))
	s.env = []string{
		"USE_STATSD=false", "LOG_LEVEL=warn",
		// Healthy only once the domain's configuration is loaded: before
		// that, every descriptor is an error.
		"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED=true",
		"REDIS_SOCKET_TYPE=unix", "REDIS_URL=" + sock,
		"RUNTIME_ROOT=" + filepath.Join(s.dir, "runtime"), "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"GRPC_HOST=" + host, "GRPC_PORT=" + strconv.Itoa(ports[0]),
		"HOST=" + host, "PORT=" + strconv.Itoa(ports[1]),
		"DEBUG_HOST=" + host, "DEBUG_PORT=" + strconv.Itoa(ports[2]),
		// The service's own x-ratelimit-* headers; refproxy writes its
		// own, with windows, from the descriptor statuses.
		"LIMIT_RESPONSE_HEADERS_ENABLED=true",
		"LIMIT_LIMIT_HEADER=x-ratelimit-limit", "LIMIT_REMAINING_HEADER=x-ratelimit-remaining", "LIMIT_RESET_HEADER=x-ratelimit-reset",
	}
}

// errExitedAtStart is wrapped by Restart when the service exits before it
// is healthy (a port taken meanwhile, a bad config).
var errExitedAtStart = errors.New("rate-limit service exited at start")

// Restart starts the service again on the same ports after Kill (or the
// first time); the counters, in Redis, survive.
func (s *Service) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.svc != nil {
		return errors.New("rate-limit service: already running")
	}
	cmd := exec.Command(s.bin)
	cmd.Env = append(os.Environ(), s.env...)
	cmd.Stdout, cmd.Stderr = s.out, s.out
	toolbin.DieWithParent(cmd, false)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("rate-limit service: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.svc, s.exited = cmd, exited
	health := &http.Client{Timeout: 2 * time.Second}
	err := waitFor(ctx, func(ctx context.Context) (bool, string, error) {
		select {
		case <-exited:
			return false, "", errExitedAtStart // told with the output below
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.HTTPAddr+"/healthcheck", nil)
		if err != nil {
			return false, "", err
		}
		resp, err := health.Do(req)
		if err != nil {
			return false, err.Error(), nil
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, "GET /healthcheck: " + resp.Status, nil
		}
		// The service opens its gRPC listener in a goroutine of its own,
		// beside the HTTP one: healthy over HTTP is not yet listening
		// over gRPC, and a proxy asking then gets no answer (a scenario's
		// first requests refused with 500, seen under load).
		d := net.Dialer{Timeout: time.Second}
		c, err := d.DialContext(ctx, "tcp", s.Addr)
		if err != nil {
			return false, "gRPC " + s.Addr + ": " + err.Error(), nil
		}
		c.Close()
		return true, "", nil
	})
	select {
	case <-exited:
		s.svc = nil
		return fmt.Errorf("%w: %v\n%s", errExitedAtStart, cmd.ProcessState, s.out.Tail(20))
	default:
	}
	if err != nil {
		return fmt.Errorf("rate-limit service not healthy at %s: %w\n%s", s.HTTPAddr, err, s.out.Tail(20))
	}
	return nil
}

// Counted is the sum of the service's counters in Redis whose keys
// contain match: what the service counted for the descriptors it names
// (envoyproxy/ratelimit's keys are domain_key_value_..._windowstart),
// read with redis-cli, which Debian's redis-server package brings.
func (s *Service) Counted(ctx context.Context, match string) (int64, error) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return 0, &envError{msg: "redis-cli not found on PATH (Debian: apt-get install redis-tools)", err: err}
	}
	keys, err := exec.CommandContext(ctx, cli, "-s", s.sock, "--scan", "--pattern", "*"+match+"*").Output()
	if err != nil {
		return 0, fmt.Errorf("redis-cli --scan: %w", err)
	}
	names := strings.Fields(string(keys))
	if len(names) == 0 {
		return 0, nil
	}
	vals, err := exec.CommandContext(ctx, cli, append([]string{"-s", s.sock, "--no-raw", "MGET"}, names...)...).Output()
	if err != nil {
		return 0, fmt.Errorf("redis-cli MGET: %w", err)
	}
	var sum int64
	for _, line := range strings.Split(strings.TrimSpace(string(vals)), "\n") {
		// --no-raw prints `1) "39"`, or `2) (nil)` for a key gone since.
		_, v, ok := strings.Cut(line, ") ")
		if !ok || v == "(nil)" {
			continue
		}
		n, err := strconv.ParseInt(strings.Trim(v, `"`), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("redis-cli MGET: counter %q is not a number", v)
		}
		sum += n
	}
	return sum, nil
}

// Kill stops the service (not Redis) at once, as an outage would.
func (s *Service) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.svc == nil {
		return
	}
	s.svc.Process.Kill()
	<-s.exited
	s.svc = nil
}

// Stop stops both programs and removes the state directory.
func (s *Service) Stop() {
	s.Kill()
	if s.redis != nil && s.redis.Process != nil {
		s.redis.Process.Kill()
		s.redis.Wait()
	}
	os.RemoveAll(s.dir)
}

// GRPCAddr is Addr.
func (s *Service) GRPCAddr() string { return s.Addr }

// Output is what both programs printed.
func (s *Service) Output() string { return s.out.String() }

// waitFor waits up to ReadyTimeout for a program to become ready.
func waitFor(ctx context.Context, ready await.Check) error {
	return await.Until(ctx, readyTimeout, 10*time.Millisecond, ready)
}
