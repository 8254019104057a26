package node_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/clusters/kube/images"
	"github.com/gwdiag/gwdiag/clusters/kube/node"
	"github.com/gwdiag/gwdiag/clusters/toolbin"
)

// TestContainerdRunsPackedImage: containerd from Debian's packages, in its
// own mount namespace, imports the pause image packed here and runs it
// with runc; Stop leaves no containerd, shim or cgroup behind.
func TestContainerdRunsPackedImage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: containerd needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// A local node of another package's tests would share the k8s.io
	// cgroups and the machine.
	unlock, err := node.LockMachine(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	cache := filepath.Join(os.TempDir(), "gwdiag-node-packages")
	pkgs, err := node.FetchPackages(ctx, cache, nil)
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	pause := filepath.Join(state, "pause")
	if err := toolbin.BuildStatic(context.Background(), "", pause, "../cmd/pause"); err != nil {
		t.Fatal(err)
	}
	tarball := filepath.Join(state, "images.tar")
	const ref = "gwdiag.local/pause:dev"
	if err := images.WriteTarball(tarball, images.Image{Ref: ref, Files: map[string]string{"/pause": pause}, Entrypoint: []string{"/pause"}}); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	c, err := node.StartContainerd(ctx, node.ContainerdOptions{State: state, Packages: pkgs, SandboxImage: ref, Output: &log})
	if err != nil {
		t.Fatalf("%v\ncontainerd log:\n%s", err, log.String())
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = c.Stop()
		}
	})
	if err := c.Import(ctx, tarball); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Ctr(ctx, "run", "-d", ref, "gwdiag-pause"); err != nil {
		t.Fatalf("%v\ncontainerd log:\n%s", err, log.String())
	}
	out, err := c.Ctr(ctx, "tasks", "ls")
	if err != nil || !strings.Contains(string(out), "RUNNING") {
		t.Fatalf("tasks: %s %v; want gwdiag-pause RUNNING", out, err)
	}
	pid := c.Pid()
	if err := c.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	stopped = true
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
		t.Errorf("containerd (pid %d) still runs after Stop", pid)
	}
	if leftovers, _ := filepath.Glob("/sys/fs/cgroup/*/k8s.io/gwdiag-pause"); len(leftovers) > 0 {
		t.Errorf("cgroups left after Stop: %v", leftovers)
	}
	if out, _ := exec.Command("pgrep", "-f", "containerd-shim.*"+state).Output(); len(out) > 0 {
		t.Errorf("shims left after Stop: %s", out)
	}
}
