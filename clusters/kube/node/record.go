package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// statePrefix names the state directories of local nodes under the
// temporary directory; recordFile in each says what its run changed on
// the machine, so that a run killed before its Stop is cleaned up by the
// next one.
const (
	statePrefix = "gwdiag-localnode-"
	recordFile  = "record.json"
)

// kernelTunables are the sysctls the kubelet sets at start
// (setupKernelTunables); Stop puts them back.
var kernelTunables = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// record is what one run changed on the machine: written before each
// change, so that a killed run leaves enough to undo it.
type record struct {
	file string
	// mu orders the writes of containerd's start and the control plane's,
	// which run at the same time.
	mu sync.Mutex

	Bridge string `json:"bridge"`
	// ForwardRule is the iptables rule (without -I/-D) that lets pods
	// reach each other across the bridge.
	ForwardRule []string          `json:"forwardRule,omitempty"`
	CgroupRoot  string            `json:"cgroupRoot"`
	Sysctls     map[string]string `json:"sysctls,omitempty"`
	Procs       []recordedProc    `json:"procs,omitempty"`
}

// recordedProc identifies a process by pid and start time, so that a
// recycled pid is never killed.
type recordedProc struct {
	Name  string `json:"name"`
	Pid   int    `json:"pid"`
	Start string `json:"start"`
}

func (r *record) update() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.write()
}

func (r *record) write() error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp := r.file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, r.file)
}

func (r *record) addProc(name string, pid int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Procs = append(r.Procs, recordedProc{Name: name, Pid: pid, Start: startTime(pid)})
	return r.write()
}

func (r *record) saveSysctls() error {
	r.Sysctls = map[string]string{}
	for _, k := range kernelTunables {
		if b, err := os.ReadFile("/proc/sys/" + k); err == nil {
			r.Sysctls[k] = strings.TrimSpace(string(b))
		}
	}
	return r.update()
}

// release undoes what the record names: it kills recorded processes that
// still run (and the shims of its containerd), removes the bridge and the
// cgroups, and puts the sysctls back.
func (r *record) release() error {
	var errs []error
	for _, p := range r.Procs {
		if p.Start != "" && startTime(p.Pid) == p.Start {
			_ = syscall.Kill(p.Pid, syscall.SIGKILL)
		}
	}
	killShims(filepath.Join(filepath.Dir(r.file), "containerd.sock"))
	if r.Bridge != "" {
		if _, err := os.Stat("/sys/class/net/" + r.Bridge); err == nil {
			if out, err := exec.Command("ip", "link", "del", r.Bridge).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("remove bridge %s: %v: %s", r.Bridge, err, out))
			}
		}
	}
	if len(r.ForwardRule) > 0 {
		args := append([]string{"-w", "-D"}, r.ForwardRule...)
		// A rule already gone (never inserted, or a second release) is fine.
		if out, err := exec.Command("iptables", args...).CombinedOutput(); err != nil && !strings.Contains(string(out), "does a matching rule exist") && !strings.Contains(string(out), "Bad rule") {
			errs = append(errs, fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, out))
		}
	}
	if r.CgroupRoot != "" {
		// A pod's processes outlive their shim when a run was killed with
		// its containerd (the shims found above are gone already): they
		// are still in the node's own cgroups.
		killCgroupProcs(r.CgroupRoot)
		errs = append(errs, removeCgroupsWait(r.CgroupRoot))
	}
	errs = append(errs, removeCgroupsWait("k8s.io"))
	for k, v := range r.Sysctls {
		if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore sysctl %s=%s: %w", k, v, err))
		}
	}
	return errors.Join(errs...)
}

// killCgroupProcs kills every process in the cgroup subtree name of
// every hierarchy: name is a node's own (its state directory's), so
// whatever is there is the node's.
func killCgroupProcs(name string) {
	for _, root := range cgroupRoots(name) {
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
	}
}

// removeCgroupsWait removes a cgroup subtree, waiting a little for the
// processes of killed containers to leave it.
func removeCgroupsWait(name string) error {
	var err error
	_ = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		err = removeCgroups(name)
		return err == nil, nil
	})
	return err
}

// startTime is field 22 of /proc/pid/stat, or "" when pid does not run.
func startTime(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) may hold spaces; fields count from its end.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s)
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// LockMachine takes the machine-wide lock of local nodes: one runs at a
// time (the sysctls are global, and two would not fit 2 cores anyway).
// It is released by the returned func or when this process dies.
func LockMachine(ctx context.Context) (func(), error) {
	path := filepath.Join(os.TempDir(), "gwdiag-localnode.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	err = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(context.Context) (bool, error) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		return err == nil, nil
	})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("local node: another local node runs on this machine (%s is locked): %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// sweep undoes what killed runs left. It runs with the machine lock held,
// so every state directory it finds belongs to a run that is gone.
func sweep() error {
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), statePrefix+"*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, dir := range dirs {
		r := &record{file: filepath.Join(dir, recordFile)}
		if b, err := os.ReadFile(r.file); err == nil {
			if err := json.Unmarshal(b, r); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", r.file, err))
				continue
			}
			if err := r.release(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", dir, err))
				continue
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// makeCgroupRoot creates /name in every cgroup v1 hierarchy, with cpuset's
// cpus and mems copied from the root (an empty cpuset takes no process).
func makeCgroupRoot(name string) error {
	roots, err := filepath.Glob("/sys/fs/cgroup/*")
	if err != nil {
		return err
	}
	for _, root := range roots {
		if st, err := os.Lstat(root); err != nil || !st.IsDir() {
			continue // symlinks such as cpu -> cpu,cpuacct
		}
		dir := filepath.Join(root, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		if filepath.Base(root) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(root, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("cgroup %s/%s: %w", dir, f, err)
				}
			}
		}
	}
	return nil
}
