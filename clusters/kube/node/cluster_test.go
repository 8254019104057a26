package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gwdiag/gwdiag/clusters/kube"
	"github.com/gwdiag/gwdiag/clusters/kube/images"
	"github.com/gwdiag/gwdiag/clusters/kube/node"
	"github.com/gwdiag/gwdiag/clusters/toolbin"
)

// startCluster starts a local node for a test with the echo mock as image
// gwdiag.local/echo:dev, skipping only where a node cannot run at all;
// lockHeld says the test holds the machine lock (lockMachine).
func startCluster(t *testing.T, ctx context.Context, lockHeld bool) *node.Cluster {
	t.Helper()
	dir := t.TempDir()
	echo, fetch := filepath.Join(dir, "mockbackend"), filepath.Join(dir, "fetch")
	for out, pkg := range map[string]string{echo: "../../../steps/mock/cmd/mockbackend", fetch: "./testdata/fetch"} {
		if err := toolbin.BuildStatic(ctx, "", out, pkg); err != nil {
			t.Fatal(err)
		}
	}
	o := node.ClusterOptions{Images: []images.Image{
		{Ref: "gwdiag.local/echo:dev", Files: map[string]string{"/mockbackend": echo}, Entrypoint: []string{"/mockbackend", "--llm-addr", "", "--echo-addr", ":8000"}},
		{Ref: "gwdiag.local/fetch:dev", Files: map[string]string{"/fetch": fetch}, Entrypoint: []string{"/fetch"}},
	}}
	if lockHeld {
		o = node.WithMachineLockHeld(o)
	}
	c, err := node.StartCluster(ctx, o)
	switch {
	case errors.Is(err, node.ErrNotRoot):
		t.Skipf("skipped: %v", err)
	case errors.Is(err, kube.ErrNoNetwork):
		t.Skipf("skipped: %v", err)
	case err != nil:
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return c
}

// runsAPod: a Deployment's pod, from an image packed here, becomes Ready
// on the local node c, the host reaches it on its pod IP, and a second pod
// reaches it across the bridge.
func runsAPod(t *testing.T, ctx context.Context, c *node.Cluster) {
	t.Logf("figure: node Ready %v after start (after %v waiting for another node to stop)", c.Took.Round(100*time.Millisecond), c.Waited.Round(100*time.Millisecond))
	cs := kubernetes.NewForConfigOrDie(c.Config)
	created := time.Now()
	labels := map[string]string{"app": "echo"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					Containers: []corev1.Container{{Name: "echo", Image: "gwdiag.local/echo:dev", ImagePullPolicy: corev1.PullNever,
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8000)}},
							PeriodSeconds: 1}}},
				},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	last := "no pod yet"
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
		if err != nil || len(pods.Items) == 0 {
			return false, nil
		}
		pod = pods.Items[0]
		last = fmt.Sprintf("phase %s, conditions %v, statuses %v", pod.Status.Phase, pod.Status.Conditions, pod.Status.ContainerStatuses)
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod not Ready (last: %s): %v\nkubelet log:\n%s", last, err, c.Logs("kubelet"))
	}
	t.Logf("figure: a new Deployment's pod Ready %v after its creation", time.Since(created).Round(100*time.Millisecond))
	var total int64
	for part, b := range c.MemoryRSS() {
		t.Logf("figure: RSS %s %d MiB", part, b>>20)
		total += b
	}
	t.Logf("figure: RSS of the whole cluster %d MiB", total>>20)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + pod.Status.PodIP + ":8000/get")
	if err != nil {
		t.Fatalf("GET the pod at %s: %v", pod.Status.PodIP, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET the pod: %d %s; want 200", resp.StatusCode, body)
	}
	if !strings.HasPrefix(pod.Status.PodIP, "10.244.") {
		t.Errorf("pod IP %s is not in the node's pod network 10.244.0.0/16", pod.Status.PodIP)
	}

	// Pod to pod, across the bridge: what a proxy pod does to its backends
	// (a firewall's FORWARD policy can drop it while host traffic passes).
	fetcher := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "fetch", Namespace: "default"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "fetch", Image: "gwdiag.local/fetch:dev", ImagePullPolicy: corev1.PullNever,
				Args: []string{"http://" + pod.Status.PodIP + ":8000/get"}}}},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, fetcher, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var phase corev1.PodPhase
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "fetch", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	})
	if phase != corev1.PodSucceeded {
		logs, _ := cs.CoreV1().Pods("default").GetLogs("fetch", &corev1.PodLogOptions{}).DoRaw(ctx)
		t.Errorf("a pod GETting the echo pod at %s: phase %s (%v), output %q; want Succeeded", pod.Status.PodIP, phase, err, logs)
	}
}

// machineState is what a node changes on the machine, read from it.
type machineState struct {
	sysctls   map[string]string
	bridges   []string
	cgroups   []string
	processes []string
	states    []string
	rules     []string
}

func readMachineState(t *testing.T) machineState {
	t.Helper()
	s := machineState{sysctls: map[string]string{}}
	for _, k := range []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"} {
		b, _ := os.ReadFile("/proc/sys/" + k)
		s.sysctls[k] = strings.TrimSpace(string(b))
	}
	s.bridges, _ = filepath.Glob("/sys/class/net/gwdn*")
	s.cgroups, _ = filepath.Glob("/sys/fs/cgroup/*/gwdiag-localnode-*")
	k8s, _ := filepath.Glob("/sys/fs/cgroup/*/k8s.io")
	s.cgroups = append(s.cgroups, k8s...)
	s.states, _ = filepath.Glob(filepath.Join(os.TempDir(), "gwdiag-localnode-*"))
	if rules, err := exec.Command("iptables", "-w", "-S", "FORWARD").Output(); err == nil {
		for _, r := range strings.Split(string(rules), "\n") {
			if strings.Contains(r, "gwdiag local node") {
				s.rules = append(s.rules, r)
			}
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmd, "gwdiag-localnode-") && !strings.Contains(cmd, "TestCluster") {
			s.processes = append(s.processes, cmd)
		}
	}
	return s
}

// lockMachine holds the machine lock for the rest of the test, so that no
// other node (another package's tests) runs between the reads of the
// machine, and returns the machine as it is before the test's node.
func lockMachine(t *testing.T, ctx context.Context) machineState {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: a local node needs root")
	}
	unlock, err := node.LockMachine(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)
	s := readMachineState(t)
	if len(s.states) > 0 {
		t.Logf("state directories of earlier runs (the next start sweeps them): %v", s.states)
		s.states = nil
	}
	return s
}

// assertCleanMachine fails when anything of a node is left, or a sysctl
// differs from before.
func assertCleanMachine(t *testing.T, before machineState) {
	t.Helper()
	after := readMachineState(t)
	for k, v := range before.sysctls {
		if after.sysctls[k] != v {
			t.Errorf("sysctl %s = %s after the node, want %s as before", k, after.sysctls[k], v)
		}
	}
	for what, left := range map[string][]string{"iptables rules": after.rules, "bridges": after.bridges, "cgroups": after.cgroups, "processes": after.processes, "state directories": after.states} {
		if len(left) > 0 {
			t.Errorf("%s left behind: %v", what, left)
		}
	}
}

// envKilledRun makes the test binary a run that starts a node and is then
// killed: TestClusterLifecycle runs it.
const envKilledRun = "GWDIAG_TEST_KILLED_RUN"

// TestClusterLifecycle is a local node's life on this machine, on one
// node start after the killed run's (a start costs about 10 s of the
// machine's two cores; these were three tests with a start each):
//   - a run killed with SIGKILL leaves its node behind, and the next
//     StartCluster removes it all first;
//   - that node runs a pod from a packed image, which the host and another
//     pod reach (runsAPod), with one bridge and the node's processes while
//     it runs;
//   - Stop removes every process, the bridge, the iptables rule, the
//     cgroups and the state, and puts back the sysctls the kubelet set.
func TestClusterLifecycle(t *testing.T) {
	if os.Getenv(envKilledRun) != "" {
		// The child: start a node, say so, and wait to be killed.
		ctx := context.Background()
		// The parent holds the machine lock on its behalf.
		c, err := node.StartCluster(ctx, node.WithMachineLockHeld(node.ClusterOptions{}))
		if err != nil {
			fmt.Println("start failed:", err)
			os.Exit(1)
		}
		fmt.Println("ready", c.State)
		select {}
	}
	if os.Geteuid() != 0 {
		t.Skip("skipped: a local node needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	before := lockMachine(t, ctx)
	child := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestClusterLifecycle$", "-test.v")
	child.Env = append(os.Environ(), envKilledRun+"=1")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(seen.String(), "ready ") {
		n, err := out.Read(buf)
		seen.Write(buf[:n])
		if err != nil {
			_ = child.Wait()
			t.Fatalf("the child run did not start its node: %v\n%s", err, seen.String())
		}
	}
	// The kill Pdeathsig forwards to the control plane; containerd's shims
	// and the bridge, cgroups, sysctls and state stay for the sweep.
	_ = child.Process.Signal(syscall.SIGKILL)
	_ = child.Wait()
	left := readMachineState(t)
	if len(left.states) == 0 || len(left.bridges) == 0 {
		t.Fatalf("the killed run left no state or bridge to sweep (states %v, bridges %v): the test proves nothing", left.states, left.bridges)
	}
	t.Run("next run", func(t *testing.T) {
		c := startCluster(t, ctx, true)
		if st := readMachineState(t); len(st.bridges) != 1 || len(st.processes) == 0 || len(st.states) != 1 {
			t.Errorf("while running: bridges %v, processes %d, state directories %v; want one bridge, the node's processes and its state alone (the killed run's swept)", st.bridges, len(st.processes), st.states)
		}
		if c.HostAddr != "10.244.0.1" {
			t.Errorf("HostAddr = %s, want the bridge's 10.244.0.1", c.HostAddr)
		}
		runsAPod(t, ctx, c)
	})
	assertCleanMachine(t, before)
}

// InstallCRDs logs through controller-runtime's global logger, which warns
// with a stack when never set.
func init() { ctrllog.SetLogger(logr.Discard()) }

// TestFailedStartLeavesNothing: a start that fails late (the kubelet exits
// at once, after containerd, the bridge and the control plane are up)
// says why, with the kubelet's log, and leaves nothing behind.
func TestFailedStartLeavesNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: a local node needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	real, err := kube.EnsureNodeBinaries(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, p := range []string{real.Etcd(), real.APIServer(), real.ControllerManager(), real.Scheduler()} {
		if err := os.Symlink(p, filepath.Join(dir, filepath.Base(p))); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kubelet"), []byte("#!/bin/sh\necho 'kubelet: refusing to start (test)' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := lockMachine(t, ctx)
	c, err := node.StartCluster(ctx, node.WithMachineLockHeld(node.ClusterOptions{Binaries: kube.Binaries{Dir: dir}}))
	if err == nil {
		c.Stop()
		t.Fatal("StartCluster with a kubelet that exits: no error")
	}
	if !strings.Contains(err.Error(), "kubelet exited") || !strings.Contains(err.Error(), "refusing to start (test)") {
		t.Errorf("error: %v; want it to say the kubelet exited, with its log", err)
	}
	assertCleanMachine(t, before)
}
