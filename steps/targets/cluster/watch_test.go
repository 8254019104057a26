package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/clusters/controller"
	"github.com/gwdiag/gwdiag/clusters/kube/kubetest"
	"github.com/gwdiag/gwdiag/steps/await"
	"github.com/gwdiag/gwdiag/steps/targets"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestWatchNamespaceWakesWaits: on a real API server, a change to each kind
// the scenario's waits read (Gateway, HTTPRoute, the policy, Pod) wakes a
// wait whose fallback interval (an hour) is far past its timeout (30 s), so
// only the namespace's watches can end it in time. A watch of the wrong
// kind, namespace or list type leaves its rounds to time out, and fails.
func TestWatchNamespaceWakesWaits(t *testing.T) {
	l := kubetest.Start(t)
	c := New(Options{})
	var err error
	if c.client, err = controller.NewClient(l.Config); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gwdiag-watch-"}}
	if err := c.client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	setup := targets.Setup{
		Backends: []targets.Backend{{Name: "httpbin", Kind: targets.BackendEcho}},
		Listeners: []targets.Listener{{Name: "default", Routes: []targets.Route{{Name: "httpbin", PathPrefix: "/", Backend: "httpbin",
			Limits: []targets.Limit{{Kind: targets.LimitRequests, Amount: 3, Unit: time.Second, Burst: 3}}}}}},
	}
	objs, err := clusterManifests(setup, ns.Name, c.opts.GatewayClassName, c.policy, nil)
	if err != nil {
		t.Fatal(err)
	}
	objs = append(objs, &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "proxy", Namespace: ns.Name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "proxy", Image: "gwdiag/none"}}},
	})
	type object struct {
		kind string
		o    client.Object
	}
	var watched []object
	for _, o := range objs {
		kind := o.GetObjectKind().GroupVersionKind().Kind
		if err := c.client.Create(ctx, o); err != nil {
			t.Fatalf("create %s %s: %v", kind, o.GetName(), err)
		}
		switch kind {
		case "Service", "EndpointSlice":
		default:
			watched = append(watched, object{kind, o})
		}
	}
	if len(watched) != 4 {
		t.Fatalf("watched objects: got %d, want a Gateway, an HTTPRoute, a policy and a Pod", len(watched))
	}

	d := &clusterDeployment{c: c, ns: ns.Name}
	d.watchNamespace(ctx)
	defer d.stopWatch()

	const key = "gwdiag.test/round"
	for _, w := range watched {
		o, name := w.o, w.kind+" "+w.o.GetName()
		// Three rounds each: the first may be woken by a watch opening;
		// the later ones only by the change.
		for round := range 3 {
			want := string(rune('a' + round))
			var once sync.Once
			err := await.UntilChanged(ctx, 30*time.Second, time.Hour, d.changes.Next, func(ctx context.Context) (bool, string, error) {
				if err := c.client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
					return false, "", err
				}
				if got := o.GetAnnotations()[key]; got == want {
					return true, "", nil
				}
				// Change it once the wait has read it unchanged.
				once.Do(func() {
					patch := client.MergeFrom(o.DeepCopyObject().(client.Object))
					a := o.GetAnnotations()
					if a == nil {
						a = map[string]string{}
					}
					a[key] = want
					o.SetAnnotations(a)
					if err := c.client.Patch(ctx, o, patch); err != nil {
						t.Errorf("%s: patch: %v", name, err)
					}
				})
				return false, "annotation " + key + "=" + o.GetAnnotations()[key], nil
			})
			if err != nil {
				t.Fatalf("%s, round %d: %v (the namespace's watches did not wake the wait)", name, round, err)
			}
		}
	}
}
