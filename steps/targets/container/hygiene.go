package container

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	kwait "k8s.io/apimachinery/pkg/util/wait"
)

// Labels on everything the target creates. The run label lets Stop find
// what its scenarios left; host and pid let a later run tell whether the
// run that made a container is still alive.
const (
	// LabelRun's value is the run's id.
	LabelRun = "org.gwdiag.conformance.run"
	// LabelHost's value is HostID() of the process that made the object.
	LabelHost = "org.gwdiag.conformance.host"
	// LabelPID's value is that process's id.
	LabelPID = "org.gwdiag.conformance.pid"

	labelRole = "org.gwdiag.conformance.role"
)

func newRunID() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// HostID names where this process's id means something: the host name
// and, on Linux, the pid namespace. Two runs sharing a Docker daemon from
// different pid namespaces (a CI job in a container beside a developer's
// shell, both with the same host name) must not judge each other's pids,
// so a run sweeps only leftovers of its own HostID.
func HostID() string {
	h, _ := os.Hostname()
	if ns, err := os.Readlink("/proc/self/ns/pid"); err == nil {
		h += " " + ns
	}
	return h
}

// hostConfigDirs begins the names of this HostID's NetworkHost configs
// folders in the temporary directory: "gwdiag-configs-", a digest of
// HostID and "-"; then the run's pid, "-" and a random part. A later run of
// the same HostID whose sweep finds the pid dead removes the folder, with
// the credentials its configs may hold.
func hostConfigDirs() string {
	sum := sha256.Sum256([]byte(HostID()))
	return "gwdiag-configs-" + hex.EncodeToString(sum[:4]) + "-"
}

// configDirPattern is os.MkdirTemp's pattern for this process's folder.
func configDirPattern() string { return hostConfigDirs() + strconv.Itoa(os.Getpid()) + "-" }

// sweepConfigDirs removes the configs folders of dead runs of this HostID.
func sweepConfigDirs() error {
	prefix := hostConfigDirs()
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*-*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range dirs {
		pidText, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), prefix), "-")
		if pid, err := strconv.Atoi(pidText); err == nil && !alive(pid) {
			errs = append(errs, os.RemoveAll(d))
		}
	}
	return errors.Join(errs...)
}

func runLabels(run, role string) map[string]string {
	return map[string]string{LabelRun: run, LabelHost: HostID(), LabelPID: strconv.Itoa(os.Getpid()), labelRole: role}
}

// settle is how long a run's Stop waits for its network to be free of
// endpoints its containers' removal leaves for a moment.
const settle = 3 * time.Second

// removeRun removes every container of the run, then its networks.
func removeRun(ctx context.Context, docker client.APIClient, run string) error {
	return removeLabelled(ctx, docker, client.Filters{}.Add("label", LabelRun+"="+run), func(map[string]string) bool { return true }, settle)
}

// sweepLeftovers removes what runs of this HostID left behind when they
// were killed before their Stop: containers and networks whose run's
// process no longer exists. It is housekeeping: what it cannot remove is
// reported, and never stops the run that found it, whose own objects have
// names and labels of their own.
func sweepLeftovers(ctx context.Context, docker client.APIClient) error {
	me := HostID()
	err := removeLabelled(ctx, docker, client.Filters{}.Add("label", LabelRun), func(l map[string]string) bool {
		if l[LabelHost] != me {
			return false
		}
		pid, err := strconv.Atoi(l[LabelPID])
		return err == nil && !alive(pid)
	}, 0)
	return errors.Join(err, sweepConfigDirs())
}

// alive reports whether a process of that id exists.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// removeLabelled removes the containers, then the networks, matching
// filters whose labels pass keep.
//
// A network the daemon still sees endpoints on, with no container attached,
// is tried again for up to settle: its run's own containers may still be
// going (a run's Stop), whereas a killed run's (the sweep) are long gone.
func removeLabelled(ctx context.Context, docker client.APIClient, filters client.Filters, keep func(map[string]string) bool, settle time.Duration) error {
	var errs []error
	cs, err := docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filters})
	if err != nil {
		return err
	}
	for _, c := range cs.Items {
		if !keep(c.Labels) {
			continue
		}
		_, err := docker.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.ID[:12], err))
		}
	}
	ns, err := docker.NetworkList(ctx, client.NetworkListOptions{Filters: filters})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, n := range ns.Items {
		if !keep(n.Labels) {
			continue
		}
		if err := removeNetwork(ctx, docker, n.ID, keep, settle); err != nil {
			errs = append(errs, fmt.Errorf("remove network %s: %w", n.Name, err))
		}
	}
	return errors.Join(errs...)
}

// removeNetwork removes a network. When the daemon refuses because
// endpoints are still attached, it force-disconnects those that are no
// longer a container, or a container whose labels pass keep (one created
// while the list was taken), and tries once more; a container of someone
// else's keeps the network, and the error says which.
func removeNetwork(ctx context.Context, docker client.APIClient, id string, keep func(map[string]string) bool, settle time.Duration) error {
	_, err := docker.NetworkRemove(ctx, id, client.NetworkRemoveOptions{})
	if err == nil || errdefs.IsNotFound(err) {
		return nil
	}
	n, ierr := docker.NetworkInspect(ctx, id, client.NetworkInspectOptions{})
	if ierr != nil {
		return errors.Join(err, ierr)
	}
	if len(n.Network.Containers) == 0 {
		// No container is attached, yet the daemon sees endpoints: a
		// container removal still finishing. Docker 20.10 can also leave an
		// endpoint behind for good when containers are removed while they
		// start; then only a daemon restart frees the network.
		werr := errors.New("not retried")
		if settle > 0 {
			werr = kwait.PollUntilContextTimeout(ctx, 100*time.Millisecond, settle, true, func(ctx context.Context) (bool, error) {
				_, err := docker.NetworkRemove(ctx, id, client.NetworkRemoveOptions{})
				return err == nil || errdefs.IsNotFound(err), nil
			})
		}
		if werr != nil {
			return fmt.Errorf("%w (no container is attached: the Docker daemon keeps a stale endpoint; restarting it frees the network)", err)
		}
		return nil
	}
	var others []string
	for cid, ep := range n.Network.Containers {
		c, cerr := docker.ContainerInspect(ctx, cid, client.ContainerInspectOptions{})
		switch {
		case cerr != nil && !errdefs.IsNotFound(cerr):
			return errors.Join(err, cerr)
		case cerr == nil && (c.Container.Config == nil || !keep(c.Container.Config.Labels)):
			others = append(others, ep.Name)
			continue
		case cerr == nil:
			if _, rerr := docker.ContainerRemove(ctx, cid, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); rerr != nil && !errdefs.IsNotFound(rerr) {
				return errors.Join(err, rerr)
			}
		}
		// A stale endpoint: its container is gone.
		if _, derr := docker.NetworkDisconnect(ctx, id, client.NetworkDisconnectOptions{Container: ep.Name, Force: true}); derr != nil && !errdefs.IsNotFound(derr) {
			return errors.Join(err, derr)
		}
	}
	if len(others) > 0 {
		return fmt.Errorf("containers not of the run are attached: %s", strings.Join(others, ", "))
	}
	if _, err := docker.NetworkRemove(ctx, id, client.NetworkRemoveOptions{}); err != nil && !errdefs.IsNotFound(err) {
		return err
	}
	return nil
}
