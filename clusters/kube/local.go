package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gwdiag/gwdiag/clusters/crds"
	"github.com/gwdiag/gwdiag/clusters/toolbin"
)

// Local is a running etcd + kube-apiserver pair on loopback.
type Local struct {
	env  *envtest.Environment
	dir  string
	logs []*os.File // etcd's and the API server's, in dir

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

// localAttempts bounds StartLocal's tries. Only a start whose etcd or
// API server found its port taken is tried again, on a new address.
const localAttempts = 3

// StartLocal starts etcd and kube-apiserver, waits until the API server
// answers and the CRDs are established, and returns it. Stop releases it.
//
// Both listen on an address of their own (LoopbackAddr) rather than on
// envtest's choice, ports of the kernel's ephemeral range on 127.0.0.1:
// there, on a busy machine, an outgoing connection took etcd's port
// between envtest's pick and etcd's bind, and envtest's five retries
// reused the port (make test, 2026-12-03). Their logs go to files beside
// the kubeconfig, and a failed start quotes their last lines.
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
	var tries []error
	for range localAttempts {
		l, err := startLocal(ctx, o, bins, all)
		if err == nil {
			return l, nil
		}
		tries = append(tries, err)
		if !errors.Is(err, errPortTaken) || ctx.Err() != nil {
			break
		}
	}
	if len(tries) == 1 {
		return nil, tries[0]
	}
	return nil, fmt.Errorf("%d tries: %w", len(tries), errors.Join(tries...))
}

// errPortTaken: etcd or the API server could not bind its port.
var errPortTaken = errors.New("a port was taken before it was bound")

func startLocal(ctx context.Context, o LocalOptions, bins Binaries, all []*apiextensionsv1.CustomResourceDefinition) (*Local, error) {
	dir, err := os.MkdirTemp("", "gwdiag-kube-")
	if err != nil {
		return nil, err
	}
	// The log files stay open while the processes run: with o.Output they
	// write through a pipe whose reader writes to the file.
	var logs []*os.File
	fail := func(err error) (*Local, error) {
		for _, f := range logs {
			f.Close()
		}
		os.RemoveAll(dir)
		return nil, err
	}
	host := LoopbackAddr()
	ports, err := FreePorts(host, 3)
	if err != nil {
		return fail(fmt.Errorf("ports for etcd and kube-apiserver on %s: %w", host, err))
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    bins.Dir,
		CRDs:                     all,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: o.StartTimeout,
		ControlPlaneStopTimeout:  20 * time.Second,
	}
	// etcd's data and the API server's certificates go in dir, which every
	// way out removes: left to envtest, each start it retries (up to five
	// a try, when etcd exits) makes a k8s_test_framework_* folder of its
	// own, and its Stop removes only the last.
	dataDir, certDir := filepath.Join(dir, "etcd"), filepath.Join(dir, "kube-apiserver")
	for _, d := range []string{dataDir, certDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return fail(err)
		}
	}
	api := env.ControlPlane.GetAPIServer()
	api.Path, api.CertDir = bins.APIServer(), certDir
	api.SecureServing.Address, api.SecureServing.Port = host, strconv.Itoa(ports[2])
	etcd := &envtest.Etcd{Path: bins.Etcd(), DataDir: dataDir, URL: &url.URL{Scheme: "http", Host: net.JoinHostPort(host, strconv.Itoa(ports[0]))}}
	etcd.Configure().Set("listen-peer-urls", (&url.URL{Scheme: "http", Host: net.JoinHostPort(host, strconv.Itoa(ports[1]))}).String())
	env.ControlPlane.Etcd = etcd
	procs := []struct {
		name     string
		out, err *io.Writer
	}{{"etcd", &etcd.Out, &etcd.Err}, {"kube-apiserver", &api.Out, &api.Err}}
	logPath := func(name string) string { return filepath.Join(dir, name+".log") }
	for _, p := range procs {
		f, err := os.Create(logPath(p.name))
		if err != nil {
			return fail(err)
		}
		logs = append(logs, f)
		var w io.Writer = f
		if o.Output != nil {
			w = io.MultiWriter(f, o.Output)
		}
		*p.out, *p.err = w, w
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
		return fail(ctx.Err())
	}
	if r.err != nil {
		env.Stop()
		err := fmt.Errorf("start etcd + kube-apiserver from %s on %s: %w", bins.Dir, host, r.err)
		for _, p := range procs {
			b, _ := os.ReadFile(logPath(p.name))
			tail := strings.TrimSpace(toolbin.LastLines(string(b), 20))
			if strings.Contains(tail, "address already in use") {
				err = fmt.Errorf("%w (%w)", err, errPortTaken)
			}
			if tail != "" {
				err = fmt.Errorf("%w\n%s's last lines:\n%s", err, p.name, tail)
			}
		}
		return fail(err)
	}
	l := &Local{env: env, dir: dir, logs: logs, Config: r.cfg}
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
	for _, f := range l.logs {
		f.Close()
	}
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
