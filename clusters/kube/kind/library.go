package kind

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	kindcluster "sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	kindlog "sigs.k8s.io/kind/pkg/log"
)

// Library is Kind on sigs.k8s.io/kind's pkg/cluster, with the node
// provider kind's own CLI picks ($KIND_EXPERIMENTAL_PROVIDER, else the
// first of docker, nerdctl, podman found). kind's user-facing messages
// go to out.
func Library(out io.Writer) Kind {
	l := &logger{out: out}
	return &library{p: kindcluster.NewProvider(kindcluster.ProviderWithLogger(l), providerFromEnv(l))}
}

type library struct{ p *kindcluster.Provider }

func (k *library) List() ([]string, error) { return k.p.List() }

func (k *library) Create(name string, o CreateOptions) error {
	opts := []kindcluster.CreateOption{
		kindcluster.CreateWithWaitForReady(o.Wait),
		kindcluster.CreateWithKubeconfigPath(o.Kubeconfig),
		kindcluster.CreateWithDisplayUsage(false),
		kindcluster.CreateWithDisplaySalutation(false),
	}
	if o.Image != "" {
		opts = append(opts, kindcluster.CreateWithNodeImage(o.Image))
	}
	if o.Config != "" {
		opts = append(opts, kindcluster.CreateWithConfigFile(o.Config))
	}
	return k.p.Create(name, opts...)
}

func (k *library) KubeConfig(name string) (string, error) { return k.p.KubeConfig(name, false) }

// LoadImageArchive is what `kind load image-archive` does: the tarball
// into every internal node's containerd.
func (k *library) LoadImageArchive(name, tarball string) error {
	ns, err := k.p.ListInternalNodes(name)
	if err != nil {
		return err
	}
	if len(ns) == 0 {
		return fmt.Errorf("no nodes found for cluster %q", name)
	}
	var errs []error
	for _, n := range ns {
		errs = append(errs, loadInto(n, tarball))
	}
	return errors.Join(errs...)
}

func loadInto(n nodes.Node, tarball string) error {
	f, err := os.Open(tarball)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := nodeutils.LoadImageArchive(n, f); err != nil {
		return fmt.Errorf("node %s: %w", n.String(), err)
	}
	return nil
}

func (k *library) Delete(name, kubeconfig string) error { return k.p.Delete(name, kubeconfig) }

// providerFromEnv reads $KIND_EXPERIMENTAL_PROVIDER as kind's CLI does
// (its reader is internal to kind); nil lets kind detect one.
func providerFromEnv(l kindlog.Logger) kindcluster.ProviderOption {
	switch p := os.Getenv("KIND_EXPERIMENTAL_PROVIDER"); p {
	case "":
		return nil
	case "podman":
		return kindcluster.ProviderWithPodman()
	case "docker":
		return kindcluster.ProviderWithDocker()
	case "nerdctl", "finch", "nerdctl.lima":
		return kindcluster.ProviderWithNerdctl(p)
	default:
		l.Warnf("ignoring unknown value %q for KIND_EXPERIMENTAL_PROVIDER", p)
		return nil
	}
}

// logger writes kind's user-facing messages (level 0, warnings, errors)
// to out, one line each, prefixed "kind: ".
type logger struct{ out io.Writer }

func (l *logger) line(s string) {
	fmt.Fprintf(l.out, "kind: %s\n", strings.TrimSpace(s))
}

func (l *logger) Warn(m string)                        { l.line(m) }
func (l *logger) Warnf(f string, a ...any)             { l.line(fmt.Sprintf(f, a...)) }
func (l *logger) Error(m string)                       { l.line(m) }
func (l *logger) Errorf(f string, a ...any)            { l.line(fmt.Sprintf(f, a...)) }
func (l *logger) V(v kindlog.Level) kindlog.InfoLogger { return infoLogger{l, v == 0} }

type infoLogger struct {
	l  *logger
	on bool
}

func (i infoLogger) Info(m string) {
	if i.on {
		i.l.line(m)
	}
}

func (i infoLogger) Infof(f string, a ...any) {
	if i.on {
		i.l.line(fmt.Sprintf(f, a...))
	}
}

func (i infoLogger) Enabled() bool { return i.on }
