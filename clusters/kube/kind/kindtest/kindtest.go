// Package kindtest fakes kind for tests of what starts a kind cluster:
// Fake records each call as the kind command line it stands for, so a
// test asserts the exact sequence a user's kind would have run.
package kindtest

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gwdiag/gwdiag/clusters/kube/kind"
)

// Kubeconfig is the kubeconfig Fake returns when Fake.Kubeconfig is empty:
// a cluster at https://127.0.0.1:41234 that nothing serves.
const Kubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: kind-gwdiag, cluster: {server: "https://127.0.0.1:41234"}}]
users: [{name: kind-gwdiag, user: {token: t}}]
contexts: [{name: kind-gwdiag, context: {cluster: kind-gwdiag, user: kind-gwdiag}}]
current-context: kind-gwdiag
`

// Fake implements kind.Kind.
type Fake struct {
	// Existing are the clusters kind get clusters lists.
	Existing []string
	// Fail makes the command of that name ("get clusters", "create
	// cluster", "get kubeconfig", "load image-archive", "delete cluster")
	// fail with the error.
	Fail map[string]error
	// Kubeconfig is what get kubeconfig prints; empty: the constant
	// Kubeconfig.
	Kubeconfig string

	mu     sync.Mutex
	calls  []string
	loaded []string
}

var _ kind.Kind = (*Fake)(nil)

// Calls are the commands run so far, e.g. "load image-archive
// /tmp/x/images.tar --name gwdiag".
func (f *Fake) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// Loaded are the image tags of the tarballs loaded so far, sorted.
func (f *Fake) Loaded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(slices.Values(f.loaded))
}

func (f *Fake) call(verb, line string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, line)
	return f.Fail[verb]
}

// List implements kind.Kind.
func (f *Fake) List() ([]string, error) {
	return f.Existing, f.call("get clusters", "get clusters")
}

// Create implements kind.Kind.
func (f *Fake) Create(name string, o kind.CreateOptions) error {
	line := "create cluster --name " + name
	if o.Image != "" {
		line += " --image " + o.Image
	}
	if o.Config != "" {
		line += " --config " + o.Config
	}
	return f.call("create cluster", fmt.Sprintf("%s --wait %s --kubeconfig %s", line, o.Wait, o.Kubeconfig))
}

// KubeConfig implements kind.Kind.
func (f *Fake) KubeConfig(name string) (string, error) {
	kc := f.Kubeconfig
	if kc == "" {
		kc = Kubeconfig
	}
	return kc, f.call("get kubeconfig", "get kubeconfig --name "+name)
}

// LoadImageArchive implements kind.Kind: the tarball must be a
// docker-archive, as kind's node would import it.
func (f *Fake) LoadImageArchive(name, file string) error {
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(file) })
	if err != nil {
		return fmt.Errorf("fake kind: %s is not a docker-archive tarball: %w", file, err)
	}
	f.mu.Lock()
	for _, d := range m {
		f.loaded = append(f.loaded, d.RepoTags...)
	}
	f.mu.Unlock()
	return f.call("load image-archive", "load image-archive "+file+" --name "+name)
}

// Delete implements kind.Kind.
func (f *Fake) Delete(name, kubeconfig string) error {
	return f.call("delete cluster", "delete cluster --name "+name+" --kubeconfig "+kubeconfig)
}
