package cluster

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gwdiag/gwdiag/clusters/api/v1alpha1"
	"github.com/gwdiag/gwdiag/clusters/controller"
	"github.com/gwdiag/gwdiag/clusters/toolbin"
	"github.com/gwdiag/gwdiag/steps/targets"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestClusterManifests(t *testing.T) {
	setup := targets.Setup{
		Backends: []targets.Backend{{Name: "httpbin", Kind: targets.BackendEcho}, {Name: "llm", Kind: targets.BackendLLM}},
		Listeners: []targets.Listener{{Name: "default", Routes: []targets.Route{{Name: "httpbin", PathPrefix: "/", Backend: "httpbin", Limits: []targets.Limit{{Kind: targets.LimitRequests, Amount: 3, Unit: time.Second, Burst: 3}}}}},
			{Name: "ai", Routes: []targets.Route{{Name: "chat", PathPrefix: "/v1", Backend: "llm", Limits: []targets.Limit{{Kind: targets.LimitTokens, Amount: 1000, Unit: time.Minute}}}}}},
		Policies: []targets.Policy{{Name: "orphan", TargetKind: "HTTPRoute", TargetName: "missing", Limits: []targets.Limit{{Kind: targets.LimitRequests, Amount: 1, Unit: time.Hour}}}},
	}
	agw := schema.GroupVersionKind{Group: "agentgateway.dev", Version: "v1alpha1", Kind: "AgentgatewayPolicy"}
	objs, err := clusterManifests(setup, "ns1", "agentgateway", agw, nil)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, o := range objs {
		order = append(order, o.GetObjectKind().GroupVersionKind().Kind+"/"+o.GetName())
	}
	wantOrder := []string{"Gateway/gwdiag", "Service/httpbin", "Service/llm", "HTTPRoute/httpbin", "HTTPRoute/chat",
		"AgentgatewayPolicy/httpbin", "AgentgatewayPolicy/chat", "AgentgatewayPolicy/orphan"}
	if diff := cmp.Diff(wantOrder, order); diff != "" {
		t.Errorf("objects in creation order (-want +got):\n%s", diff)
	}
	gw := objs[0].(*gwv1.Gateway)
	if gw.Spec.GatewayClassName != "agentgateway" || len(gw.Spec.Listeners) != 2 || gw.Spec.Listeners[1].Name != "ai" || gw.Spec.Listeners[1].Port != clusterListenerPort+1 {
		t.Errorf("Gateway: got class %q listeners %+v, want class agentgateway and listeners default:%d, ai:%d", gw.Spec.GatewayClassName, gw.Spec.Listeners, clusterListenerPort, clusterListenerPort+1)
	}
	chat := objs[4].(*gwv1.HTTPRoute)
	if got := *chat.Spec.ParentRefs[0].SectionName; got != "ai" {
		t.Errorf("route chat parent sectionName: got %q, want ai", got)
	}
	if got := *chat.Spec.Rules[0].Matches[0].Path.Value; got != "/v1" {
		t.Errorf("route chat path prefix: got %q, want /v1", got)
	}

	tests := []struct {
		name string
		obj  int
		want map[string]any
	}{
		{"requests with burst", 5, map[string]any{
			"targetRefs": []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "httpbin"}},
			"traffic":    map[string]any{"rateLimit": map[string]any{"local": []any{map[string]any{"requests": int64(3), "unit": "Seconds", "burst": int64(3)}}}},
		}},
		{"tokens", 6, map[string]any{
			"targetRefs": []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "chat"}},
			"traffic":    map[string]any{"rateLimit": map[string]any{"local": []any{map[string]any{"tokens": int64(1000), "unit": "Minutes"}}}},
		}},
		{"standalone policy", 7, map[string]any{
			"targetRefs": []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "missing"}},
			"traffic":    map[string]any{"rateLimit": map[string]any{"local": []any{map[string]any{"requests": int64(1), "unit": "Hours"}}}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := objs[tt.obj].(*unstructured.Unstructured)
			if u.GetAPIVersion() != "agentgateway.dev/v1alpha1" || u.GetNamespace() != "ns1" {
				t.Errorf("apiVersion %q namespace %q, want agentgateway.dev/v1alpha1 in ns1", u.GetAPIVersion(), u.GetNamespace())
			}
			if diff := cmp.Diff(tt.want, u.Object["spec"]); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
		})
	}

	if _, err := clusterManifests(targets.Setup{Listeners: []targets.Listener{{Name: "l", Routes: []targets.Route{{Name: "r", Backend: "b", Limits: []targets.Limit{{Kind: targets.LimitRequests, Amount: 1, Unit: time.Millisecond}}}}}}}, "ns", "c", agw, nil); err == nil {
		t.Error("a limit per millisecond: got no error, want one naming the unit")
	}
}

// TestClusterManifestsKeyedLimit: a limit keyed by a header becomes the
// policy resource's local[].key, the CEL the standalone config has; read
// back as the reference's GatewayPolicy it is that field, and the
// controller accepts it (its translation to the proxy's key is
// clusters/controller's TestTranslate).
func TestClusterManifestsKeyedLimit(t *testing.T) {
	lim := targets.Limit{Kind: targets.LimitRequests, Amount: 2, Unit: time.Minute, KeyHeader: "X-Api-Key"}
	setup := targets.Setup{
		Backends:  []targets.Backend{{Name: "httpbin", Kind: targets.BackendEcho}},
		Listeners: []targets.Listener{{Name: "default", Routes: []targets.Route{{Name: "httpbin", PathPrefix: "/", Backend: "httpbin", Limits: []targets.Limit{lim}}}}},
	}
	gvk := schema.GroupVersionKind{Group: v1alpha1.Group, Version: v1alpha1.Version, Kind: v1alpha1.Kind}
	objs, err := clusterManifests(setup, "ns1", "refproxy", gvk, nil)
	if err != nil {
		t.Fatal(err)
	}
	u := objs[len(objs)-1].(*unstructured.Unstructured)
	want := []any{map[string]any{"requests": int64(2), "unit": "Minutes", "key": `request.headers["x-api-key"]`}}
	if diff := cmp.Diff(want, u.Object["spec"].(map[string]any)["traffic"].(map[string]any)["rateLimit"].(map[string]any)["local"]); diff != "" {
		t.Errorf("spec.traffic.rateLimit.local (-want +got):\n%s", diff)
	}
	var p v1alpha1.GatewayPolicy
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
		t.Fatal(err)
	}
	if l := p.Spec.Traffic.RateLimit.Local; len(l) != 1 || l[0].Key != lim.KeyExpr() {
		t.Fatalf("as a GatewayPolicy: local %+v, want one entry with key %s", l, lim.KeyExpr())
	}
	if err := controller.Validate(p.Spec); err != nil {
		t.Errorf("the controller refuses the translated policy: %v", err)
	}
}

func TestClusterOptionsDefaults(t *testing.T) {
	o := New(Options{Local: true}).opts
	if o.GatewayClassName != "gwdiag" || o.PolicyGroup != "gwdiag.dev" || o.PolicyKind != "GatewayPolicy" || o.PolicyVersion != "v1alpha1" || time.Duration(o.ConditionTimeout) != 30*time.Second || o.ControllerName == "" {
		t.Errorf("local defaults: got %+v", o)
	}
	o = New(Options{PolicyGroup: "agentgateway.dev", PolicyKind: "AgentgatewayPolicy"}).opts
	if o.PolicyVersion != "v1alpha1" || o.ControllerName != "" {
		t.Errorf("kubeconfig defaults: got version %q controller %q, want v1alpha1 and any controller", o.PolicyVersion, o.ControllerName)
	}
	if got := New(Options{}).Capabilities(); len(got) != 1 || got[0] != targets.CapabilityCluster {
		t.Errorf("cluster target capabilities: got %v, want [cluster]", got)
	}
}

func TestClusterConditionsWrittenAt(t *testing.T) {
	tests := []struct {
		name string
		cond metav1.Condition
		gen  int64
		want bool
	}{
		{"current generation", metav1.Condition{ObservedGeneration: 2, Message: "ok"}, 2, true},
		{"stale generation", metav1.Condition{ObservedGeneration: 1, Message: "ok"}, 2, false},
		{"CRD default of a new Gateway", metav1.Condition{Reason: "Pending", Message: "Waiting for controller"}, 1, false},
		{"controller that leaves observedGeneration unset", metav1.Condition{Reason: "Valid", Message: "Policy accepted"}, 3, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := writtenAt(tt.cond, tt.gen); got != tt.want {
				t.Errorf("writtenAt(%+v, %d) = %v, want %v", tt.cond, tt.gen, got, tt.want)
			}
		})
	}
	if _, current, _ := convert(nil, 1); current {
		t.Error("no conditions: got current, want not yet written")
	}
}

func TestClusterTargetNoKubeconfig(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	c := New(Options{})
	err := c.Start(context.Background())
	defer c.Stop(context.Background())
	var env *targets.EnvironmentError
	if !errors.As(err, &env) || !strings.Contains(err.Error(), "--kubeconfig") || !strings.Contains(err.Error(), "--cluster local") {
		t.Errorf("Start with no kubeconfig: got %v, want the environment's lack, pointing at --kubeconfig and --cluster local", err)
	}
	missing := New(Options{Kubeconfig: "/nonexistent/kubeconfig"})
	if err := missing.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "/nonexistent/kubeconfig") {
		t.Errorf("Start with a missing kubeconfig file: got %v, want an error naming it", err)
	}
}

// TestDataPlaneManifests: with a data plane every backend's Service has no
// selector, and an EndpointSlice of its own, written after every other
// object, leads it to the backend's server in the mock pool (an
// unreachable backend to a port of the pool pod where nothing listens).
// The pool pod serves the pool's control API and is ready once it does.
func TestDataPlaneManifests(t *testing.T) {
	setup := targets.Setup{
		Backends: []targets.Backend{{Name: "httpbin", Kind: targets.BackendEcho}, {Name: "openai", Kind: targets.BackendLLM},
			{Name: "down", Kind: targets.BackendUnreachable}},
		Listeners: []targets.Listener{{Name: "default", Routes: []targets.Route{{Name: "httpbin", PathPrefix: "/", Backend: "httpbin",
			Limits: []targets.Limit{{Kind: targets.LimitRequests, Amount: 1, Unit: time.Minute}}}}}},
	}
	eps := map[string]netip.AddrPort{"httpbin": netip.MustParseAddrPort("10.1.0.7:40001"), "openai": netip.MustParseAddrPort("10.1.0.7:40002"),
		"down": netip.MustParseAddrPort("10.1.0.7:9")}
	objs, err := clusterManifests(setup, "ns1", "gwdiag", schema.GroupVersionKind{Group: "gwdiag.dev", Version: "v1alpha1", Kind: "GatewayPolicy"}, eps)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetObjectKind().GroupVersionKind().Kind+"/"+o.GetName())
		switch o := o.(type) {
		case *corev1.Service:
			if o.Spec.Selector != nil || len(o.Spec.Ports) != 1 || o.Spec.Ports[0].Port != clusterBackendPort || o.Spec.Ports[0].Name != "http" {
				t.Errorf("Service %s: got selector %v ports %+v, want none and http %d", o.Name, o.Spec.Selector, o.Spec.Ports, clusterBackendPort)
			}
		case *discoveryv1.EndpointSlice:
			want := eps[o.Name]
			if o.Namespace != "ns1" || o.Labels[discoveryv1.LabelServiceName] != o.Name || o.Labels[discoveryv1.LabelManagedBy] != endpointSliceManager ||
				o.AddressType != discoveryv1.AddressTypeIPv4 || len(o.Endpoints) != 1 || !cmp.Equal(o.Endpoints[0].Addresses, []string{want.Addr().String()}) ||
				!ptr.Deref(o.Endpoints[0].Conditions.Ready, false) || len(o.Ports) != 1 || ptr.Deref(o.Ports[0].Name, "") != "http" || ptr.Deref(o.Ports[0].Port, 0) != int32(want.Port()) {
				t.Errorf("EndpointSlice %s: got %+v, want service %s's ready endpoint %s on port http", o.Name, o, o.Name, want)
			}
		}
	}
	wantKinds := []string{"Gateway/gwdiag", "Service/httpbin", "Service/openai", "Service/down", "HTTPRoute/httpbin", "GatewayPolicy/httpbin",
		"EndpointSlice/httpbin", "EndpointSlice/openai", "EndpointSlice/down"}
	if diff := cmp.Diff(wantKinds, kinds); diff != "" {
		t.Errorf("objects, in creation order (-want +got):\n%s", diff)
	}
	if _, err := clusterManifests(setup, "ns1", "gwdiag", schema.GroupVersionKind{Kind: "GatewayPolicy"}, map[string]netip.AddrPort{"httpbin": eps["httpbin"]}); err == nil || !strings.Contains(err.Error(), `"openai"`) {
		t.Errorf("a backend without an endpoint: got %v, want an error naming it", err)
	}
	if s := endpointSlice("ns1", "v6", netip.MustParseAddrPort("[fd00::7]:40001")); s.AddressType != discoveryv1.AddressTypeIPv6 || s.Endpoints[0].Addresses[0] != "fd00::7" {
		t.Errorf("an IPv6 pod: got %s %v, want an IPv6 slice of fd00::7", s.AddressType, s.Endpoints[0].Addresses)
	}

	pod := poolPod("mocks1", MockImage, corev1.PullNever)
	c := pod.Spec.Containers[0]
	if pod.Namespace != "mocks1" || pod.Name != poolPodName || c.Image != MockImage || c.ImagePullPolicy != corev1.PullNever ||
		!cmp.Equal(c.Args, []string{"--pool-addr", ":7999"}) {
		t.Errorf("pool pod: got %s/%s image %s pull %s args %v", pod.Namespace, pod.Name, c.Image, c.ImagePullPolicy, c.Args)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.TCPSocket == nil || c.ReadinessProbe.TCPSocket.Port.IntValue() != poolPort {
		t.Errorf("readiness probe: got %+v, want TCP on %d", c.ReadinessProbe, poolPort)
	}
}

// TestClusterDataPlaneOptions: which options give the target a data plane,
// and the combinations it refuses.
func TestClusterDataPlaneOptions(t *testing.T) {
	tests := []struct {
		name    string
		o       Options
		caps    []string
		invalid string
	}{
		{"kubeconfig", Options{}, []string{targets.CapabilityCluster}, ""},
		{"local API server", Options{Local: true}, []string{targets.CapabilityCluster}, ""},
		{"local node", Options{LocalNode: true}, []string{targets.CapabilityCluster, targets.CapabilityDataPlane}, ""},
		{"existing cluster with its data plane", Options{DataPlane: true, MockImage: "example.com/mocks:1"}, []string{targets.CapabilityCluster, targets.CapabilityDataPlane}, ""},
		{"data plane without mocks", Options{DataPlane: true}, nil, "cluster.dataPlane needs cluster.mockImage"},
		{"local and local node", Options{Local: true, LocalNode: true}, nil, "exclude each other"},
		{"kind", Options{Kind: &KindOptions{}}, []string{targets.CapabilityCluster, targets.CapabilityDataPlane}, ""},
		{"kind and local", Options{Kind: &KindOptions{}, Local: true}, nil, "cluster.kind excludes"},
		{"kind and local node", Options{Kind: &KindOptions{}, LocalNode: true}, nil, "cluster.kind excludes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(tt.o)
			err := c.opts.Validate()
			if tt.invalid != "" {
				if err == nil || !strings.Contains(err.Error(), tt.invalid) {
					t.Errorf("Validate: got %v, want an error with %q", err, tt.invalid)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.caps, c.Capabilities()); diff != "" {
				t.Errorf("capabilities (-want +got):\n%s", diff)
			}
		})
	}
	for _, o := range []Options{{LocalNode: true}, {Kind: &KindOptions{}}} {
		c := New(o)
		if o := c.opts; o.MockImage != MockImage || o.AdminPort != 15000 || time.Duration(o.ServeTimeout) != 2*time.Minute || o.ControllerName == "" || c.mockPull() != corev1.PullNever {
			t.Errorf("defaults of a node the target starts: got %+v, pull %s", o, c.mockPull())
		}
	}
}

// TestLocalNodeImages: the local node's images are packed from static
// binaries, and a missing or dynamically linked one is refused before
// anything starts, naming the option.
func TestLocalNodeImages(t *testing.T) {
	dir := t.TempDir()
	static := filepath.Join(dir, "static")
	if err := toolbin.BuildStatic(context.Background(), "", static, "./testdata/static"); err != nil {
		t.Fatal(err)
	}
	imgs, err := Options{RefproxyBinary: static, MockBinary: static, MockArgs: []string{"conformance", "mockbackend"}}.NodeImages()
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) != 2 || imgs[0].Ref != "docker.io/"+refproxyImage || imgs[0].Entrypoint[0] != "/refproxy" ||
		imgs[1].Ref != "docker.io/"+MockImage || strings.Join(imgs[1].Entrypoint, " ") != "/static conformance mockbackend" || imgs[1].Files["/static"] != static {
		t.Errorf("images: got %+v", imgs)
	}
	for _, tt := range []struct {
		name string
		o    Options
		want string
	}{
		{"missing refproxy", Options{RefproxyBinary: filepath.Join(dir, "nope"), MockBinary: static}, "cluster.refproxyBinary: stat"},
		{"no mock binary", Options{RefproxyBinary: static}, "set cluster.mockBinary"},
		{"not an executable", Options{RefproxyBinary: static, MockBinary: "testdata/static/main.go"}, "cluster.mockBinary testdata/static/main.go cannot run in an image FROM scratch"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.o.NodeImages(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
	// No provider linked in, and none given: said plainly, after the images.
	saved := startLocalNode
	startLocalNode = nil
	defer func() { startLocalNode = saved }()
	c := New(Options{LocalNode: true, RefproxyBinary: static, MockBinary: static})
	err = c.Start(context.Background())
	defer c.Stop(context.Background())
	if err == nil || !strings.Contains(err.Error(), "without the local-node provider") {
		t.Errorf("Start with no provider: got %v", err)
	}
}

func TestMissingAddrs(t *testing.T) {
	dump := []byte(`{"backends":[{"endpoints":[{"address":"10.244.0.17:8000"}]},{"endpoints":[{"address":"10.244.0.7:9"}]}]}`)
	tests := []struct {
		want []string
		miss []string
	}{
		{[]string{"10.244.0.17:8000", "10.244.0.7:9"}, nil},
		{[]string{"10.244.0.7:8000"}, []string{"10.244.0.7:8000"}}, // another pod's port
		{[]string{"10.244.0.1:8000"}, []string{"10.244.0.1:8000"}}, // a prefix of 10.244.0.17
		{[]string{"0.244.0.17:8000"}, []string{"0.244.0.17:8000"}}, // a suffix of 10.244.0.17
		{[]string{"10.244.0.17:800"}, []string{"10.244.0.17:800"}}, // a prefix of the port
		{[]string{"10.244.0.7:9", "10.244.0.2:1"}, []string{"10.244.0.2:1"}},
	}
	for _, tt := range tests {
		if got := missingAddrs(dump, tt.want); !cmp.Equal(got, tt.miss) {
			t.Errorf("missingAddrs(%v): got %v, want %v", tt.want, got, tt.miss)
		}
	}
}

func TestProgrammed(t *testing.T) {
	tests := []struct {
		name  string
		conds []targets.Condition
		want  bool
	}{
		{"none", nil, false},
		{"Programmed False", []targets.Condition{{Type: "Accepted", Status: "True"}, {Type: "Programmed", Status: "False"}}, false},
		{"Programmed True after Accepted", []targets.Condition{{Type: "Accepted", Status: "True"}, {Type: "Programmed", Status: "True", Reason: "Programmed"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := programmed(tt.conds)
			if (got != nil) != tt.want || (got != nil && (got.Type != "Programmed" || got.Status != "True")) {
				t.Errorf("programmed(%+v): got %+v, want found=%v", tt.conds, got, tt.want)
			}
		})
	}
}
