package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gwdiag/gwdiag/clusters/kube"
	"github.com/gwdiag/gwdiag/clusters/kube/images"
	"github.com/gwdiag/gwdiag/clusters/toolbin"
)

// ErrNotRoot is returned (wrapped) by StartCluster when the process is not
// root: containerd, runc, the bridge and the cgroups all need it.
var ErrNotRoot = errors.New("a local node needs root (containerd, runc, a network bridge and cgroups)")

// errNotLinux is returned by StartCluster on any other system: the node's
// containerd, runc and kubelet are Linux programs. A cluster of kind (in
// Docker Desktop's Linux VM, say) or any kubeconfig serves there instead.
var errNotLinux = errors.New("a local node runs on Linux only; use --cluster kind or --kubeconfig")

// pauseImage is the sandbox image of the node's pods, packed from
// clusters/kube/cmd/pause and imported before the kubelet starts.
const pauseImage = "gwdiag.local/pause:dev"

// NodeName is the name the kubelet registers.
const NodeName = "gwdiag-local-node"

// ClusterOptions configure StartCluster; the zero value works (root and a
// repository checkout needed, to build the binaries).
type ClusterOptions struct {
	// Binaries hold kube-apiserver, etcd, kubelet, kube-controller-manager
	// and kube-scheduler; zero means kube.EnsureNodeBinaries.
	Binaries kube.Binaries
	// Images are packed and imported into containerd besides the pause
	// image; pods use them with imagePullPolicy: Never.
	Images []images.Image
	// PodCIDR is the pods' network, on a bridge of the node's own; the
	// bridge takes its first address, which is also the node's address.
	// Default 10.244.0.0/16.
	PodCIDR string
	// PackageCache keeps Debian's containerd, runc and CNI packages
	// between runs. Default $TMPDIR/gwdiag-node-packages.
	PackageCache string
	// ImageCache keeps the packed images (pause, and Images) between
	// starts, a few builds of them (images.CachedTarball). Default
	// $TMPDIR/gwdiag-node-images.
	ImageCache string
	// StartTimeout bounds the start, up to the node being Ready. Default
	// 3 minutes (on 2 cores under load, about 10 s idle).
	StartTimeout time.Duration
	// Output, when set, also receives every process's log (each is kept
	// under the state directory and quoted in start errors anyway).
	Output io.Writer

	// lockHeld says the caller holds LockMachine for this start (tests that
	// compare the machine before and after).
	lockHeld bool
}

// A Cluster is a running single-node Kubernetes cluster on this machine:
// etcd, kube-apiserver, kube-controller-manager and kube-scheduler as host
// processes, and a kubelet running pods through containerd and runc, with
// a CNI bridge of its own. It has no kube-proxy (ClusterIPs are not
// routed; port-forward and pod IPs are) and no cluster DNS. Only one runs
// on a machine at a time: StartCluster waits for the one before to stop.
// ../shared/reference/LOCAL-CLUSTER.md records why each setting is what
// it is.
type Cluster struct {
	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// KubeconfigPath is a kubeconfig file for Config; removed by Stop.
	KubeconfigPath string
	// HostAddr is the node's address: the bridge's own address, which pods
	// reach and the host listens on (the global rate-limit service of the
	// suite listens there).
	HostAddr string
	// State is the directory the cluster owns; removed by Stop.
	State string
	// Waited is how long StartCluster waited for another local node to
	// stop; Took is how long the start took after that, to a Ready node.
	Waited, Took time.Duration
	// Phases are the parts of Took, in the order they ended: where the
	// start's time goes (the progress view and docs/ci.md quote them).
	Phases []Phase

	// loop is the loopback address the control plane listens on: one of
	// the run's own in 127.0.0.0/8, so a port picked free for it cannot be
	// taken in between by a test server on 127.0.0.1 (they bind different
	// addresses), which once made kube-apiserver fail with "address
	// already in use" on a busy machine.
	loop string

	// mark is when the last phase of the main line ended (phase); mu
	// guards Phases, which containerd's start adds to at the same time.
	mark time.Time
	mu   sync.Mutex

	rec        *record
	containerd *Containerd
	procs      []*proc
	unlock     func()
}

// A Phase is one part of a start and how long it took (from the end of
// the phase before; parts that run at the same time say so in their name).
type Phase struct {
	Name string
	Took time.Duration
}

// String is "name 1.2s".
func (p Phase) String() string {
	return fmt.Sprintf("%s %s", p.Name, p.Took.Round(10*time.Millisecond))
}

// phase records the end of a part of the start on its main line (the
// control plane, then the kubelet).
func (c *Cluster) phase(name string) { c.mark = c.addPhase(name, c.mark) }

// addPhase records a part of the start that began at since and ends now,
// and returns now.
func (c *Cluster) addPhase(name string, since time.Time) time.Time {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Phases = append(c.Phases, Phase{Name: name, Took: now.Sub(since)})
	return now
}

// StartCluster starts a node and waits until it is Ready, with the
// Gateway API and policy CRDs installed. It first removes what a run
// killed before its Stop left (processes, bridge, cgroups, sysctls, state).
// Stop releases everything; on a failed start, StartCluster releases it.
func StartCluster(ctx context.Context, o ClusterOptions) (c *Cluster, err error) {
	if runtime.GOOS != "linux" {
		return nil, errNotLinux
	}
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	called := time.Now()
	if o.StartTimeout == 0 {
		o.StartTimeout = 3 * time.Minute
	}
	if o.PodCIDR == "" {
		o.PodCIDR = "10.244.0.0/16"
	}
	if o.PackageCache == "" {
		o.PackageCache = filepath.Join(os.TempDir(), "gwdiag-node-packages")
	}
	if o.ImageCache == "" {
		o.ImageCache = filepath.Join(os.TempDir(), "gwdiag-node-images")
	}
	bridgeIP, subnet, err := net.ParseCIDR(o.PodCIDR)
	if err != nil || bridgeIP.To4() == nil {
		return nil, fmt.Errorf("local node: pod CIDR %q: want an IPv4 network such as 10.244.0.0/16", o.PodCIDR)
	}
	hostIP := nextIP(subnet.IP)
	bins := o.Binaries
	if bins.Dir == "" {
		if bins, err = kube.EnsureNodeBinaries(ctx, nil); err != nil {
			return nil, fmt.Errorf("local node: %w", err)
		}
	}
	pkgs, err := FetchPackages(ctx, o.PackageCache, nil)
	if err != nil {
		return nil, fmt.Errorf("local node: %w", err)
	}
	fetched := time.Now()
	// The images are packed before the machine lock is taken and the
	// start's timeout runs: packing is this run's own CPU work (a second
	// from the cache; a minute and more on a loaded machine when the
	// binaries changed), which need not hold up another run's node or
	// count against this one's start.
	pack, err := packImages(ctx, o)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(pack.dir)

	began := time.Now()
	unlock := func() {}
	if !o.lockHeld {
		if unlock, err = LockMachine(ctx); err != nil {
			return nil, err
		}
	}
	locked := time.Now()
	if err := sweep(); err != nil {
		unlock()
		return nil, fmt.Errorf("local node: removing what an earlier run left: %w", err)
	}
	state, err := os.MkdirTemp("", statePrefix)
	if err != nil {
		unlock()
		return nil, err
	}
	id := strings.TrimPrefix(filepath.Base(state), statePrefix)
	if len(id) > 8 {
		id = id[:8] // an interface name has at most 15 bytes
	}
	c = &Cluster{State: state, HostAddr: hostIP.String(), loop: kube.LoopbackAddr(), unlock: unlock, mark: locked,
		Phases: []Phase{{Name: "binaries, packages", Took: fetched.Sub(called)}, {Name: "build pause", Took: pack.pauseTook},
			{Name: pack.phase(), Took: began.Sub(fetched) - pack.pauseTook}, {Name: "wait for another node", Took: locked.Sub(began)}},
		rec: &record{file: filepath.Join(state, recordFile), Bridge: "gwdn" + id, CgroupRoot: filepath.Base(state)}}
	defer func() {
		if err != nil {
			_ = c.Stop()
			c = nil
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	if err := c.rec.saveSysctls(); err != nil {
		return c, err
	}
	ones, _ := subnet.Mask.Size()
	c.phase("sweep")
	if err := c.network(pkgs, fmt.Sprintf("%s/%d", hostIP, ones), subnet.String()); err != nil {
		return c, fmt.Errorf("local node: network: %w", err)
	}
	c.phase("network")
	// containerd (with the images imported) and the control plane need
	// nothing of each other; the kubelet needs both. Started one after
	// the other, the images' packing and import waited for nothing.
	// The CRDs' install, once the API server answers, overlaps the start
	// of the rest (kube-controller-manager's, whose default ServiceAccount
	// the node waits for, takes longest).
	sideCtx, cancelSide := context.WithCancel(ctx)
	defer cancelSide()
	ctrd, crds := make(chan error, 1), make(chan error, 1)
	go func() { ctrd <- c.startContainerd(sideCtx, o, pkgs, pack.tarball) }()
	cpErr := c.startControlPlane(ctx, bins, o)
	if cpErr != nil {
		cancelSide()
		crds <- nil
	} else {
		go func() {
			mark := time.Now()
			err := kube.InstallCRDs(c.Config)
			c.addPhase("in parallel: CRDs", mark)
			if err != nil {
				err = fmt.Errorf("local node: %w", err)
			}
			crds <- err
		}()
	}
	if err := errors.Join(cpErr, <-ctrd); err != nil {
		cancelSide()
		return c, errors.Join(err, <-crds)
	}
	c.phase("wait for containerd")
	err = c.startKubelet(ctx, bins, o)
	if err := errors.Join(err, <-crds); err != nil {
		return c, err
	}
	c.phase("wait for the CRDs")
	c.Waited, c.Took = locked.Sub(began), time.Since(locked)
	return c, nil
}

// Stop stops every process the cluster started, the pods with them, and
// removes the bridge, the cgroups, the state and the kubeconfig, and puts
// back the sysctls the kubelet changed. It is safe to call twice.
func (c *Cluster) Stop() error {
	if c == nil || c.unlock == nil {
		return nil
	}
	var errs []error
	// The kubelet first, so that it does not restart what containerd stops;
	// then the pods with containerd; the control plane last.
	for i := len(c.procs) - 1; i >= 0; i-- {
		if c.procs[i].name == "kubelet" {
			c.procs[i].stop()
		}
	}
	if c.containerd != nil {
		errs = append(errs, c.containerd.Stop())
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop()
	}
	errs = append(errs, c.rec.release())
	errs = append(errs, os.RemoveAll(c.State))

	c.unlock()
	c.unlock = nil
	return errors.Join(errs...)
}

// LeftBehind says what stays on the machine when gwdiag exits without Stop
// (a second Ctrl-C), and how to remove it. The processes die with gwdiag
// (their parent-death signal); what they changed is in the record.
func (c *Cluster) LeftBehind() []string {
	if c == nil || c.rec == nil {
		return nil
	}
	out := []string{
		fmt.Sprintf("the local node's changes to this machine (bridge %s, cgroups, sysctls, an iptables FORWARD rule, pod shims), recorded in %s: the next local-node start undoes them (gwdiag conformance run --target cluster --cluster local-node, as root)", c.rec.Bridge, c.rec.file),
		fmt.Sprintf("or by hand: ip link del %s", c.rec.Bridge),
	}
	if len(c.rec.ForwardRule) > 0 {
		out = append(out, "and: iptables -D "+strings.Join(c.rec.ForwardRule, " "))
	}
	return append(out, "and: rm -r "+c.State)
}

// Logs returns the end of a process's log ("kubelet", "kube-apiserver",
// "containerd", ...), for errors and reports; valid until Stop.
func (c *Cluster) Logs(name string) string {
	b, _ := os.ReadFile(filepath.Join(c.State, "logs", name+".log"))
	const max = 4 << 10
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// network makes the pods' bridge, with the node's address on it, and the
// CNI config that puts every pod on it.
func (c *Cluster) network(pkgs Packages, hostCIDR, subnet string) error {
	if err := c.rec.update(); err != nil { // the bridge is named before it exists
		return err
	}
	for _, args := range [][]string{
		{"link", "add", "name", c.rec.Bridge, "type", "bridge"},
		{"addr", "add", hostCIDR, "dev", c.rec.Bridge},
		{"link", "set", c.rec.Bridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
	}
	if err := c.allowForwarding(); err != nil {
		return err
	}
	conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "gwdiag",
  "plugins": [
    {"type": "bridge", "bridge": %q, "isGateway": false, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q, "gateway": %q}]]}},
    {"type": "loopback"}
  ]
}
`, c.rec.Bridge, filepath.Join(c.State, "cni", "ipam"), subnet, c.HostAddr)
	dir := filepath.Join(c.State, "cni", "net.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "10-gwdiag.conflist"), []byte(conf), 0o644)
}

// allowForwarding lets pods talk to each other across the bridge where a
// firewall would drop it: Docker sets the FORWARD policy to DROP, and with
// bridge-nf-call-iptables on, bridged traffic passes FORWARD. Probes and
// port-forwards come from the host and never do, so without this only
// pod-to-pod traffic (the proxy calling its backends) fails. The rule is
// recorded first, and removed by Stop or the next run's sweep.
func (c *Cluster) allowForwarding() error {
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil // no iptables, no firewall to pass
	}
	c.rec.ForwardRule = []string{"FORWARD", "-i", c.rec.Bridge, "-o", c.rec.Bridge, "-m", "comment", "--comment", "gwdiag local node", "-j", "ACCEPT"}
	if err := c.rec.update(); err != nil {
		return err
	}
	args := append([]string{"-w", "-I"}, c.rec.ForwardRule...)
	if out, err := exec.Command("iptables", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// startContainerd starts containerd and imports the pause image and the
// images of the options.
func (c *Cluster) startContainerd(ctx context.Context, o ClusterOptions, pkgs Packages, tarball string) error {
	mark := time.Now()
	phase := func(name string) { mark = c.addPhase("in parallel: "+name, mark) }
	log, err := c.logFile("containerd", o.Output)
	if err != nil {
		return err
	}
	c.containerd, err = StartContainerd(ctx, ContainerdOptions{State: c.State, Packages: pkgs, SandboxImage: pauseImage, Output: log})
	if err != nil {
		return fmt.Errorf("local node: %w\ncontainerd log:\n%s", err, c.Logs("containerd"))
	}
	if err := c.rec.addProc("containerd", c.containerd.Pid()); err != nil {
		return err
	}
	phase("containerd")
	if err := c.containerd.Import(ctx, tarball); err != nil {
		return fmt.Errorf("local node: import images: %w", err)
	}
	phase("import images")
	return nil // StartCluster removes the tarball's directory
}

// packed is the tarball of a node's images (the pause image and
// ClusterOptions.Images), in a directory of its own that the start removes.
type packed struct {
	dir, tarball string
	cached       bool
	pauseTook    time.Duration
}

func (p packed) phase() string {
	if p.cached {
		return "pack images (cached)"
	}
	return "pack images"
}

// packPrefix names the directories images are packed in under the
// temporary directory (a run killed while packing leaves one).
const packPrefix = "gwdiag-node-pack-"

// packImages builds the pause program and packs it with o.Images into a
// tarball, from o.ImageCache when it holds one of the same content.
func packImages(ctx context.Context, o ClusterOptions) (p packed, err error) {
	if p.dir, err = os.MkdirTemp("", packPrefix); err != nil {
		return p, fmt.Errorf("local node: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(p.dir)
		}
	}()
	began := time.Now()
	pause, err := buildPause(ctx, p.dir)
	if err != nil {
		return p, err
	}
	p.pauseTook = time.Since(began)
	imgs := append([]images.Image{{Ref: pauseImage, Files: map[string]string{"/pause": pause}, Entrypoint: []string{"/pause"}}}, o.Images...)
	p.tarball = filepath.Join(p.dir, "images.tar")
	if p.cached, err = images.CachedTarball(o.ImageCache, p.tarball, imgs...); err != nil {
		return p, fmt.Errorf("local node: %w", err)
	}
	return p, nil
}

// buildPause builds the pause program statically into dir.
func buildPause(ctx context.Context, dir string) (string, error) {
	root, err := kube.RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "pause")
	if err := toolbin.BuildStatic(ctx, root, out, "./clusters/kube/cmd/pause"); err != nil {
		return "", fmt.Errorf("local node: build the pause program: %w", err)
	}
	return out, nil
}

// startControlPlane makes the PKI and starts etcd, kube-apiserver (waiting
// until it is ready and the CRDs are established), kube-controller-manager
// and kube-scheduler.
func (c *Cluster) startControlPlane(ctx context.Context, bins kube.Binaries, o ClusterOptions) error {
	p, err := newPKI(filepath.Join(c.State, "pki"))
	if err != nil {
		return err
	}
	host := net.ParseIP(c.HostAddr)
	loop := net.ParseIP(c.loop)
	for i, s := range []certSpec{
		{name: "apiserver", cn: "kube-apiserver", ips: []net.IP{loop, net.ParseIP("127.0.0.1"), host, net.ParseIP("10.96.0.1")},
			dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}},
		{name: "admin", cn: "gwdiag-admin", orgs: []string{"system:masters"}},
		{name: "controller-manager", cn: "system:kube-controller-manager"},
		{name: "scheduler", cn: "system:kube-scheduler"},
		{name: "kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}},
		{name: "node", cn: "system:node:" + NodeName, orgs: []string{"system:nodes"}},
		{name: "kubelet", cn: NodeName, dns: []string{NodeName, "localhost"}, ips: []net.IP{host, loop}},
	} {
		if err := p.issue(s, int64(i+2)); err != nil {
			return err
		}
	}
	ports, err := kube.FreePorts(c.loop, 5)
	if err != nil {
		return err
	}
	c.phase("pki")
	etcdURL := fmt.Sprintf("http://%s:%d", c.loop, ports[0])
	peerURL := fmt.Sprintf("http://%s:%d", c.loop, ports[1])
	if err := c.start(ctx, o, "etcd", bins.Etcd(), "--data-dir", filepath.Join(c.State, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default="+peerURL, "--unsafe-no-fsync", "--log-level", "warn"); err != nil {
		return err
	}
	server := fmt.Sprintf("https://%s:%d", c.loop, ports[2])
	if err := c.start(ctx, o, "kube-apiserver", bins.APIServer(),
		"--etcd-servers", etcdURL, "--bind-address", c.loop, "--secure-port", strconv.Itoa(ports[2]),
		"--advertise-address", c.HostAddr, "--cert-dir", filepath.Join(c.State, "apiserver"),
		"--tls-cert-file", p.path("apiserver.crt"), "--tls-private-key-file", p.path("apiserver.key"),
		"--client-ca-file", p.CA(),
		"--service-account-key-file", p.path("sa.pub"), "--service-account-signing-key-file", p.path("sa.key"),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--kubelet-client-certificate", p.path("kubelet-client.crt"), "--kubelet-client-key", p.path("kubelet-client.key"),
		"--kubelet-certificate-authority", p.CA(), "--kubelet-preferred-address-types", "InternalIP,Hostname",
		"--authorization-mode", "Node,RBAC", "--service-cluster-ip-range", "10.96.0.0/24",
		"--allow-privileged", "--enable-priority-and-fairness=false", "--profiling=false"); err != nil {
		return err
	}
	if c.KubeconfigPath, err = p.kubeconfig("admin", server); err != nil {
		return err
	}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.KubeconfigPath); err != nil {
		return err
	}
	// A cluster of one run's own: like envtest's, its clients need not
	// throttle themselves (client-go's default, 5 requests a second with
	// bursts of 10, made the CRD install and the reference controller's
	// reconciles wait on the client, not on the API server).
	c.Config.QPS, c.Config.Burst = 1000, 2000
	if err := c.waitAPIServer(ctx); err != nil {
		return err
	}
	c.phase("etcd, kube-apiserver ready")
	kcm, err := p.kubeconfig("controller-manager", server)
	if err != nil {
		return err
	}
	if err := c.start(ctx, o, "kube-controller-manager", bins.ControllerManager(),
		"--kubeconfig", kcm, "--authentication-kubeconfig", kcm, "--authorization-kubeconfig", kcm,
		"--bind-address", c.loop, "--secure-port", strconv.Itoa(ports[3]), "--leader-elect=false",
		"--use-service-account-credentials", "--root-ca-file", p.CA(),
		"--service-account-private-key-file", p.path("sa.key"),
		"--cluster-signing-cert-file", p.CA(), "--cluster-signing-key-file", p.path("ca.key"),
		"--flex-volume-plugin-dir", filepath.Join(c.State, "flexvolume"), "--profiling=false"); err != nil {
		return err
	}
	sched, err := p.kubeconfig("scheduler", server)
	if err != nil {
		return err
	}
	return c.start(ctx, o, "kube-scheduler", bins.Scheduler(),
		"--kubeconfig", sched, "--authentication-kubeconfig", sched, "--authorization-kubeconfig", sched,
		"--bind-address", c.loop, "--secure-port", strconv.Itoa(ports[4]), "--leader-elect=false", "--profiling=false")
}

// waitAPIServer waits until the API server answers /readyz.
func (c *Cluster) waitAPIServer(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	var last string
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := c.exited("etcd", "kube-apiserver"); err != nil {
			return false, err
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		b, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		return string(b) == "ok", nil
	})
	if err != nil {
		return fmt.Errorf("local node: kube-apiserver not ready (last: %s): %w\nkube-apiserver log:\n%s", last, err, c.Logs("kube-apiserver"))
	}
	return nil
}

// startKubelet prepares the kubelet's cgroup root and config and runs it
// in containerd's mount namespace (its pod volumes, logs and the shims'
// paths stay there), then waits until the node is Ready.
func (c *Cluster) startKubelet(ctx context.Context, bins kube.Binaries, o ClusterOptions) error {
	if err := makeCgroupRoot(c.rec.CgroupRoot); err != nil {
		return fmt.Errorf("local node: %w", err)
	}
	ports, err := kube.FreePorts("127.0.0.1", 1) // the kubelet listens on HostAddr, which only this run has
	if err != nil {
		return err
	}
	p := &pki{dir: filepath.Join(c.State, "pki")}
	server := c.Config.Host
	kubeconfig, err := p.kubeconfig("node", server)
	if err != nil {
		return err
	}
	dir := filepath.Join(c.State, "kubelet")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzPort: 0
containerRuntimeEndpoint: unix://%s
authentication:
  x509: {clientCAFile: %q}
  anonymous: {enabled: false}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
tlsCertFile: %q
tlsPrivateKeyFile: %q
cgroupDriver: cgroupfs
cgroupRoot: /%s
failCgroupV1: false
failSwapOn: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
syncFrequency: 1s
fileCheckFrequency: 2s
nodeStatusUpdateFrequency: 2s
serializeImagePulls: false
resolvConf: ""
`, c.HostAddr, ports[0], c.containerd.Socket, p.CA(), p.path("kubelet.crt"), p.path("kubelet.key"), c.rec.CgroupRoot)
	cfgFile := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		return err
	}
	err = c.start(ctx, o, "kubelet", "nsenter", "-t", strconv.Itoa(c.containerd.Pid()), "-m", "--", bins.Kubelet(),
		"--config", cfgFile, "--kubeconfig", kubeconfig, "--root-dir", filepath.Join(dir, "root"),
		"--node-ip", c.HostAddr, "--hostname-override", NodeName, "--v", "1")
	if err != nil {
		return err
	}
	return c.waitNodeReady(ctx)
}

// waitNodeReady waits until the node reports Ready and the default
// namespace has its ServiceAccount (pods are refused before it exists).
func (c *Cluster) waitNodeReady(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	last := "node not registered"
	ready := false
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := c.exited("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"); err != nil {
			return false, err
		}
		n, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				last = fmt.Sprintf("node Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
				if cond.Status != corev1.ConditionTrue {
					return false, nil
				}
			}
		}
		if !ready {
			ready = true
			c.phase("kubelet, node Ready")
		}
		if _, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			last = "node Ready; waiting for the default ServiceAccount"
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("local node: not Ready (last: %s): %w\nkubelet log:\n%s", last, err, c.Logs("kubelet"))
	}
	c.phase("default ServiceAccount")
	return nil
}

// A proc is one process the cluster started.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// start starts a process with its log under the state directory, killed
// with this process (Pdeathsig) and recorded for the sweep.
func (c *Cluster) start(ctx context.Context, o ClusterOptions, name, bin string, args ...string) error {
	log, err := c.logFile(name, o.Output)
	if err != nil {
		return err
	}
	p := &proc{name: name, cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = log, log
	toolbin.DieWithParent(p.cmd, true)
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("local node: start %s: %w", name, err)
	}
	c.procs = append(c.procs, p)
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	return c.rec.addProc(name, p.cmd.Process.Pid)
}

// exited returns an error naming the first of names that has exited, with
// the end of its log.
func (c *Cluster) exited(names ...string) error {
	for _, p := range c.procs {
		for _, n := range names {
			if p.name != n {
				continue
			}
			select {
			case <-p.exited:
				return fmt.Errorf("local node: %s exited: %v\n%s log:\n%s", n, p.err, n, c.Logs(n))
			default:
			}
		}
	}
	return nil
}

// stop ends the process: SIGTERM, then SIGKILL after 10 s.
func (p *proc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	terminate(p.cmd.Process, p.exited)
}

// terminate sends proc SIGTERM, then SIGKILL if exited has not received
// after 10 s, and returns once it has.
func terminate[T any](proc *os.Process, exited <-chan T) {
	_ = proc.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = proc.Kill()
		<-exited
	}
}

// logFile opens the log of a process, teed to out when set.
func (c *Cluster) logFile(name string, out io.Writer) (io.Writer, error) {
	dir := filepath.Join(c.State, "logs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	if out != nil {
		return io.MultiWriter(f, out), nil
	}
	return f, nil
}

func nextIP(ip net.IP) net.IP {
	out := make(net.IP, 4)
	copy(out, ip.To4())
	out[3]++
	return out
}

// MemoryRSS is the resident memory of the cluster by part: each process it
// started (by name), containerd's shims ("shims"), and every process of
// its pods ("pods"). It is what the cluster costs the machine, for figures.
func (c *Cluster) MemoryRSS() map[string]int64 {
	out := map[string]int64{}
	for _, p := range c.procs {
		out[p.name] += rss(p.cmd.Process.Pid)
	}
	if c.containerd != nil {
		out["containerd"] += rss(c.containerd.Pid())
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err == nil && bytes.Contains(b, []byte("containerd-shim")) && bytes.Contains(b, []byte(c.State)) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			out["shims"] += rss(pid)
		}
	}
	// Pods: every process in the kubelet's cgroup root (memory hierarchy).
	_ = filepath.WalkDir(filepath.Join("/sys/fs/cgroup/memory", c.rec.CgroupRoot), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out["pods"] += rss(pid)
			}
		}
		return nil
	})
	return out
}

// rss is a process's resident set in bytes (VmRSS), 0 when it is gone.
func rss(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
