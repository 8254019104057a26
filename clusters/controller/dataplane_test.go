package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/api/v1alpha1"
	"github.com/gwdiag/gwdiag/clusters/controller"
	"github.com/gwdiag/gwdiag/refproxy/config"
)

// TestDataPlaneDeployment runs the controller with a data plane against a
// real kube-apiserver. No kubelet runs here, so the test plays the
// Deployment controller's part: Programmed must wait for a ready replica,
// and the ConfigMap must follow routes, policies and endpoints.
func TestDataPlaneDeployment(t *testing.T) {
	c := runController(t, controller.Options{DataPlane: &controller.DataPlane{Image: "gwdiag/refproxy:dev", PullPolicy: corev1.PullNever}})
	ctx := context.Background()
	f := &fixture{t: t, c: c, ns: "dp"}
	f.create(&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "gwdiag"}, Spec: gwv1.GatewayClassSpec{ControllerName: controller.ControllerName}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}})

	gw := gateway("gw", "gwdiag", gwv1.NamespacesFromSame)
	f.create(gw)
	f.await(gw, gatewayConds(gw), accepted,
		want{"Programmed", "False", "Pending", "waiting for a ready replica of Deployment dp/gw-refproxy (0 of 1 ready)"})

	name := client.ObjectKey{Namespace: f.ns, Name: controller.DataPlaneName("gw")}
	dep := &appsv1.Deployment{}
	if err := c.Get(ctx, name, dep); err != nil {
		t.Fatal(err)
	}
	if len(dep.OwnerReferences) != 1 || dep.OwnerReferences[0].Name != "gw" || dep.Spec.Template.Labels[controller.GatewayNameLabel] != "gw" {
		t.Errorf("Deployment: owners %+v, pod labels %v; want owned by Gateway gw, pods labelled %s=gw", dep.OwnerReferences, dep.Spec.Template.Labels, controller.GatewayNameLabel)
	}
	ctr := dep.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range ctr.Env {
		env[e.Name] = e.Value
		if e.ValueFrom != nil {
			env[e.Name] = "field:" + e.ValueFrom.FieldRef.FieldPath
		}
	}
	if diff := cmp.Diff(map[string]string{"POD_NAME": "field:metadata.name", "POD_NAMESPACE": "field:metadata.namespace", "GATEWAY_NAME": "gw"}, env); diff != "" {
		t.Errorf("proxy env (-want +got):\n%s", diff)
	}
	if ctr.Image != "gwdiag/refproxy:dev" || ctr.ImagePullPolicy != corev1.PullNever || ctr.ReadinessProbe == nil {
		t.Errorf("container: image %s pull %s readiness %v", ctr.Image, ctr.ImagePullPolicy, ctr.ReadinessProbe)
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, name, svc); err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8080 || svc.Spec.Selector[controller.GatewayNameLabel] != "gw" {
		t.Errorf("Service: ports %+v selector %v; want 8080 selecting the gateway's pods", svc.Spec.Ports, svc.Spec.Selector)
	}
	// Each object of the data plane is the Gateway's: owned by it (deleted
	// with it) and labelled with its name.
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, name, cm); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{cm, svc, dep} {
		owners := o.GetOwnerReferences()
		if len(owners) != 1 || owners[0].Kind != "Gateway" || owners[0].Name != "gw" || !ptr.Deref(owners[0].Controller, false) ||
			o.GetLabels()[controller.GatewayNameLabel] != "gw" {
			t.Errorf("%T %s: owners %+v, labels %v; want controlled by Gateway gw and labelled %s=gw", o, o.GetName(), owners, o.GetLabels(), controller.GatewayNameLabel)
		}
	}

	// A route, its backend with one ready endpoint and a policy: the
	// config carries the cluster route key, the pod endpoint and the limit.
	f.create(service("httpbin"), route("httpbin", "", "gw", "httpbin"), policy("limit", "HTTPRoute", "httpbin"),
		&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "httpbin-1", Labels: map[string]string{discoveryv1.LabelServiceName: "httpbin"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		})
	cfg := awaitConfig(t, c, name, func(cfg *config.Config) bool {
		return len(cfg.Binds) == 1 && len(cfg.Binds[0].Listeners) == 1 && len(cfg.Binds[0].Listeners[0].Routes) == 1 &&
			len(cfg.Binds[0].Listeners[0].Routes[0].Backends) == 1 && cfg.Binds[0].Listeners[0].Routes[0].Backends[0].Host == "10.244.0.7:8080" &&
			len(cfg.Policies) == 1
	})
	r := cfg.Binds[0].Listeners[0].Routes[0]
	if got := config.RouteKey(cfg.Binds[0], cfg.Binds[0].Listeners[0], 0, r, 0); got != "dp/httpbin.00.http" {
		t.Errorf("route key %q, want dp/httpbin.00.http (the cluster form)", got)
	}
	if cfg.Binds[0].Port != 8080 || cfg.AdminAddress() != "127.0.0.1:15000" {
		t.Errorf("bind port %d, admin %s; want 8080 and 127.0.0.1:15000", cfg.Binds[0].Port, cfg.AdminAddress())
	}
	if p := cfg.Policies[0]; p.Target.Route == nil || p.Target.Route.Name != "httpbin" || len(p.Policy.LocalRateLimit) != 1 || p.Policy.LocalRateLimit[0].MaxTokens != 6 {
		t.Errorf("policy %+v; want the route's 3/s burst 3 as a bucket of 6", p)
	}

	// The Deployment controller reports a ready replica: Programmed.
	dep.Status = appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1, ObservedGeneration: dep.Generation}
	if err := c.Status().Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
	f.await(gw, gatewayConds(gw), accepted, want{"Programmed", "True", "Programmed", "Deployment dp/gw-refproxy has 1 of 1 replicas ready"})

	// Each change reaches the config of the Gateway it concerns without a
	// route changing: the policy's limit, a policy on the Gateway itself,
	// a second endpoint and its removal.
	pol := &v1alpha1.GatewayPolicy{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "limit"}, pol); err != nil {
		t.Fatal(err)
	}
	pol.Spec.Traffic.RateLimit.Local[0].Burst = ptr.To[int64](5)
	if err := c.Update(ctx, pol); err != nil {
		t.Fatal(err)
	}
	awaitConfig(t, c, name, func(cfg *config.Config) bool {
		return len(cfg.Policies) == 1 && len(cfg.Policies[0].Policy.LocalRateLimit) == 1 && cfg.Policies[0].Policy.LocalRateLimit[0].MaxTokens == 8
	})
	f.create(policy("gw-limit", "Gateway", "gw"))
	awaitConfig(t, c, name, func(cfg *config.Config) bool { return len(cfg.Policies) == 2 })
	f.create(&discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "httpbin-2", Labels: map[string]string{discoveryv1.LabelServiceName: "httpbin"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.8"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
	})
	awaitConfig(t, c, name, func(cfg *config.Config) bool {
		return len(cfg.Binds[0].Listeners[0].Routes[0].Backends) == 2
	})
	if err := c.Delete(ctx, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "httpbin-2", Namespace: f.ns}}); err != nil {
		t.Fatal(err)
	}
	awaitConfig(t, c, name, func(cfg *config.Config) bool {
		return len(cfg.Binds[0].Listeners[0].Routes[0].Backends) == 1
	})

	// The endpoint goes away: the backend stays, by its Service name.
	if err := c.Delete(ctx, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "httpbin-1", Namespace: f.ns}}); err != nil {
		t.Fatal(err)
	}
	awaitConfig(t, c, name, func(cfg *config.Config) bool {
		b := cfg.Binds[0].Listeners[0].Routes[0].Backends
		return len(b) == 1 && b[0].Host == "httpbin.dp.svc.cluster.local:8000"
	})
}

// awaitConfig polls the data plane's ConfigMap until its config, parsed as
// refproxy parses it, satisfies ok, and returns it.
func awaitConfig(t *testing.T, c client.Client, key client.ObjectKey, ok func(*config.Config) bool) *config.Config {
	t.Helper()
	var last string
	var cfg *config.Config
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, awaitTimeout, true, func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, key, cm); err != nil {
			last = err.Error()
			return false, nil
		}
		last = cm.Data[controller.ConfigFile]
		parsed, err := config.Parse(controller.ConfigFile, []byte(last))
		if err != nil {
			t.Fatalf("refproxy rejects the controller's config: %v\n%s", err, last)
		}
		cfg = parsed
		return ok(parsed), nil
	})
	if err != nil {
		t.Fatalf("ConfigMap %s: %v; last seen:\n%s", key, err, strings.TrimSpace(last))
	}
	return cfg
}
