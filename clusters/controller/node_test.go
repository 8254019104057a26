package controller_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gwdiag/gwdiag/clusters/controller"
	"github.com/gwdiag/gwdiag/clusters/kube"
	"github.com/gwdiag/gwdiag/clusters/kube/images"
	"github.com/gwdiag/gwdiag/clusters/kube/node"
	kubepods "github.com/gwdiag/gwdiag/clusters/kube/pods"
	"github.com/gwdiag/gwdiag/clusters/kube/portforward"
	"github.com/gwdiag/gwdiag/clusters/toolbin"
)

// TestDataPlaneOnRealNode runs the controller with its data plane on the
// local node, where a real kubelet runs the proxy pod: Programmed stays
// False/Pending until the pod is Ready; the proxy then serves the route
// through a port-forward; and a policy added while requests flow reaches
// the running pod (a 429 appears) with no failed request and no restart.
func TestDataPlaneOnRealNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bins := t.TempDir()
	if err := toolbin.BuildStatic(ctx, "", bins+"/", "github.com/gwdiag/gwdiag/refproxy/cmd/refproxy", "github.com/gwdiag/gwdiag/steps/mock/cmd/mockbackend"); err != nil {
		t.Fatal(err)
	}
	const proxyImage, echoImage = "gwdiag.local/refproxy:dev", "gwdiag.local/echo:dev"
	n, err := node.StartCluster(ctx, node.ClusterOptions{Images: []images.Image{
		{Ref: proxyImage, Files: map[string]string{"/refproxy": filepath.Join(bins, "refproxy")}, Entrypoint: []string{"/refproxy"}},
		{Ref: echoImage, Files: map[string]string{"/mockbackend": filepath.Join(bins, "mockbackend")},
			Entrypoint: []string{"/mockbackend", "--llm-addr", "", "--echo-addr", ":8000"}},
	}})
	switch {
	case errors.Is(err, node.ErrNotRoot), errors.Is(err, kube.ErrNoNetwork):
		t.Skipf("skipped: %v", err)
	case err != nil:
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Stop(); err != nil {
			t.Errorf("node Stop: %v", err)
		}
	})
	stop, err := controller.Run(ctx, n.Config, controller.Options{DataPlane: &controller.DataPlane{Image: proxyImage, PullPolicy: corev1.PullNever}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	c, err := controller.NewClient(n.Config)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, c: c, ns: "dp"}
	f.create(&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "gwdiag"}, Spec: gwv1.GatewayClassSpec{ControllerName: controller.ControllerName}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}})
	awaitServiceAccount(t, ctx, c, f.ns)

	labels := map[string]string{"app": "echo"}
	svc := service("echo")
	svc.Spec.Selector = labels
	svc.Spec.Ports[0].TargetPort = intstr.FromInt32(8000)
	f.create(svc, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "echo"}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "echo", Image: echoImage, ImagePullPolicy: corev1.PullNever,
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8000)}}}}},
		}},
	}})
	gw := gateway("gw", "gwdiag", gwv1.NamespacesFromSame)
	f.create(gw, route("echo", "", "gw", "echo"))

	// Programmed: Pending while no proxy pod is Ready, True only with one.
	var sawPending bool
	var pod *corev1.Pod
	last := "no status yet"
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(gw), gw); err != nil {
			return false, nil
		}
		cond := meta.FindStatusCondition(gw.Status.Conditions, "Programmed")
		if cond == nil {
			return false, nil
		}
		last = fmt.Sprintf("Programmed=%s %s %q", cond.Status, cond.Reason, cond.Message)
		ready := readyProxyPod(ctx, c, f.ns, "gw")
		switch {
		case cond.Status == metav1.ConditionFalse && cond.Reason == "Pending":
			sawPending = true
		case cond.Status == metav1.ConditionTrue && ready == nil:
			return false, fmt.Errorf("Gateway %s while no proxy pod is Ready", last)
		case cond.Status == metav1.ConditionTrue:
			pod = ready
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("Gateway Programmed (last: %s): %v\nkubelet log:\n%s", last, err, n.Logs("kubelet"))
	}
	if !sawPending {
		t.Errorf("never saw Programmed=False/Pending before the proxy pod was Ready")
	}

	fw, err := portforward.Start(ctx, n.Config, nil, f.ns, pod.Name, 8080)
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	url := "http://" + fw.Addr() + "/get"
	get := func() (int, error) {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	lastGet := "no answer yet"
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		code, err := get()
		if lastGet = fmt.Sprintf("status %d", code); err != nil {
			lastGet = err.Error()
		}
		return err == nil && code == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("GET %s through the proxy pod never answered 200 (last: %s): %v\nproxy pod log:\n%s", url, lastGet, err, podLog(ctx, n, f.ns, pod.Name))
	}

	// A policy added while requests flow: the limit reaches the running pod
	// (429s appear), and no request fails on the way.
	var mu sync.Mutex
	var failures []string
	counts := map[int]int{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			code, err := get()
			mu.Lock()
			switch {
			case err != nil:
				failures = append(failures, err.Error())
			case code != http.StatusOK && code != http.StatusTooManyRequests:
				failures = append(failures, fmt.Sprintf("status %d", code))
			default:
				counts[code]++
			}
			limited := counts[http.StatusTooManyRequests] >= 3
			mu.Unlock()
			if limited {
				return
			}
		}
	}()
	p := policy("echo", "HTTPRoute", "echo")
	p.Spec.Traffic.RateLimit.Local[0].Requests, p.Spec.Traffic.RateLimit.Local[0].Burst, p.Spec.Traffic.RateLimit.Local[0].Unit = ptr.To[int64](1), nil, "Hours"
	changed := time.Now()
	f.create(p)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Errorf("requests failed while the config changed: %v", failures)
	}
	if counts[http.StatusTooManyRequests] < 3 {
		t.Errorf("within a minute of adding a 1-per-hour limit: %v; want 429s from the running pod", counts)
	}
	t.Logf("figure: the policy reached the running pod within %v (%d requests answered 200 meanwhile)", time.Since(changed).Round(100*time.Millisecond), counts[http.StatusOK])
	after := readyProxyPod(ctx, c, f.ns, "gw")
	if after == nil || after.Name != pod.Name || after.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("proxy pod after the change: %v; want %s still Ready with no restart", podSummary(after), pod.Name)
	}
}

// readyProxyPod returns the proxy pod of the gateway the CLI would pick
// (the first Ready one by name), or nil.
func readyProxyPod(ctx context.Context, c client.Client, ns, gw string) *corev1.Pod {
	var list corev1.PodList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{controller.GatewayNameLabel: gw}); err != nil {
		return nil
	}
	p, _ := kubepods.FirstReady(list.Items)
	return p
}

func podSummary(p *corev1.Pod) string {
	if p == nil {
		return "no Ready pod"
	}
	return fmt.Sprintf("%s %s %+v", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
}

// awaitServiceAccount waits for the namespace's default ServiceAccount:
// pods are refused until kube-controller-manager made it.
func awaitServiceAccount(t *testing.T, ctx context.Context, c client.Client, ns string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{}) == nil, nil
	})
	if err != nil {
		t.Fatalf("namespace %s has no default ServiceAccount: %v", ns, err)
	}
}

// podLog is the log of a pod of the node, or why it cannot be read.
func podLog(ctx context.Context, n *node.Cluster, ns, name string) string {
	cs, err := kubernetes.NewForConfig(n.Config)
	if err != nil {
		return err.Error()
	}
	logs, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return err.Error()
	}
	return string(logs)
}
