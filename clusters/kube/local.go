package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gwdiag/gwdiag/clusters/crds"
)

// Local is a running etcd + kube-apiserver pair on loopback.
type Local struct {
	env *envtest.Environment
	dir string

	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// KubeconfigPath is a kubeconfig file for Config (for kubectl, the
	// e2e-framework and `--kubeconfig` flags); removed by Stop.
	KubeconfigPath string
}

// LocalOptions tune StartLocal; the zero value works.
type LocalOptions struct {
	// Binaries are kube-apiserver and etcd; zero means EnsureBinaries.
	Binaries Binaries
	// StartTimeout bounds the start of each process. Default 60s: a cold
	// etcd on a loaded 2-core machine takes a few seconds.
	StartTimeout time.Duration
	// ExtraCRDs are installed after the Gateway API and policy CRDs (for
	// example another implementation's policy CRD).
	ExtraCRDs []*apiextensionsv1.CustomResourceDefinition
	// Output, when set, receives the API server's and etcd's logs.
	Output *os.File
}

// StartLocal starts etcd and kube-apiserver, waits until the API server
// answers and the CRDs are established, and returns it. Stop releases it.
func StartLocal(ctx context.Context, o LocalOptions) (*Local, error) {
	bins := o.Binaries
	if bins.Dir == "" {
		var err error
		if bins, err = EnsureBinaries(ctx, nil); err != nil {
			return nil, err
		}
	}
	all, err := crds.All()
	if err != nil {
		return nil, err
	}
	all = append(all, o.ExtraCRDs...)
	if o.StartTimeout == 0 {
		o.StartTimeout = 60 * time.Second
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    bins.Dir,
		CRDs:                     all,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: o.StartTimeout,
		ControlPlaneStopTimeout:  20 * time.Second,
	}
	env.ControlPlane.GetAPIServer().Path = bins.APIServer()
	env.ControlPlane.Etcd = &envtest.Etcd{Path: bins.Etcd()}
	if o.Output != nil {
		env.AttachControlPlaneOutput = true
		env.ControlPlane.GetAPIServer().Out, env.ControlPlane.GetAPIServer().Err = o.Output, o.Output
		env.ControlPlane.Etcd.Out, env.ControlPlane.Etcd.Err = o.Output, o.Output
	}
	// envtest waits with its own timeouts; a caller's cancel still stops
	// a start that hangs.
	type result struct {
		cfg *rest.Config
		err error
	}
	done := make(chan result, 1)
	go func() {
		cfg, err := env.Start()
		done <- result{cfg, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		r = <-done // Start has its own timeouts; wait, then stop what started
		env.Stop()
		return nil, ctx.Err()
	}
	if r.err != nil {
		env.Stop()
		return nil, fmt.Errorf("start etcd + kube-apiserver from %s: %w", bins.Dir, r.err)
	}
	l := &Local{env: env, Config: r.cfg}
	if l.dir, err = os.MkdirTemp("", "gwdiag-kube-"); err != nil {
		l.Stop()
		return nil, err
	}
	l.KubeconfigPath = filepath.Join(l.dir, "kubeconfig")
	if err := os.WriteFile(l.KubeconfigPath, env.KubeConfig, 0o600); err != nil {
		l.Stop()
		return nil, err
	}
	return l, nil
}

// Stop stops kube-apiserver and etcd and removes their data and the
// kubeconfig. It is safe to call twice.
func (l *Local) Stop() error {
	if l == nil || l.env == nil {
		return nil
	}
	err := l.env.Stop()
	l.env = nil
	if l.dir != "" {
		err = errors.Join(err, os.RemoveAll(l.dir))
	}
	return err
}

// InstallCRDs creates or updates the Gateway API and policy CRDs on any
// cluster and waits until they are established.
func InstallCRDs(cfg *rest.Config) error {
	all, err := crds.All()
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: all}); err != nil {
		return fmt.Errorf("install Gateway API %s and policy CRDs: %w", crds.GatewayAPIVersion, err)
	}
	return nil
}
