// Package container is the container target: a proxy shipped as an image,
// run with testcontainers-go, one container per scenario, with every
// scenario's mock backends served by one container beside them.
//
// # Networking
//
// Each run creates one Docker network of its own and starts one
// mock-backend container on it, a pool (mock.Pool) that makes each
// scenario's backends on demand, each on a port of its own with a counter
// of its own. Per scenario the target asks the pool for its backends, then
// starts the proxy container, whose standalone config names the mocks by
// the mock container's address on that network. The suite reaches the
// proxy's listeners and admin server, and the pool's control API, through
// ports published on 127.0.0.1 only. A container per scenario for the
// mocks, as before, doubled the run's containers, and on a Docker host
// whose storage is slow (fuse-overlayfs) the daemon's time is most of this
// target's.
//
// With Options.Network host (--network host) the containers share this
// machine's network instead: no network of the run's, no network namespace
// and no published port per container. The proxy's admin server and
// listeners take free ports of 127.0.0.1 that the suite picks, as on the
// process target, and the mocks listen on 127.0.0.1 too. A container then
// starts in about half the time and CPU (docs/container.md); it needs a
// Docker daemon on this machine, on Linux.
//
// The mocks run in a container, rather than in this process behind the
// network's gateway, so that the proxy never has to reach the host: that
// works the same on Linux, Docker Desktop and a remote daemon, whatever the
// host's firewall says of traffic from containers. Backends are addressed
// as IP:port, as on the other targets, so no scenario depends on which way
// the proxy reaches them.
//
// # Hygiene
//
// testcontainers-go's reaper (Ryuk) needs an image pulled from a registry;
// the target disables it (TESTCONTAINERS_RYUK_DISABLED=true unless set) and
// removes what it made itself: each proxy container (and its mocks in the
// pool) when its scenario ends, and everything labelled with the run's id
// when the run ends, also after a failure or an interrupt. A run that was killed outright leaves its
// containers labelled with its process id; the next run on the host
// removes those of processes that no longer exist.
package container

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/gwdiag/gwdiag/golden/duration"
	"github.com/gwdiag/gwdiag/steps/freeport"
	"github.com/gwdiag/gwdiag/steps/mock"
	"github.com/gwdiag/gwdiag/steps/targets"
	"github.com/gwdiag/gwdiag/steps/targets/local"
)

// Defaults of Options.
const (
	DefaultConfigPath     = "/etc/proxy/config.yaml"
	DefaultAdminPort      = 15000
	DefaultStartupTimeout = 30 * time.Second
)

// Ports inside the containers: the proxy's listeners take firstListenerPort
// and up; the mock container's pool answers on poolPort, and its backends
// take free ports. unreachablePort is a port of the mock container where
// nothing listens: connecting is refused.
const (
	firstListenerPort = 10000
	poolPort          = 7999
	unreachablePort   = 9
)

// Network is how the target's containers are networked.
type Network string

// Networks.
const (
	// NetworkBridge gives the run a Docker network of its own and publishes
	// each container's ports on 127.0.0.1 (the default; any Docker daemon).
	NetworkBridge Network = "bridge"
	// NetworkHost runs the containers in this machine's network: no
	// network or published port per container. It needs a local daemon.
	NetworkHost Network = "host"
)

// PullPolicy says whether the target may pull an image that is not present
// locally.
type PullPolicy string

// Pull policies.
const (
	// PullMissing pulls an image only when it is not present (the default).
	PullMissing PullPolicy = "missing"
	// PullNever uses local images only.
	PullNever PullPolicy = "never"
)

// Options configure the container target. They load from the options file
// under "container"; the gwdiag flags --image, --config-path, --admin-port,
// --env, --pull and --mock-image set them.
type Options struct {
	// Image is the proxy's image, e.g. gwdiag/refproxy:dev.
	Image string `json:"image"`
	// ConfigPath is where the image reads its standalone config; the suite
	// copies each scenario's config there. Default /etc/proxy/config.yaml.
	ConfigPath string `json:"configPath,omitempty"`
	// AdminPort is the admin server's port inside the container; the config
	// sets adminAddr to 0.0.0.0:AdminPort. Default 15000.
	AdminPort int `json:"adminPort,omitempty"`
	// Env is set in the proxy's container.
	Env map[string]string `json:"env,omitempty"`
	// Pull is missing (default) or never.
	Pull PullPolicy `json:"pull,omitempty"`
	// Network is bridge (default) or host. With host, AdminPort is not
	// used: the admin server takes a free port of 127.0.0.1.
	Network Network `json:"network,omitempty"`
	// MockImage serves the mock backends: its entrypoint takes the flags of
	// mock.Command (the target runs it with --pool-addr :7999). Empty
	// builds one from MockBuild.
	MockImage string `json:"mockImage,omitempty"`
	// StartupTimeout bounds a scenario's containers getting ready. Default
	// 30s.
	StartupTimeout duration.Duration `json:"startupTimeout,omitempty"`

	// MockBuild is how the mock image is built when MockImage is empty
	// (gwdiag sets it to itself; tests to a mockbackend binary).
	MockBuild MockBuild `json:"-"`
	// Warnings receives what the target reports without failing the run,
	// such as leftovers of killed runs it could not remove. Default
	// os.Stderr.
	Warnings io.Writer `json:"-"`
}

// Validate checks the options a user gives.
func (o Options) Validate() error {
	switch {
	case o.Image == "":
		return errors.New("--target container needs --image (container.image), e.g. --image gwdiag/refproxy:dev")
	case o.Pull != "" && o.Pull != PullMissing && o.Pull != PullNever:
		return fmt.Errorf("--pull %q: want %s or %s", o.Pull, PullMissing, PullNever)
	case o.Network != "" && o.Network != NetworkBridge && o.Network != NetworkHost:
		return fmt.Errorf("--network %q: want %s or %s", o.Network, NetworkBridge, NetworkHost)
	case o.AdminPort < 0 || o.AdminPort > 65535:
		return fmt.Errorf("--admin-port %d: want a port, 1 to 65535", o.AdminPort)
	case o.ConfigPath != "" && !strings.HasPrefix(o.ConfigPath, "/"):
		return fmt.Errorf("--config-path %q: want an absolute path inside the container", o.ConfigPath)
	case o.StartupTimeout < 0:
		return fmt.Errorf("container.startupTimeout %s: want a positive duration", o.StartupTimeout)
	}
	for k := range o.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("--env %q: want K=V with a non-empty name", k)
		}
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.ConfigPath == "" {
		o.ConfigPath = DefaultConfigPath
	}
	if o.AdminPort == 0 {
		o.AdminPort = DefaultAdminPort
	}
	if o.Pull == "" {
		o.Pull = PullMissing
	}
	if o.Network == "" {
		o.Network = NetworkBridge
	}
	if o.StartupTimeout == 0 {
		o.StartupTimeout = duration.Duration(DefaultStartupTimeout)
	}
	if o.Warnings == nil {
		o.Warnings = os.Stderr
	}
	return o
}

// Container is the container target.
type Container struct {
	opts Options
	// Style is how the config is laid out (default binds).
	Style local.ConfigStyle

	provider *testcontainers.DockerProvider
	docker   client.APIClient
	run      string // the run's id, in every label and name
	network  *testcontainers.DockerNetwork
	bindIP   netip.Addr // where published ports listen
	dialHost string     // where the suite reaches them
	// gateway is the run network's gateway when it is an address of this
	// machine: services the suite runs for the proxy listen there.
	gateway   string
	mockImage string
	// pool is the run's mock-backend container; poolIP its address on
	// the run's network, poolAddr its control API's published address.
	pool             *testcontainers.DockerContainer
	poolIP, poolAddr string
	scenarios        atomic.Int64
	// configDir (NetworkHost) holds the proxies' configs, each
	// bind-mounted read-only into its container (proxyConfig says why).
	configDir string

	mu sync.Mutex
	// readyTimes are the start-to-ready times of the proxy containers.
	readyTimes []time.Duration
}

// New returns a container target.
func New(o Options) *Container { return &Container{opts: o.withDefaults()} }

// Name implements targets.Target.
func (*Container) Name() string { return "container" }

// ServiceAddr implements targets.ServiceHost: the run network's gateway,
// an address of this machine the containers reach, when the Docker daemon
// is local. It is set by Start.
func (c *Container) ServiceAddr() (string, bool) { return c.gateway, c.gateway != "" }

// Capabilities implements targets.Target.
func (*Container) Capabilities() []string {
	return []string{targets.CapabilityStandalone, targets.CapabilityDataPlane}
}

// ReadyTimes returns how long each proxy container took from its start to
// being ready, in order.
func (c *Container) ReadyTimes() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.readyTimes)
}

// Start implements targets.Target: it reaches the Docker daemon, removes
// what killed runs left behind, checks the images (pulling per the
// policy), builds the mock image when needed, and creates the run's
// network.
func (c *Container) Start(ctx context.Context) (err error) {
	if err := c.opts.Validate(); err != nil {
		return err
	}
	if h := os.Getenv("DOCKER_HOST"); c.host() && h != "" && !strings.HasPrefix(h, "unix://") {
		return fmt.Errorf("container target: --network host needs a Docker daemon on this machine, and DOCKER_HOST=%s may name another; use --network bridge", h)
	}
	if err := checkDockerHost(ctx); err != nil {
		return noDocker(err)
	}
	c.provider, err = DockerProvider()
	if err != nil {
		return noDocker(fmt.Errorf("container target: no Docker daemon: %w", err))
	}
	if err := c.provider.Health(ctx); err != nil {
		return noDocker(fmt.Errorf("container target: the Docker daemon does not answer (%s): %w", dockerHost(), err))
	}
	c.docker = c.provider.Client()
	if err := sweepLeftovers(ctx, c.docker); err != nil {
		fmt.Fprintf(c.opts.Warnings, "container target: warning: some of what killed runs left on the Docker host stays (remove it by hand; `docker ps -a --filter label=%s`, `docker network ls --filter label=%s` list it): %v\n", LabelRun, LabelRun, err)
	}
	if err := ensureImage(ctx, c.docker, c.opts.Image, c.opts.Pull, "--image"); err != nil {
		return err
	}
	if c.opts.MockImage != "" {
		if err := ensureImage(ctx, c.docker, c.opts.MockImage, c.opts.Pull, "--mock-image"); err != nil {
			return err
		}
		c.mockImage = c.opts.MockImage
	} else if c.mockImage, err = buildMockImage(ctx, c.provider, c.opts.MockBuild); err != nil {
		return err
	}
	c.run = newRunID()
	if c.host() {
		// The containers' 127.0.0.1 is this machine's: the suite reaches
		// them there, and they reach the services it runs there.
		c.dialHost, c.gateway = loopback, loopback
		if c.configDir, err = os.MkdirTemp("", configDirPattern()); err != nil {
			return fmt.Errorf("container target: a folder for the proxies' configs: %w", err)
		}
		// The image's user, whoever it is, may pass through it to a file
		// it is given; nobody may list it (proxyConfig).
		if err := os.Chmod(c.configDir, 0o711); err != nil {
			return fmt.Errorf("container target: a folder for the proxies' configs: %w", err)
		}
		return c.startPool(ctx)
	}
	c.network, err = tcnetwork.New(ctx, tcnetwork.WithLabels(runLabels(c.run, "network")))
	if err != nil {
		return fmt.Errorf("container target: create the run's network: %w", err)
	}
	if c.bindIP, c.dialHost, c.gateway, err = publishAddrs(ctx, c.provider, c.network); err != nil {
		return fmt.Errorf("container target: the run's network: %w", err)
	}
	return c.startPool(ctx)
}

// loopback is where everything listens with NetworkHost.
const loopback = "127.0.0.1"

// host reports whether the containers share this machine's network.
func (c *Container) host() bool { return c.opts.Network == NetworkHost }

// networked returns the options that put a container on the run's
// network with ports published (bridge), or in this machine's network
// (host), where ports need no publishing.
func (c *Container) networked(ports []string) []testcontainers.ContainerCustomizer {
	if c.host() {
		return []testcontainers.ContainerCustomizer{testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.NetworkMode = "host"
		})}
	}
	return []testcontainers.ContainerCustomizer{
		testcontainers.WithExposedPorts(ports...),
		testcontainers.WithHostConfigModifier(publish(c.bindIP, ports)),
		tcnetwork.WithNetwork(nil, c.network),
	}
}

// startPool starts the run's one mock-backend container, a pool that
// makes each scenario's backends on demand (mock.Pool): a container per
// scenario for the mocks doubled the run's containers, and the Docker
// daemon's time is most of this target's.
func (c *Container) startPool(ctx context.Context) error {
	poolAddr := ":" + strconv.Itoa(poolPort)
	if c.host() {
		free, err := freeport.Pick(loopback, 1)
		if err != nil {
			return targets.Missing("a free TCP port on 127.0.0.1 for the mock backends' pool", "free a port, or use --network bridge", err)
		}
		poolAddr = net.JoinHostPort(loopback, strconv.Itoa(free[0]))
	}
	port := strconv.Itoa(poolPort) + "/tcp"
	opts := append([]testcontainers.ContainerCustomizer{
		testcontainers.WithLogger(tclog.NewNoopLogger()),
		testcontainers.WithName("gwdiag-" + c.run + "-mocks"),
		testcontainers.WithCmd("--pool-addr", poolAddr),
		testcontainers.WithLabels(runLabels(c.run, "mocks")),
		testcontainers.WithWaitStrategy(wait.ForLog("pool listening on").
			WithStartupTimeout(time.Duration(c.opts.StartupTimeout))),
	}, c.networked([]string{port})...)
	ctr, err := testcontainers.Run(ctx, c.mockImage, opts...)
	c.pool = ctr
	if err != nil {
		// startError reads only the target of a deployment for a
		// container that is not a proxy's.
		return (&deployment{target: c}).startError(ctx, ctr, "mock backends", c.mockImage, err)
	}
	if c.host() {
		c.poolIP, c.poolAddr = loopback, poolAddr
		return nil
	}
	if c.poolIP, err = containerIP(ctx, ctr, c.network.Name); err != nil {
		return err
	}
	mapped, err := ctr.MappedPort(ctx, port)
	if err != nil {
		return fmt.Errorf("container target: the mock backends' pool: %w", err)
	}
	c.poolAddr = net.JoinHostPort(c.dialHost, mapped.Port())
	return nil
}

// LeftBehind implements targets.LeftBehind: the run's containers and
// network stay on the Docker host until removed, by hand or by the next
// run's sweep.
func (c *Container) LeftBehind() []string {
	if c.run == "" {
		return nil
	}
	f := "label=" + LabelRun + "=" + c.run
	return []string{
		fmt.Sprintf("the run's containers: docker rm -f $(docker ps -aq --filter %s)", f),
		fmt.Sprintf("then its network: docker network rm $(docker network ls -q --filter %s)", f),
		"(the next container-target run on this Docker host removes them too)",
	}
}

// Stop implements targets.Target: it removes every container and the
// network of the run, whatever state the scenarios left them in.
func (c *Container) Stop(ctx context.Context) error {
	if c.docker == nil {
		return nil
	}
	defer c.provider.Close()
	if c.run == "" {
		return nil
	}
	err := removeRun(ctx, c.docker, c.run)
	if c.configDir != "" {
		err = errors.Join(err, os.RemoveAll(c.configDir))
	}
	return err
}

// Configure implements targets.Target.
func (c *Container) Configure(ctx context.Context, setup targets.Setup) (targets.Deployment, error) {
	n := c.scenarios.Add(1)
	d := &deployment{target: c, name: fmt.Sprintf("gwdiag-%s-%d", c.run, n),
		backendAddrs: map[string]string{}, controlAddrs: map[string]string{}, listenerAddrs: map[string]string{}}
	d.Remote = mock.Remote{Control: d.control, Failed: controlError}
	if err := d.startMocks(ctx, setup); err != nil {
		d.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := d.startProxy(ctx, setup); err != nil {
		d.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	return d, nil
}

// deployment is one scenario's proxy, and its mocks in the run's pool.
type deployment struct {
	// Remote counts and releases the mock backends through their
	// published control endpoints.
	mock.Remote
	target *Container
	name   string
	proxy  *testcontainers.DockerContainer
	// mocks are the pool's ports of this scenario's backends.
	mocks []int
	// reserved are sockets holding the ports of unreachable backends
	// (NetworkHost).
	reserved []int

	admin         string
	listenerAddrs map[string]string
	backendAddrs  map[string]string // as the proxy sees them
	controlAddrs  map[string]string // as the suite reaches them
	// config is the standalone config given to the proxy's container;
	// configFile, with NetworkHost, the file it is bind-mounted from.
	config     []byte
	configFile string

	stopOnce sync.Once
	stopErr  error
	logs     string
}

// labels of a container of the deployment.
func (d *deployment) labels(role string) map[string]string { return runLabels(d.target.run, role) }

// publish is the port bindings of ports: each on bind, a free host port.
func publish(bind netip.Addr, ports []string) func(*container.HostConfig) {
	return func(hc *container.HostConfig) {
		hc.PortBindings = network.PortMap{}
		for _, p := range ports {
			hc.PortBindings[network.MustParsePort(p)] = []network.PortBinding{{HostIP: bind, HostPort: "0"}}
		}
	}
}

// startMocks asks the run's pool for a server per backend of setup.
func (d *deployment) startMocks(ctx context.Context, setup targets.Setup) error {
	c := d.target
	for _, b := range setup.Backends {
		switch b.Kind {
		case targets.BackendEcho, targets.BackendLLM:
		case targets.BackendUnreachable:
			if c.host() {
				// This machine's port 9 may serve: a port held, not listening.
				fd, port, err := local.ReservePort()
				if err != nil {
					return fmt.Errorf("backend %q: %w", b.Name, err)
				}
				d.reserved = append(d.reserved, fd)
				d.backendAddrs[b.Name] = net.JoinHostPort(loopback, strconv.Itoa(port))
				continue
			}
			d.backendAddrs[b.Name] = net.JoinHostPort(c.poolIP, strconv.Itoa(unreachablePort))
			continue
		default:
			return fmt.Errorf("backend %q: unknown kind %q", b.Name, b.Kind)
		}
		port, err := mock.PoolAdd(ctx, c.poolAddr, string(b.Kind))
		if err != nil {
			return fmt.Errorf("container target: mock backend %q from the mock container's pool: %w", b.Name, err)
		}
		d.mocks = append(d.mocks, port)
		d.backendAddrs[b.Name] = net.JoinHostPort(c.poolIP, strconv.Itoa(port))
		d.controlAddrs[b.Name] = mock.PoolControl(c.poolAddr, port)
	}
	return nil
}

// startProxy writes the scenario's config, starts the proxy's container
// with it and waits until the admin server answers /config_dump and every
// listener accepts connections.
func (d *deployment) startProxy(ctx context.Context, setup targets.Setup) error {
	if !d.target.host() {
		ports := map[string]int{}
		for i, l := range setup.Listeners {
			ports[l.Name] = firstListenerPort + i
		}
		return d.startProxyOn(ctx, setup, net.JoinHostPort("0.0.0.0", strconv.Itoa(d.target.opts.AdminPort)), ports)
	}
	// Free ports of this machine, as on the process target.
	_, err := local.RetryTakenPorts(func() (struct{}, error) {
		d.removeProxy(ctx) // the last try's
		admin, ports, err := local.ChoosePorts(setup)
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, d.startProxyOn(ctx, setup, admin, ports)
	})
	return err
}

// startProxyOn is startProxy with the admin server on adminAddr and the
// listeners on ports, inside the container (bridge) or of this machine
// (host).
func (d *deployment) startProxyOn(ctx context.Context, setup targets.Setup, adminAddr string, ports map[string]int) error {
	o := d.target.opts
	_, admin, err := net.SplitHostPort(adminAddr)
	if err != nil {
		return err
	}
	adminPort := admin + "/tcp"
	exposed := []string{adminPort}
	var listenerPorts []string
	for _, l := range setup.Listeners {
		p := strconv.Itoa(ports[l.Name]) + "/tcp"
		exposed = append(exposed, p)
		listenerPorts = append(listenerPorts, p)
	}
	yml, err := local.StandaloneConfig(setup, d.target.Style, adminAddr, ports, d.backendAddrs)
	if err != nil {
		return err
	}
	d.config = yml
	config, err := d.proxyConfig(yml)
	if err != nil {
		return err
	}
	started := time.Now()
	opts := append([]testcontainers.ContainerCustomizer{
		testcontainers.WithLogger(tclog.NewNoopLogger()),
		testcontainers.WithName(d.name + "-proxy"),
		testcontainers.WithEnv(o.Env),
		testcontainers.WithLabels(d.labels("proxy")),
		config,
		testcontainers.WithWaitStrategyAndDeadline(time.Duration(o.StartupTimeout), onHost(d.target.dialHost,
			wait.ForHTTP("/config_dump").WithPort(adminPort).WithPollInterval(20*time.Millisecond),
			forListeners(listenerPorts...))),
	}, d.target.networked(exposed)...)
	ctr, err := testcontainers.Run(ctx, o.Image, opts...)
	d.proxy = ctr
	if err != nil {
		return d.startError(ctx, ctr, "proxy", o.Image, err)
	}
	d.target.mu.Lock()
	d.target.readyTimes = append(d.target.readyTimes, time.Since(started))
	d.target.mu.Unlock()
	if d.admin, err = d.mapped(ctx, ctr, adminPort); err != nil {
		return err
	}
	for _, l := range setup.Listeners {
		if d.listenerAddrs[l.Name], err = d.mapped(ctx, ctr, strconv.Itoa(ports[l.Name])+"/tcp"); err != nil {
			return err
		}
	}
	return nil
}

// proxyConfig puts the standalone config at Options.ConfigPath in the
// proxy's container. On the bridge network, where the daemon may be
// another machine's, it is copied in. With NetworkHost the daemon is this
// machine's, and the file is bind-mounted read-only from the run's
// configDir: a copy into a container costs the daemon a re-execution of
// itself to unpack it (docker-untar; about 0.2 s of CPU here, 2026-12-05,
// docs/container.md), once for each of the hundreds of proxy containers
// the container fault catalogue starts. The config may hold the
// scenario's credentials, and the image's user is unknown, so the file is
// readable by all, under a random name in a folder nobody may list.
func (d *deployment) proxyConfig(yml []byte) (testcontainers.ContainerCustomizer, error) {
	target := d.target.opts.ConfigPath
	if !d.target.host() {
		return testcontainers.WithFiles(testcontainers.ContainerFile{Reader: bytes.NewReader(yml), ContainerFilePath: target, FileMode: 0o644}), nil
	}
	f, err := os.CreateTemp(d.target.configDir, "*-"+path.Base(target))
	if err == nil {
		_, err = f.Write(yml)
		err = errors.Join(err, f.Chmod(0o644), f.Close())
	}
	if err != nil {
		return nil, fmt.Errorf("container target: the proxy's config: %w", err)
	}
	file := f.Name()
	d.configFile = file
	return testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: file, Target: target, ReadOnly: true})
	}), nil
}

// removeProxy removes a proxy container that did not start, before
// another try.
func (d *deployment) removeProxy(ctx context.Context) {
	if d.proxy != nil {
		_ = d.proxy.Terminate(context.WithoutCancel(ctx))
	}
	d.proxy, d.logs = nil, ""
	d.removeConfigFile()
}

// removeConfigFile removes the file the proxy's config was bind-mounted
// from (NetworkHost), once its container is gone: the credentials it may
// hold stay on disk no longer than the scenario.
func (d *deployment) removeConfigFile() error {
	if d.configFile == "" {
		return nil
	}
	err := os.Remove(d.configFile)
	d.configFile = ""
	return err
}

func (d *deployment) mapped(ctx context.Context, ctr *testcontainers.DockerContainer, port string) (string, error) {
	p, err := ctr.MappedPort(ctx, port)
	if err != nil {
		return "", fmt.Errorf("port %s of %s: %w", port, d.name, err)
	}
	return net.JoinHostPort(d.target.dialHost, p.Port()), nil
}

// startError explains why a container did not get ready: it exited (with
// its code), or it did not answer in time; with its last log lines.
func (d *deployment) startError(ctx context.Context, ctr *testcontainers.DockerContainer, what, image string, err error) error {
	ctx = context.WithoutCancel(ctx)
	if ctr == nil {
		return fmt.Errorf("container target: start the %s container (image %s): %w", what, image, err)
	}
	logs := tailLogs(ctx, ctr)
	msg := fmt.Sprintf("container target: the %s container (image %s) was not ready within %s: %v", what, image, time.Duration(d.target.opts.StartupTimeout), err)
	if st, serr := ctr.State(ctx); serr == nil && !st.Running {
		msg = fmt.Sprintf("container target: the %s container (image %s) exited with code %d before it was ready", what, image, st.ExitCode)
	} else if what == "proxy" {
		msg += "\n" + d.portHint(ctx, ctr)
	}
	if logs == "" {
		return errors.New(msg + "; it wrote no logs")
	}
	if what == "proxy" {
		d.logs = logs
	}
	return fmt.Errorf("%s; its last log lines:\n%s", msg, logs)
}

// portHint says which ports the suite waited on, and which the image
// declares, so that a wrong --admin-port shows.
func (d *deployment) portHint(ctx context.Context, ctr *testcontainers.DockerContainer) string {
	o := d.target.opts
	hint := fmt.Sprintf("the suite waits for /config_dump on admin port %d/tcp (--admin-port; the config sets adminAddr 0.0.0.0:%d) and for the listeners on ports %d and up",
		o.AdminPort, o.AdminPort, firstListenerPort)
	img, err := d.target.docker.ImageInspect(ctx, o.Image)
	if err != nil || img.Config == nil {
		return hint
	}
	var declared []string
	for p := range img.Config.ExposedPorts {
		declared = append(declared, p)
	}
	slices.Sort(declared)
	if len(declared) == 0 {
		return hint + "; the image declares no ports (EXPOSE)"
	}
	return hint + "; the image declares " + strings.Join(declared, ", ")
}

// ListenerAddr implements targets.Deployment.
func (d *deployment) ListenerAddr(listener string) (string, error) {
	return targets.Named(d.listenerAddrs, "listener", listener)
}

// AdminAddr implements targets.Deployment.
func (d *deployment) AdminAddr() string { return d.admin }

// BackendAddr implements targets.Deployment: the mock's address on the
// run's network, as the proxy calls it.
func (d *deployment) BackendAddr(backend string) (string, error) {
	return targets.Named(d.backendAddrs, "backend", backend)
}

// control is the published address of a mock's control endpoint.
func (d *deployment) control(backend string) (string, error) {
	return targets.Named(d.controlAddrs, "mock backend", backend)
}

// controlError is the error of a mock backend whose control endpoint did
// not answer.
func controlError(backend, _ string, err error) error {
	return fmt.Errorf("mock backend %q: %w", backend, err)
}

// ProxyLogs implements targets.LogKeeper.
func (d *deployment) ProxyLogs() string { return d.logs }

// ProxyConfig implements targets.ConfigKeeper: the config copied into the
// proxy's container.
func (d *deployment) ProxyConfig() (string, []byte) {
	return path.Base(d.target.opts.ConfigPath), d.config
}

// Stop implements targets.Deployment: it keeps the proxy's logs, then
// removes its container and closes its mock backends.
func (d *deployment) Stop(ctx context.Context) error {
	d.stopOnce.Do(func() {
		var errs []error
		if d.proxy != nil {
			if d.logs == "" {
				d.logs = tailLogs(ctx, d.proxy)
			}
			errs = append(errs, d.proxy.Terminate(ctx))
		}
		errs = append(errs, d.removeConfigFile())
		for _, port := range d.mocks {
			if err := mock.PoolRemove(ctx, d.target.poolAddr, port); err != nil {
				errs = append(errs, fmt.Errorf("mock backend on port %d of the pool: %w", port, err))
			}
		}
		for _, fd := range d.reserved {
			syscall.Close(fd)
		}
		d.stopErr = errors.Join(errs...)
	})
	return d.stopErr
}

// tailLogs returns the end of a container's logs (stdout and stderr).
func tailLogs(ctx context.Context, ctr *testcontainers.DockerContainer) string {
	rc, err := ctr.Logs(ctx)
	if err != nil {
		return ""
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 4<<20))
	return targets.TailLogs(string(b))
}

// containerIP is the container's address on the named network.
func containerIP(ctx context.Context, ctr *testcontainers.DockerContainer, networkName string) (string, error) {
	in, err := ctr.Inspect(ctx)
	if err != nil {
		return "", err
	}
	if in.NetworkSettings != nil {
		if ep, ok := in.NetworkSettings.Networks[networkName]; ok && ep.IPAddress.IsValid() {
			return ep.IPAddress.String(), nil
		}
	}
	return "", fmt.Errorf("container %s has no address on network %s (networks: %v)", in.Name, networkName,
		slices.Collect(maps.Keys(in.NetworkSettings.Networks)))
}

// DockerProvider returns testcontainers' Docker provider as the target
// uses it: with the reaper (Ryuk) disabled, since its image cannot be
// assumed pullable and the target removes what it makes itself, and
// without testcontainers' progress lines. Everything of this module that
// reaches Docker gets its provider here, because testcontainers reads its
// configuration once per process, at the first provider.
func DockerProvider() (*testcontainers.DockerProvider, error) {
	quietOnce.Do(func() {
		if _, set := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !set {
			os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
		}
		tclog.SetDefault(tclog.NewNoopLogger())
	})
	return testcontainers.NewDockerProvider(testcontainers.WithLogger(tclog.NewNoopLogger()))
}

// quietOnce sets testcontainers' process-wide settings once: callers at
// once (parallel tests, a run building images while another starts
// containers) raced on its default logger.
var quietOnce sync.Once

// checkDockerHost fails when DOCKER_HOST names a daemon that does not
// answer. testcontainers would try the next place a daemon may be (the
// default socket) and run the suite on another daemon than the user named.
func checkDockerHost(ctx context.Context) error {
	if os.Getenv("DOCKER_HOST") == "" {
		return nil
	}
	cli, err := client.New(client.FromEnv)
	if err == nil {
		defer cli.Close()
		_, err = cli.Ping(ctx, client.PingOptions{})
	}
	if err != nil {
		return fmt.Errorf("container target: no Docker daemon answers at %s: %w", dockerHost(), err)
	}
	return nil
}

// noDocker is the container target's want of a Docker daemon: the suite's
// environment, not the proxy.
func noDocker(err error) error {
	return targets.Missing("a Docker daemon", "start Docker (Debian: apt-get install docker.io), or set DOCKER_HOST to a daemon this machine reaches", err)
}

// dockerHost names the daemon the target tries, for errors.
func dockerHost() string {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return "DOCKER_HOST=" + h
	}
	return "the default socket, /var/run/docker.sock"
}
