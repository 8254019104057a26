package kube

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gwdiag/gwdiag/clusters/toolbin"
)

// Binaries are the control-plane programs a local API server needs.
type Binaries struct {
	// Dir holds kube-apiserver and etcd.
	Dir string
}

// APIServer is the path of kube-apiserver.
func (b Binaries) APIServer() string { return filepath.Join(b.Dir, "kube-apiserver") }

// Etcd is the path of etcd.
func (b Binaries) Etcd() string { return filepath.Join(b.Dir, "etcd") }

// ErrNoNetwork is returned (wrapped) when the binaries are missing and
// cannot be built because the Go module proxy is unreachable. Tests skip on
// it; everything else is a failure.
var ErrNoNetwork = toolbin.ErrNoNetwork

// envBinDir names a directory holding prebuilt kube-apiserver and etcd; when
// set, nothing is built. KUBEBUILDER_ASSETS (setup-envtest's variable) is
// honoured the same way.
const envBinDir = "GWDIAG_KUBE_BIN"

// toolsModule is the nested module, relative to the repository root, that
// pins k8s.io/kubernetes and etcd as tools, so the main module never
// requires k8s.io/kubernetes.
const toolsModule = "clusters/kube/tools"

// programs maps each binary to the package it is built from.
var programs = []toolbin.Program{
	{Name: "kube-apiserver", Pkg: "k8s.io/kubernetes/cmd/kube-apiserver"},
	{Name: "etcd", Pkg: "go.etcd.io/etcd/server/v3"},
}

// kubernetesVersion is the version of k8s.io/kubernetes the tools module
// pins; the node binaries are stamped with it (unstamped, they report
// v0.0.0-master, which version-skew checks reject).
const kubernetesVersion = "v1.36.3"

// stampVersion are the -ldflags that stamp kubernetesVersion.
var stampVersion = "-s -w -X k8s.io/component-base/version.gitVersion=" + kubernetesVersion +
	" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36"

// nodePrograms are the rest of a node: what the local-node cluster runs
// beside kube-apiserver and etcd. They take minutes to build cold, so only
// EnsureNodeBinaries builds them.
var nodePrograms = []toolbin.Program{
	{Name: "kubelet", Pkg: "k8s.io/kubernetes/cmd/kubelet", LDFlags: stampVersion},
	{Name: "kube-controller-manager", Pkg: "k8s.io/kubernetes/cmd/kube-controller-manager", LDFlags: stampVersion},
	{Name: "kube-scheduler", Pkg: "k8s.io/kubernetes/cmd/kube-scheduler", LDFlags: stampVersion},
}

// Kubelet is the path of the kubelet (EnsureNodeBinaries).
func (b Binaries) Kubelet() string { return filepath.Join(b.Dir, "kubelet") }

// ControllerManager is the path of kube-controller-manager.
func (b Binaries) ControllerManager() string { return filepath.Join(b.Dir, "kube-controller-manager") }

// Scheduler is the path of kube-scheduler.
func (b Binaries) Scheduler() string { return filepath.Join(b.Dir, "kube-scheduler") }

// EnsureNodeBinaries is EnsureBinaries for a whole node: kube-apiserver,
// etcd, kubelet, kube-controller-manager and kube-scheduler, built
// into <repo>/.bin, or all five from $GWDIAG_KUBE_BIN. A cold build takes about 12 minutes on 2 cores.
func EnsureNodeBinaries(ctx context.Context, log io.Writer) (Binaries, error) {
	// $KUBEBUILDER_ASSETS has no kubelet: a node's binaries all come
	// from $GWDIAG_KUBE_BIN or the repository's .bin.
	if b, ok, err := prebuilt([]string{envBinDir}, func(b Binaries) []string {
		return []string{b.APIServer(), b.Etcd(), b.Kubelet(), b.ControllerManager(), b.Scheduler()}
	}); ok {
		return b, err
	}
	root, err := RepoRoot()
	if err != nil {
		return Binaries{}, err
	}
	b, err := build(ctx, root, filepath.Join(root, ".bin"), log)
	if err != nil {
		return b, err
	}
	return b, toolbin.Build(ctx, root, toolsModule, b.Dir, nodePrograms, log, toolbin.StaticEnv)
}

// EnsureBinaries returns kube-apiserver and etcd: from $GWDIAG_KUBE_BIN or
// $KUBEBUILDER_ASSETS when set, otherwise from <repo>/.bin, building them
// there from the nested tools module when they are missing or older than
// its go.mod/go.sum. Building is idempotent: a cold build takes minutes
// (the whole of kube-apiserver), a warm one seconds (Go's build cache), and
// up-to-date binaries are not rebuilt at all. log receives the go command's
// output; nil discards it.
func EnsureBinaries(ctx context.Context, log io.Writer) (Binaries, error) {
	if b, ok, err := prebuilt([]string{envBinDir, "KUBEBUILDER_ASSETS"}, func(b Binaries) []string {
		return []string{b.APIServer(), b.Etcd()}
	}); ok {
		return b, err
	}
	root, err := RepoRoot()
	if err != nil {
		return Binaries{}, err
	}
	return build(ctx, root, filepath.Join(root, ".bin"), log)
}

// prebuilt returns the binaries in the directory the first set variable
// of envs names, with an error naming it when one of want is not there;
// ok is false when none is set.
func prebuilt(envs []string, want func(Binaries) []string) (b Binaries, ok bool, err error) {
	for _, env := range envs {
		dir := os.Getenv(env)
		if dir == "" {
			continue
		}
		b = Binaries{Dir: dir}
		for _, p := range want(b) {
			if _, err := os.Stat(p); err != nil {
				return b, true, fmt.Errorf("$%s=%s: %w", env, dir, err)
			}
		}
		return b, true, nil
	}
	return b, false, nil
}

// build builds kube-apiserver and etcd into dir from the tools module of
// the repository at root, skipping a binary newer than the module's
// go.mod and go.sum (toolbin.Build). All five programs are built
// statically (toolbin.StaticEnv), as Kubernetes' own releases are: one
// configuration, so the packages they share (most of what the three node
// programs import) compile once for all of them (docs/ci.md).
func build(ctx context.Context, root, dir string, log io.Writer) (Binaries, error) {
	return Binaries{Dir: dir}, toolbin.Build(ctx, root, toolsModule, dir, programs, log, toolbin.StaticEnv)
}

// RepoRoot finds the gwdiag repository root from the working directory
// upwards.
func RepoRoot() (string, error) {
	root, err := toolbin.RepoRoot(toolsModule)
	if err != nil {
		return "", fmt.Errorf("%w; set $%s to a directory holding kube-apiserver and etcd", err, envBinDir)
	}
	return root, nil
}
