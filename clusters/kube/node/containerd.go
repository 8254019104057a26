// Package node runs the pieces of the local node that are not Kubernetes
// binaries: containerd with runc and the CNI plugins, from Debian's
// packages unpacked under a state directory (nothing is installed system
// wide), in a private mount namespace so that every mount it makes
// vanishes with it. ../shared/reference/LOCAL-CLUSTER.md records why each
// setting is what it is.
package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gwdiag/gwdiag/clusters/toolbin"
)

// Debian packages the node runs, unpacked with dpkg -x.
var packages = []string{"containerd", "runc", "containernetworking-plugins"}

// Packages is where the packages are unpacked.
type Packages struct{ Root string }

// Bin is the path of a program of the packages (containerd, ctr, runc).
func (p Packages) Bin(name string) string {
	for _, dir := range []string{"usr/bin", "usr/sbin"} {
		if f := filepath.Join(p.Root, dir, name); fileExists(f) {
			return f
		}
	}
	return filepath.Join(p.Root, "usr/bin", name)
}

// CNIDir holds the CNI plugins (bridge, host-local, loopback).
func (p Packages) CNIDir() string { return filepath.Join(p.Root, "usr/lib/cni") }

func fileExists(f string) bool { _, err := os.Stat(f); return err == nil }

// FetchPackages downloads the packages with apt-get (into dir/debs, kept
// as a cache) and unpacks them into dir/root. A failed download is retried
// once after apt-get update, for a machine whose package lists are empty.
func FetchPackages(ctx context.Context, dir string, log io.Writer) (Packages, error) {
	p := Packages{Root: filepath.Join(dir, "root")}
	if fileExists(p.Bin("containerd")) && fileExists(p.Bin("runc")) && fileExists(filepath.Join(p.CNIDir(), "bridge")) {
		return p, nil
	}
	if log == nil {
		log = io.Discard
	}
	debs := filepath.Join(dir, "debs")
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return p, err
	}
	download := func() error {
		cmd := exec.CommandContext(ctx, "apt-get", append([]string{"download", "-q"}, packages...)...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = debs, log, log
		return cmd.Run()
	}
	if err := download(); err != nil {
		update := exec.CommandContext(ctx, "apt-get", "update", "-q")
		update.Stdout, update.Stderr = log, log
		if uerr := update.Run(); uerr != nil {
			return p, fmt.Errorf("apt-get download %s: %w (and apt-get update: %v)", strings.Join(packages, " "), err, uerr)
		}
		if err := download(); err != nil {
			return p, fmt.Errorf("apt-get download %s: %w", strings.Join(packages, " "), err)
		}
	}
	files, err := filepath.Glob(filepath.Join(debs, "*.deb"))
	if err != nil {
		return p, err
	}
	for _, f := range files {
		cmd := exec.CommandContext(ctx, "dpkg", "-x", f, p.Root)
		if out, err := cmd.CombinedOutput(); err != nil {
			return p, fmt.Errorf("dpkg -x %s: %w: %s", filepath.Base(f), err, out)
		}
	}
	return p, nil
}

// ContainerdOptions configure StartContainerd.
type ContainerdOptions struct {
	// State is the directory the node owns; containerd keeps everything
	// under State/containerd.
	State    string
	Packages Packages
	// SandboxImage is the pause image, imported before pods start.
	SandboxImage string
	// Output receives containerd's log; nil discards it.
	Output io.Writer
}

// Containerd is a running containerd.
type Containerd struct {
	// Socket is its gRPC (CRI) socket.
	Socket string
	o      ContainerdOptions
	cmd    *exec.Cmd
	exited chan error
}

var configTemplate = template.Must(template.New("containerd").Parse(`version = 2
root = "{{.State}}/containerd/root"
state = "{{.State}}/containerd/state"
[grpc]
  address = "{{.Socket}}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{{.State}}/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{.SandboxImage}}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{{.Runc}}"
        Root = "{{.State}}/containerd/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{{.CNIDir}}"
    conf_dir = "{{.State}}/cni/net.d"
`))

// StartContainerd starts containerd in a mount namespace of its own, with
// tmpfs over /run, /var/lib and /var/log (the paths its shims and the
// kubelet hard-code), and waits until it answers.
func StartContainerd(ctx context.Context, o ContainerdOptions) (*Containerd, error) {
	c := &Containerd{Socket: filepath.Join(o.State, "containerd.sock"), o: o, exited: make(chan error, 1)}
	for _, d := range []string{"containerd", "cni/net.d"} {
		if err := os.MkdirAll(filepath.Join(o.State, d), 0o755); err != nil {
			return nil, err
		}
	}
	var cfg bytes.Buffer
	if err := configTemplate.Execute(&cfg, map[string]string{"State": o.State, "Socket": c.Socket, "SandboxImage": o.SandboxImage,
		"Runc": o.Packages.Bin("runc"), "CNIDir": o.Packages.CNIDir()}); err != nil {
		return nil, err
	}
	cfgFile := filepath.Join(o.State, "containerd.toml")
	if err := os.WriteFile(cfgFile, cfg.Bytes(), 0o644); err != nil {
		return nil, err
	}
	out := o.Output
	if out == nil {
		out = io.Discard
	}
	script := "mount -t tmpfs tmpfs /run && mount -t tmpfs tmpfs /var/lib && mount -t tmpfs tmpfs /var/log && exec \"$0\" --config \"$1\""
	c.cmd = exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script, o.Packages.Bin("containerd"), cfgFile)
	c.cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(o.Packages.Bin("containerd-shim-runc-v2"))+":"+filepath.Dir(o.Packages.Bin("runc"))+":"+os.Getenv("PATH"))
	c.cmd.Stdout, c.cmd.Stderr = out, out
	// Its own process group: a Ctrl-C of the test run reaches the provider,
	// which stops containerd in order, not containerd directly.
	// Killed with this process: a run that dies leaves the rest to the
	// next run's sweep, not a containerd.
	toolbin.DieWithParent(c.cmd, true)
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start containerd: %w", err)
	}
	go func() { c.exited <- c.cmd.Wait() }()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-c.exited:
			c.exited <- err
			return false, fmt.Errorf("containerd exited at start: %v", err)
		default:
		}
		_, err := c.Ctr(ctx, "version")
		return err == nil, nil
	})
	if err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("containerd did not come up: %w", err)
	}
	return c, nil
}

// Pid is containerd's process id: the kubelet joins its mount namespace.
func (c *Containerd) Pid() int { return c.cmd.Process.Pid }

// Ctr runs ctr in containerd's mount namespace, in the k8s.io namespace
// of containerd, and returns its output.
func (c *Containerd) Ctr(ctx context.Context, args ...string) ([]byte, error) {
	full := append([]string{"-t", strconv.Itoa(c.Pid()), "-m", c.o.Packages.Bin("ctr"), "-a", c.Socket, "-n", "k8s.io"}, args...)
	cmd := exec.CommandContext(ctx, "nsenter", full...)
	cmd.Env = c.cmd.Env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

// Import imports a docker-archive tarball (images.WriteTarball).
func (c *Containerd) Import(ctx context.Context, tarball string) error {
	_, err := c.Ctr(ctx, "images", "import", tarball)
	return err
}

// Stop kills every task containerd runs, stops containerd and its shims,
// and removes the cgroups runc made for them. It is safe to call twice.
func (c *Containerd) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := c.Ctr(ctx, "tasks", "ls", "-q"); err == nil {
		for _, id := range strings.Fields(string(out)) {
			_, _ = c.Ctr(ctx, "tasks", "kill", "-s", "SIGKILL", id)
			_, _ = c.Ctr(ctx, "tasks", "delete", "-f", id)
		}
	}
	if c.cmd.Process != nil {
		terminate(c.cmd.Process, c.exited)
		c.exited <- nil // a second Stop does not block
	}
	killShims(c.Socket)
	return removeCgroups("k8s.io")
}

// killShims kills the containerd shims serving socket: they outlive
// containerd by design.
func killShims(socket string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline") // the pattern is valid
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(b, []byte("containerd-shim")) || !bytes.Contains(b, []byte(socket)) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// cgroupRoots are the cgroups name of every hierarchy (cgroup v1's and
// the unified one runc also writes) that exist.
func cgroupRoots(name string) []string {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/" + name) // the pattern is valid
	if fileExists("/sys/fs/cgroup/" + name) {
		roots = append(roots, "/sys/fs/cgroup/"+name)
	}
	return roots
}

// removeCgroups removes the empty cgroup subtree name of every hierarchy
// (cgroup v1 and the unified one runc also writes), deepest first. A
// cgroup still in use stays, and is reported.
func removeCgroups(name string) error {
	var errs []error
	for _, root := range cgroupRoots(name) {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			// rmdir, never RemoveAll: cgroupfs files cannot be unlinked.
			if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}
