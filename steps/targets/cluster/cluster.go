// Package cluster is the cluster target: each scenario's setup becomes
// Gateway API and policy resources on a cluster (any kubeconfig, or a local
// API server with the reference controller), and the condition steps read
// their status.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/api/v1alpha1"
	"github.com/gwdiag/gwdiag/clusters/controller"
	"github.com/gwdiag/gwdiag/clusters/kube"
	"github.com/gwdiag/gwdiag/clusters/kube/portforward"
	"github.com/gwdiag/gwdiag/golden/duration"
	"github.com/gwdiag/gwdiag/steps/await"
	"github.com/gwdiag/gwdiag/steps/mock"
	"github.com/gwdiag/gwdiag/steps/targets"
)

// Options configure the cluster target (Options.Cluster, YAML key
// "cluster"). With Local, the target starts its own etcd and kube-apiserver
// and runs the reference controller in-process; with LocalNode, a real
// single-node cluster whose pods run, and the reference controller
// deploying refproxy in them; otherwise it uses the cluster of Kubeconfig,
// where the implementation's controller must run.
type Options struct {
	// Local starts a local API server with the CRDs and the reference
	// controller (`--cluster local`). No pod runs: the target has no data
	// plane.
	Local bool `json:"local,omitempty"`
	// LocalNode starts a single-node cluster on this machine (kubelet,
	// containerd; clusters/kube/node, as root), installs the CRDs, and runs
	// the reference controller in-process with its data plane: refproxy
	// pods from an image packed from RefproxyBinary (`--cluster local-node`).
	// The target then has a data plane.
	LocalNode bool `json:"localNode,omitempty"`
	// Kind creates a kind cluster instead of the local node (`--cluster
	// kind`; kind.go), and does everything else as LocalNode does.
	Kind *KindOptions `json:"kind,omitempty"`
	// DataPlane says that on the cluster of Kubeconfig the implementation
	// runs its proxy in pods labelled gateway.networking.k8s.io/gateway-name
	// with the admin server on AdminPort: the target sends traffic to them
	// through port-forwards, and runs the mock backends in a pod of
	// MockImage (one for the run). LocalNode implies it.
	DataPlane bool `json:"dataPlane,omitempty"`
	// AdminPort is the proxy pods' admin port. Default 15000.
	AdminPort int `json:"adminPort,omitempty"`
	// MockImage serves the mock backends in a pod (with DataPlane): an
	// image the cluster can pull whose entrypoint takes the flags of
	// `gwdiag conformance mockbackend` (the target runs it with
	// --pool-addr). With LocalNode it is packed from MockBinary and need
	// not be set.
	MockImage string `json:"mockImage,omitempty"`
	// RefproxyBinary and MockBinary are the static executables the local
	// node's images are packed from; MockArgs come before the mock flags
	// (gwdiag: [conformance, mockbackend]). The CLI defaults them to the
	// refproxy beside gwdiag and to gwdiag itself.
	RefproxyBinary string   `json:"refproxyBinary,omitempty"`
	MockBinary     string   `json:"mockBinary,omitempty"`
	MockArgs       []string `json:"mockArgs,omitempty"`
	// ServeTimeout bounds, per scenario with a data plane, the wait for the
	// Gateway's Programmed condition, a ready proxy pod and the proxy
	// serving the scenario's config; and once per run the wait for the
	// mock pool's pod. Default 2m.
	ServeTimeout duration.Duration `json:"serveTimeout,omitempty"`
	// Kubeconfig is the kubeconfig file of an existing cluster; empty
	// means $KUBECONFIG, then ~/.kube/config. Its current context is used.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// InstallCRDs installs the Gateway API and gwdiag policy CRDs into an
	// existing cluster first (always done with Local).
	InstallCRDs bool `json:"installCRDs,omitempty"`
	// GatewayClassName is the class of the scenarios' Gateways. Default
	// "gwdiag", which Local creates for the reference controller; on an
	// existing cluster it must exist (for agentgateway: "agentgateway").
	GatewayClassName string `json:"gatewayClassName,omitempty"`
	// ReferenceFeatures are the features the reference controller lists
	// in its GatewayClass's status.supportedFeatures where this target
	// runs it (Local, the local node, kind); set by the suite, not the
	// options file.
	ReferenceFeatures []string `json:"-"`
	// ControllerName, when set, selects the route and policy status
	// entries written by that controller; empty takes every entry.
	ControllerName string `json:"controllerName,omitempty"`
	// PolicyGroup, PolicyVersion and PolicyKind name the policy resource.
	// Default gwdiag.dev/v1alpha1 GatewayPolicy; for agentgateway:
	// agentgateway.dev/v1alpha1 AgentgatewayPolicy.
	PolicyGroup   string `json:"policyGroup,omitempty"`
	PolicyVersion string `json:"policyVersion,omitempty"`
	PolicyKind    string `json:"policyKind,omitempty"`
	// ConditionTimeout bounds the wait for a controller to write the
	// status of every object of a scenario. Default 30s.
	ConditionTimeout duration.Duration `json:"conditionTimeout"`

	// StartNode starts the local node (tests); nil means clusters/kube/node.
	StartNode NodeStarter `json:"-"`
	// RunController runs the controller of the local node's Gateways,
	// which deploys their proxies (tests: a deliberately broken one); nil
	// means the reference controller, controller.Run.
	RunController func(ctx context.Context, cfg *rest.Config, o controller.Options) (stop func(), err error) `json:"-"`
	// Output receives the local node's progress; nil discards it.
	Output io.Writer `json:"-"`
}

// hasDataPlane tells whether the scenarios' Gateways get proxy pods.
func (o Options) hasDataPlane() bool { return o.startsNode() || o.DataPlane }

func (o Options) withDefaults() Options {
	if o.GatewayClassName == "" {
		o.GatewayClassName = "gwdiag"
	}
	if o.PolicyGroup == "" && o.PolicyKind == "" && o.PolicyVersion == "" {
		o.PolicyGroup, o.PolicyVersion, o.PolicyKind = v1alpha1.Group, v1alpha1.Version, v1alpha1.Kind
	}
	if o.PolicyVersion == "" {
		o.PolicyVersion = "v1alpha1"
	}
	if o.ConditionTimeout == 0 {
		o.ConditionTimeout = duration.Duration(30 * time.Second)
	}
	if (o.Local || o.startsNode()) && o.ControllerName == "" {
		o.ControllerName = string(controller.ControllerName)
	}
	if o.AdminPort == 0 {
		o.AdminPort = 15000
	}
	if o.ServeTimeout == 0 {
		o.ServeTimeout = duration.Duration(2 * time.Minute)
	}
	if o.startsNode() && o.MockImage == "" {
		o.MockImage = MockImage
	}
	return o
}

// Validate checks the options before the target starts.
func (o Options) Validate() error {
	switch {
	case o.Local && o.LocalNode:
		return errors.New("cluster.local and cluster.localNode exclude each other: local is an API server only, localNode a node whose pods run")
	case o.Kind != nil && (o.Local || o.LocalNode):
		return errors.New("cluster.kind excludes cluster.local and cluster.localNode: each starts a cluster of its own")
	case o.DataPlane && !o.startsNode() && o.MockImage == "":
		return errors.New("cluster.dataPlane needs cluster.mockImage: an image the cluster can pull whose entrypoint serves the mock backends with the flags of gwdiag conformance mockbackend (--echo-addr, --llm-addr)")
	}
	return nil
}

// Cluster is the cluster target: each scenario's setup becomes a Gateway,
// Services, HTTPRoutes and policy resources in a namespace of its own, and
// the condition steps read their status. It runs the cluster profile. With
// a data plane (LocalNode, DataPlane) the mock backends run as a pod, and
// the traffic steps reach the Gateway's proxy pod through port-forwards;
// without one (Local, or a cluster whose proxies the suite cannot reach)
// the profile's traffic features are skipped.
type Cluster struct {
	opts Options

	local *kube.Local
	node  *Node
	// leftBehind is the started node's LeftBehind, kept after Stop so that
	// a second signal may read it while Stop runs.
	leftBehind func() []string
	stopCtrl   func()
	cfg        *rest.Config
	client     client.WithWatch
	policy     schema.GroupVersionKind
	// mocks is the run's mock pool, with a data plane.
	mocks mockPool
}

// New returns a cluster target; Start connects or starts the cluster.
func New(o Options) *Cluster {
	o = o.withDefaults()
	return &Cluster{opts: o, policy: schema.GroupVersionKind{Group: o.PolicyGroup, Version: o.PolicyVersion, Kind: o.PolicyKind}}
}

// Name implements Target.
func (*Cluster) Name() string { return "cluster" }

// Capabilities implements Target.
func (c *Cluster) Capabilities() []string {
	if c.opts.hasDataPlane() {
		return []string{targets.CapabilityCluster, targets.CapabilityDataPlane}
	}
	return []string{targets.CapabilityCluster}
}

// ServiceAddr implements targets.ServiceHost: on the local node, the
// bridge address its pods reach this machine at.
func (c *Cluster) ServiceAddr() (string, bool) {
	if c.node == nil || c.node.HostAddr == "" {
		return "", false
	}
	return c.node.HostAddr, true
}

// Start implements Target: it starts the local API server and the
// reference controller, or connects to the kubeconfig's cluster, and checks
// the GatewayClass is there.
func (c *Cluster) Start(ctx context.Context) error {
	// envtest and controller-runtime log through a global logger that
	// warns when never set; the suite reports on its own.
	ctrllog.SetLogger(controller.DiscardLogger())
	if err := c.opts.Validate(); err != nil {
		return fmt.Errorf("cluster target: %w", err)
	}
	var cfg *rest.Config
	switch {
	case c.opts.Local:
		l, err := kube.StartLocal(ctx, kube.LocalOptions{})
		if err != nil {
			return targets.Missing("a local API server (etcd and kube-apiserver, built from Go modules)", "make kube-bins in a gwdiag checkout, or set $GWDIAG_KUBE_BIN to their folder", fmt.Errorf("cluster target: %w", err))
		}
		c.local, cfg = l, l.Config
		stop, err := controller.Run(ctx, cfg, controller.Options{SupportedFeatures: c.opts.ReferenceFeatures})
		if err != nil {
			c.Stop(ctx)
			return fmt.Errorf("cluster target: reference controller: %w", err)
		}
		c.stopCtrl = stop
	case c.opts.startsNode():
		var err error
		if cfg, err = c.startNode(ctx); err != nil {
			c.Stop(ctx)
			// Not classified: a node fails to start for the user's
			// options (a binary not found) as often as for the machine.
			return fmt.Errorf("cluster target: %s: %w", c.opts.nodeName(), err)
		}
	default:
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if c.opts.Kubeconfig != "" {
			rules.ExplicitPath = c.opts.Kubeconfig
		}
		var err error
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil && c.opts.Kubeconfig != "" {
			// The user named one: theirs to fix.
			return fmt.Errorf("cluster target: kubeconfig: %w", err)
		}
		if err != nil {
			return targets.Missing("a Kubernetes cluster (no kubeconfig)", "set --kubeconfig or $KUBECONFIG to a cluster's, or run --cluster local-node (as root) or --cluster local",
				fmt.Errorf("cluster target: kubeconfig: %w", err))
		}
		if c.opts.InstallCRDs {
			if err := kube.InstallCRDs(cfg); err != nil {
				return fmt.Errorf("cluster target: %w", err)
			}
		}
	}
	// Polling status of a few objects per scenario, several scenarios at
	// once: client-go's default 5 QPS would throttle the waits themselves.
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 100, 200
	c.cfg = cfg
	var err error
	if c.client, err = controller.NewClient(cfg); err != nil {
		c.Stop(ctx)
		return fmt.Errorf("cluster target: client for %s: %w", cfg.Host, err)
	}
	if c.opts.Local || c.opts.startsNode() {
		gc := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: c.opts.GatewayClassName},
			Spec: gwv1.GatewayClassSpec{ControllerName: controller.ControllerName}}
		if err := c.client.Create(ctx, gc); err != nil && !apierrors.IsAlreadyExists(err) {
			c.Stop(ctx)
			return fmt.Errorf("cluster target: create GatewayClass %s: %w", gc.Name, err)
		}
		return nil
	}
	if err := c.client.Get(ctx, client.ObjectKey{Name: c.opts.GatewayClassName}, &gwv1.GatewayClass{}); err != nil {
		if apierrors.IsNotFound(err) || ctx.Err() != nil || apierrors.ReasonForError(err) != metav1.StatusReasonUnknown {
			// The API server answered: the class is the implementation's.
			return fmt.Errorf("cluster target: GatewayClass %q on %s: %w (set cluster.gatewayClassName to the implementation's class; cluster.local: true runs the reference controller)", c.opts.GatewayClassName, cfg.Host, err)
		}
		return targets.Missing("a reachable Kubernetes API server at "+cfg.Host, "start the cluster, or point --kubeconfig at one that runs",
			fmt.Errorf("cluster target: GatewayClass %q on %s: %w", c.opts.GatewayClassName, cfg.Host, err))
	}
	return nil
}

// AdvertisedFeatures returns the names the GatewayClass lists in its
// status.supportedFeatures once its controller has accepted it (the status
// is written with the Accepted condition), and where they were read. It
// fails when no controller accepts the class within ConditionTimeout.
func (c *Cluster) AdvertisedFeatures(ctx context.Context) ([]string, string, error) {
	source := fmt.Sprintf("GatewayClass %s status.supportedFeatures", c.opts.GatewayClassName)
	gc := &gwv1.GatewayClass{}
	last := "not read yet"
	err := await.Until(ctx, time.Duration(c.opts.ConditionTimeout), 50*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		if err := c.client.Get(ctx, client.ObjectKey{Name: c.opts.GatewayClassName}, gc); err != nil {
			last = err.Error()
			return false, last, nil
		}
		accepted := meta.FindStatusCondition(gc.Status.Conditions, string(gwv1.GatewayClassConditionStatusAccepted))
		if accepted == nil || accepted.ObservedGeneration != gc.Generation {
			last = "no Accepted condition at the current generation"
			return false, last, nil
		}
		last = fmt.Sprintf("Accepted=%s %s", accepted.Status, accepted.Reason)
		return accepted.Status == metav1.ConditionTrue, last, nil
	})
	if err != nil {
		return nil, source, fmt.Errorf("%s: the class is not accepted (last: %s): %w", source, last, err)
	}
	names := make([]string, 0, len(gc.Status.SupportedFeatures))
	for _, f := range gc.Status.SupportedFeatures {
		names = append(names, string(f.Name))
	}
	return names, source, nil
}

// startNode starts the local node with the images its pods run, installs
// the CRDs, and runs the reference controller with its data plane.
func (c *Cluster) startNode(ctx context.Context) (*rest.Config, error) {
	imgs, err := c.opts.NodeImages()
	if err != nil {
		return nil, err
	}
	start := c.opts.StartNode
	if start == nil {
		start = c.opts.nodeStarter()
	}
	if start == nil {
		return nil, errNoProvider
	}
	out := c.opts.Output
	if out == nil {
		out = io.Discard
	}
	n, err := start(ctx, imgs, out)
	if err != nil {
		return nil, err
	}
	c.node, c.leftBehind = n, n.LeftBehind
	began := time.Now()
	if !n.CRDsInstalled {
		if err := kube.InstallCRDs(n.Config); err != nil {
			return nil, err
		}
	}
	crdsTook := time.Since(began)
	run := c.opts.RunController
	if run == nil {
		run = controller.Run
	}
	stop, err := run(ctx, n.Config, controller.Options{SupportedFeatures: c.opts.ReferenceFeatures, DataPlane: &controller.DataPlane{
		Image: refproxyImage, PullPolicy: corev1.PullNever}})
	if err != nil {
		return nil, fmt.Errorf("reference controller: %w", err)
	}
	c.stopCtrl = stop
	crds := "installed by the node"
	if !n.CRDsInstalled {
		crds = "installed in " + crdsTook.Round(10*time.Millisecond).String()
	}
	fmt.Fprintf(out, "cluster target: CRDs %s, reference controller synced in %s\n", crds, (time.Since(began) - crdsTook).Round(10*time.Millisecond))
	return n.Config, nil
}

// LeftBehind implements targets.LeftBehind: what the node the target
// started leaves on a forced exit.
func (c *Cluster) LeftBehind() []string {
	if c.leftBehind == nil {
		return nil
	}
	return c.leftBehind()
}

// Stop implements Target.
func (c *Cluster) Stop(context.Context) error {
	if c.stopCtrl != nil {
		c.stopCtrl()
		c.stopCtrl = nil
	}
	var errs []error
	if c.local != nil {
		errs = append(errs, c.local.Stop())
		c.local = nil
	}
	// Also on a node the target started: a test's node may outlive it.
	errs = append(errs, c.stopPool())
	if c.node != nil {
		if err := c.node.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop the %s: %w", c.opts.nodeName(), err))
		}
		c.node = nil
	}
	return errors.Join(errs...)
}

// Configure implements Target: it creates the scenario's namespace and
// objects, then waits until a controller has written the status of every
// one of them at its current generation. With a data plane it first asks
// the run's mock pool for the scenario's backends, creates their
// EndpointSlices last, and waits until the proxy serves the scenario
// (serve).
func (c *Cluster) Configure(ctx context.Context, setup targets.Setup) (targets.Deployment, error) {
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gwdiag-", Labels: managedBy}}
	if err := c.client.Create(ctx, nsObj); err != nil {
		return nil, fmt.Errorf("cluster target: create namespace: %w", err)
	}
	d := &clusterDeployment{c: c, ns: nsObj.Name}
	d.Remote = mock.Remote{Control: d.control, Failed: d.controlError}
	d.watchNamespace(ctx)
	var endpoints map[string]netip.AddrPort
	if c.opts.hasDataPlane() {
		var err error
		if endpoints, err = d.mockBackends(ctx, setup.Backends); err != nil {
			d.Stop(ctx)
			return nil, fmt.Errorf("cluster target: %w", err)
		}
		d.backends = map[string]string{}
		for b, ep := range endpoints {
			d.backends[b] = ep.String()
		}
	}
	objs, err := clusterManifests(setup, d.ns, c.opts.GatewayClassName, c.policy, endpoints)
	if err != nil {
		d.Stop(ctx)
		return nil, err
	}
	type awaited struct{ kind, name string }
	var awaits []awaited
	for _, o := range objs {
		// Read the kind first: creating a typed object clears its TypeMeta.
		kind := o.GetObjectKind().GroupVersionKind().Kind
		gvk := o.GetObjectKind().GroupVersionKind()
		if err := c.client.Create(ctx, o); err != nil {
			d.Stop(ctx)
			return nil, fmt.Errorf("cluster target: create %s %s/%s: %w", kind, d.ns, o.GetName(), err)
		}
		d.applied = append(d.applied, applied{gvk, o.GetName()})
		switch kind {
		case "Service", "EndpointSlice":
		case c.policy.Kind:
			awaits = append(awaits, awaited{"Policy", o.GetName()})
		default:
			awaits = append(awaits, awaited{kind, o.GetName()})
		}
	}
	if endpoints != nil {
		if err := d.observeProgrammed(ctx); err != nil {
			return nil, d.failed(ctx, err)
		}
	}
	for _, a := range awaits {
		if _, err := d.Conditions(ctx, a.kind, a.name); err != nil {
			return nil, d.failed(ctx, err)
		}
	}
	if endpoints != nil {
		if err := d.serve(ctx, setup); err != nil {
			return nil, d.failed(ctx, err)
		}
	}
	return d, nil
}

// failed ends a Configure that failed once its resources existed: the
// evidence of why (the resources with their status, the pods' logs) is
// taken before the namespace goes.
func (d *clusterDeployment) failed(ctx context.Context, err error) error {
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	files, _ := d.Evidence(ectx)
	cancel()
	d.Stop(ctx)
	return &targets.ConfigureError{Err: fmt.Errorf("cluster target: %w", err), Evidence: files}
}

// mockPull is the mock pool pod's image pull policy: Never on the local node,
// whose images are imported, else IfNotPresent.
func (c *Cluster) mockPull() corev1.PullPolicy {
	if c.opts.startsNode() {
		return corev1.PullNever
	}
	return corev1.PullIfNotPresent
}

// clusterDeployment is one scenario's namespace, and with a data plane its
// servers in the mock pool and the port-forwards to its proxy pod and the
// pool.
type clusterDeployment struct {
	// Remote counts and releases the mock backends through a forward
	// to each one's control endpoint.
	mock.Remote
	c  *Cluster
	ns string

	// Set by serve, with a data plane.
	serving   bool
	forwards  []*portforward.Forward
	admin     string
	listeners map[string]string
	// backends are the mock endpoints the proxy calls (pod IP:port);
	// controls the mocks' control endpoints through the forward to the
	// pool (pod poolPod, namespace/name); poolPorts the scenario's
	// servers there.
	backends, controls map[string]string
	pool, poolPod      string
	poolPorts          []int
	// proxyPodName is the proxy pod the forwards go to.
	proxyPodName string
	// programmed is what observeProgrammed saw, or programmedErr why it
	// could not tell.
	programmed    *targets.ProgrammedObservation
	programmedErr error
	// applied are the resources the scenario created, in order.
	applied []applied

	// changes tells the waits of a change in the namespace
	// (watchNamespace), until stopWatch, which returns once the watches
	// have ended.
	changes   await.Broadcast
	stopWatch func()

	stopOnce sync.Once
	stopErr  error
}

// errNoProvider: this gwdiag cannot start a local node at all.
var errNoProvider = errors.New("this gwdiag was built without the local-node provider (clusters/kube/node)")

var errNoDataPlane = errors.New("the cluster target runs no proxy it can reach here (no data plane: use --cluster local-node, or cluster.dataPlane on a cluster whose proxy runs in pods)")

// Stop closes the scenario's servers in the mock pool and the forwards,
// and deletes the scenario's namespace. On the local API server there is
// no namespace controller to empty it; the whole store goes at Stop.
func (d *clusterDeployment) Stop(ctx context.Context) error {
	d.stopOnce.Do(func() {
		if d.stopWatch != nil {
			d.stopWatch()
		}
		errs := []error{d.releaseMocks(ctx)}
		for _, f := range d.forwards {
			f.Close()
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: d.ns}}
		if err := d.c.client.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("cluster target: delete namespace %s: %w", d.ns, err))
		}
		d.stopErr = errors.Join(errs...)
	})
	return d.stopErr
}

// Conditions implements targets.ConditionReader. It waits (up to the condition
// timeout) until the resource has conditions written for its current
// metadata.generation (writtenAt), so the Gateway CRD's default "Waiting
// for controller" conditions and a stale status are never taken for an
// answer.
// For an HTTPRoute or a policy it returns the conditions of every parent or
// ancestor entry (of ControllerName, when set), in status order.
func (d *clusterDeployment) Conditions(ctx context.Context, kind, name string) ([]targets.Condition, error) {
	if kind == "Gateway" && name == "" {
		name = clusterGatewayName
	}
	var (
		got     []targets.Condition
		lastErr error
	)
	err := await.UntilChanged(ctx, time.Duration(d.c.opts.ConditionTimeout), changeFallback, d.changes.Next, func(ctx context.Context) (bool, string, error) {
		// Each read gets its own bound, not the wait's, so the last one
		// completes and the error says what it saw. (await.Until counts
		// no read that returns after the deadline as an answer.)
		readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		conds, current, err := d.read(readCtx, kind, name)
		cancel()
		got, lastErr = conds, err
		return err == nil && current, "", nil
	})
	if err != nil {
		if lastErr != nil {
			return nil, fmt.Errorf("%s %s/%s: %w", kind, d.ns, name, lastErr)
		}
		return nil, fmt.Errorf("%s %s/%s: no status conditions at the current generation within %s (got %+v); is a controller for GatewayClass %q running?",
			kind, d.ns, name, time.Duration(d.c.opts.ConditionTimeout), got, d.c.opts.GatewayClassName)
	}
	return got, nil
}

// read returns the resource's conditions and whether every one of them
// was written at its current generation.
func (d *clusterDeployment) read(ctx context.Context, kind, name string) ([]targets.Condition, bool, error) {
	key := client.ObjectKey{Namespace: d.ns, Name: name}
	switch kind {
	case "Gateway":
		gw := &gwv1.Gateway{}
		if err := d.c.client.Get(ctx, key, gw); err != nil {
			return nil, false, err
		}
		return convert(gw.Status.Conditions, gw.Generation)
	case "HTTPRoute":
		r := &gwv1.HTTPRoute{}
		if err := d.c.client.Get(ctx, key, r); err != nil {
			return nil, false, err
		}
		var all []metav1.Condition
		for _, p := range r.Status.Parents {
			if d.c.opts.ControllerName == "" || string(p.ControllerName) == d.c.opts.ControllerName {
				all = append(all, p.Conditions...)
			}
		}
		return convert(all, r.Generation)
	case "Policy":
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(d.c.policy)
		if err := d.c.client.Get(ctx, key, u); err != nil {
			return nil, false, err
		}
		status := &gwv1.PolicyStatus{}
		if raw, ok := u.Object["status"].(map[string]any); ok {
			if err := runtimeConverter(raw, status); err != nil {
				return nil, false, fmt.Errorf("status is not a Gateway API PolicyStatus: %w", err)
			}
		}
		var all []metav1.Condition
		for _, a := range status.Ancestors {
			if d.c.opts.ControllerName == "" || string(a.ControllerName) == d.c.opts.ControllerName {
				all = append(all, a.Conditions...)
			}
		}
		return convert(all, u.GetGeneration())
	default:
		return nil, false, fmt.Errorf("unknown resource kind %q: want Gateway, HTTPRoute or targets.Policy", kind)
	}
}

func convert(conds []metav1.Condition, generation int64) ([]targets.Condition, bool, error) {
	out := make([]targets.Condition, 0, len(conds))
	current := len(conds) > 0
	for _, c := range conds {
		out = append(out, targets.Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message})
		current = current && writtenAt(c, generation)
	}
	return out, current, nil
}

// crdDefaultMessage is the message of the conditions the Gateway API CRDs
// default a new Gateway's or GatewayClass's status to.
const crdDefaultMessage = "Waiting for controller"

// writtenAt tells whether a controller wrote c for the object's current
// generation. The Gateway API asks controllers to set observedGeneration;
// some (agentgateway's policy status) leave it 0, so an unset one counts as
// current unless the condition is the CRD's default.
func writtenAt(c metav1.Condition, generation int64) bool {
	if c.ObservedGeneration == 0 {
		return c.Message != crdDefaultMessage
	}
	return c.ObservedGeneration == generation
}

func runtimeConverter(raw map[string]any, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(raw, into)
}
