package kube_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/api/v1alpha1"
	"github.com/gwdiag/gwdiag/clusters/controller"
	"github.com/gwdiag/gwdiag/clusters/crds"
	"github.com/gwdiag/gwdiag/clusters/kube"
	"github.com/gwdiag/gwdiag/clusters/kube/kubetest"
)

// TestLocalAPIServer starts etcd and kube-apiserver, checks the CRDs are
// served and that the policy schema validates what REFERENCE.md says, and
// that Stop removes the kubeconfig.
func TestLocalAPIServer(t *testing.T) {
	l := kubetest.Start(t)
	// On an address of its own, not on 127.0.0.1 (StartLocal says why).
	if u, err := url.Parse(l.Config.Host); err != nil || !strings.HasPrefix(u.Hostname(), "127.") || u.Hostname() == "127.0.0.1" {
		t.Errorf("API server at %s (%v); want a loopback address of its own", l.Config.Host, err)
	} else if ip := net.ParseIP(u.Hostname()).To4(); ip[1] < 64 || ip[1] >= 128 {
		t.Errorf("API server at %s: want an address in 127.64.0.0/10", l.Config.Host)
	}
	scheme, err := controller.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	// The kubeconfig file is what --kubeconfig users get: build the client from it.
	cfg, err := clientcmd.BuildConfigFromFlags("", l.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range all {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: want.Name}, got); err != nil {
			t.Errorf("CRD %s: %v", want.Name, err)
			continue
		}
		established := false
		for _, cond := range got.Status.Conditions {
			established = established || cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue
		}
		if !established {
			t.Errorf("CRD %s: not Established: %+v", want.Name, got.Status.Conditions)
		}
	}

	target := v1alpha1.PolicyTargetReference{Group: gwv1.GroupName, Kind: "HTTPRoute", Name: "r"}
	policy := func(name string, targets int, local ...v1alpha1.LocalRateLimit) *v1alpha1.GatewayPolicy {
		p := &v1alpha1.GatewayPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
		for range targets {
			p.Spec.TargetRefs = append(p.Spec.TargetRefs, target)
		}
		if local != nil {
			p.Spec.Traffic = &v1alpha1.Traffic{RateLimit: &v1alpha1.RateLimit{Local: local}}
		}
		return p
	}
	req := func(n int64) v1alpha1.LocalRateLimit {
		return v1alpha1.LocalRateLimit{Requests: ptr.To(n), Unit: v1alpha1.UnitSeconds}
	}
	withGlobal := func(p *v1alpha1.GatewayPolicy, g *v1alpha1.GlobalRateLimit) *v1alpha1.GatewayPolicy {
		p.Spec.Traffic = &v1alpha1.Traffic{RateLimit: &v1alpha1.RateLimit{Global: g}}
		return p
	}
	many := make([]v1alpha1.LocalRateLimit, 17)
	for i := range many {
		many[i] = req(1)
	}
	tests := []struct {
		name    string
		obj     *v1alpha1.GatewayPolicy
		wantErr string // "" when the API server must accept it
	}{
		{"valid requests with burst", policy("ok-requests", 1, v1alpha1.LocalRateLimit{Requests: ptr.To[int64](3), Burst: ptr.To[int64](3), Unit: v1alpha1.UnitSeconds}), ""},
		{"valid tokens", policy("ok-tokens", 1, v1alpha1.LocalRateLimit{Tokens: ptr.To[int64](1000), Unit: v1alpha1.UnitMinutes}), ""},
		{"sixteen targets", policy("ok-16", 16, req(1)), ""},
		{"no target", policy("no-target", 0, req(1)), "spec.targetRefs"},
		{"seventeen targets", policy("17-targets", 17, req(1)), "spec.targetRefs"},
		{"requests and tokens", policy("both", 1, v1alpha1.LocalRateLimit{Requests: ptr.To[int64](1), Tokens: ptr.To[int64](1), Unit: v1alpha1.UnitSeconds}), "exactly one of requests or tokens must be set"},
		{"neither requests nor tokens", policy("neither", 1, v1alpha1.LocalRateLimit{Unit: v1alpha1.UnitSeconds}), "exactly one of requests or tokens must be set"},
		{"zero requests", policy("zero", 1, req(0)), "spec.traffic.rateLimit.local[0].requests"},
		{"negative burst", policy("neg-burst", 1, v1alpha1.LocalRateLimit{Requests: ptr.To[int64](1), Burst: ptr.To[int64](-1), Unit: v1alpha1.UnitSeconds}), "spec.traffic.rateLimit.local[0].burst"},
		{"bad unit", policy("days", 1, v1alpha1.LocalRateLimit{Requests: ptr.To[int64](1), Unit: "Days"}), `Unsupported value: "Days"`},
		{"empty local list", policy("empty-local", 1, []v1alpha1.LocalRateLimit{}...), ""},
		{"seventeen limits", policy("17-limits", 1, many...), "spec.traffic.rateLimit.local"},
		{"valid global", withGlobal(policy("global", 1), globalLimit()), ""},
		{"global without descriptors", withGlobal(policy("global-none", 1), func() *v1alpha1.GlobalRateLimit {
			g := globalLimit()
			g.Descriptors = nil
			return g
		}()), "spec.traffic.rateLimit.global.descriptors"},
		{"global without port", withGlobal(policy("global-noport", 1), func() *v1alpha1.GlobalRateLimit {
			g := globalLimit()
			g.BackendRef.Port = nil
			return g
		}()), "port is required"},
		{"global, bad unit", withGlobal(policy("global-unit", 1), func() *v1alpha1.GlobalRateLimit {
			g := globalLimit()
			g.Descriptors[0].Limit.Unit = "Weeks"
			return g
		}()), `Unsupported value: "Weeks"`},
		{"kind Service", func() *v1alpha1.GatewayPolicy {
			p := policy("svc", 1, req(1))
			p.Spec.TargetRefs[0].Kind = "Service"
			return p
		}(), "spec.targetRefs[0].kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Create(ctx, tt.obj)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("create: got %v, want it accepted", err)
			case tt.wantErr != "" && err == nil:
				t.Errorf("create: accepted, want an error containing %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("create: got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}

	// An empty local list is dropped by omitempty, so the stored object has
	// no traffic.rateLimit.local at all; check the raw object to be sure
	// the schema's minItems is not bypassed by a raw client.
	raw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(), "kind": v1alpha1.Kind,
		"metadata": map[string]any{"name": "raw-empty-local", "namespace": "default"},
		"spec": map[string]any{
			"targetRefs": []any{map[string]any{"group": gwv1.GroupName, "kind": "HTTPRoute", "name": "r"}},
			"traffic":    map[string]any{"rateLimit": map[string]any{"local": []any{}}},
		},
	}}
	if err := c.Create(ctx, raw); err == nil || !strings.Contains(err.Error(), "spec.traffic.rateLimit.local") {
		t.Errorf("raw empty local[]: got %v, want a minItems error on spec.traffic.rateLimit.local", err)
	}

	path := l.KubeconfigPath
	if err := l.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("kubeconfig %s after Stop: got %v, want it removed", path, err)
	}
	if err := l.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// globalLimit is a valid spec.traffic.rateLimit.global.
func globalLimit() *v1alpha1.GlobalRateLimit {
	return &v1alpha1.GlobalRateLimit{
		BackendRef: gwv1.BackendObjectReference{Name: "ratelimit", Port: ptr.To[gwv1.PortNumber](8081)},
		Domain:     "gateway",
		Descriptors: []v1alpha1.GlobalRateLimitDescriptor{{
			Entries: []v1alpha1.DescriptorEntry{{Name: "user", Expression: `request.headers["x-user"]`}},
			Limit:   &v1alpha1.GlobalLimit{Amount: 100, Unit: "Minutes"},
		}},
	}
}

// TestStartLocalSaysWhyEtcdFailed: a start whose etcd exits quotes etcd's
// last lines, and is tried again on a new address only when etcd's port
// was taken (three tries in all); otherwise it fails at once.
func TestStartLocalSaysWhyEtcdFailed(t *testing.T) {
	for _, tt := range []struct {
		name, says string
		tries      int
	}{
		{"port taken", "listen tcp 127.0.0.1:2380: bind: address already in use", 3},
		{"another failure", "etcdmain: cannot access data directory: permission denied", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			// Whatever the start makes in the temporary folder, a failed
			// start removes.
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			counter := filepath.Join(dir, "starts")
			// envtest runs etcd --help first (to see its flags): that is
			// not a start.
			script := "#!/bin/sh\ncase \"$*\" in *--help*) exit 0;; esac\necho start >> " + counter + "\necho '" + tt.says + "' >&2\nexit 1\n"
			if err := os.WriteFile(filepath.Join(dir, "etcd"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "kube-apiserver"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			l, err := kube.StartLocal(ctx, kube.LocalOptions{Binaries: kube.Binaries{Dir: dir}, StartTimeout: 20 * time.Second})
			if err == nil {
				l.Stop()
				t.Fatal("StartLocal with an etcd that exits: no error")
			}
			if !strings.Contains(err.Error(), "etcd's last lines:\n"+tt.says) {
				t.Errorf("error does not quote etcd's output %q:\n%v", tt.says, err)
			}
			b, _ := os.ReadFile(counter)
			// envtest itself starts etcd up to five times a try, on the
			// same port: count tries by the address in the error.
			if got := strings.Count(err.Error(), "start etcd + kube-apiserver from"); got != tt.tries {
				t.Errorf("%d tries (etcd started %d times); want %d:\n%v", got, strings.Count(string(b), "start"), tt.tries, err)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("the start ran into the test's deadline: %v", err)
			}
			if left, _ := os.ReadDir(tmp); len(left) > 0 {
				var names []string
				for _, e := range left {
					names = append(names, e.Name())
				}
				t.Errorf("the failed start left %v in the temporary folder; want nothing", names)
			}
		})
	}
}
