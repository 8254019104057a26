// Package kind starts a kind cluster (Kubernetes in Docker) with images
// packed from local binaries loaded into its node, for the cluster target
// (`--cluster kind`) and kubeenv.KindEnvFuncs: everything after creation is
// the same as on the local node of package node.
//
// It uses sigs.k8s.io/kind as a Go library (pkg/cluster), not the kind
// executable that e2e-framework's support/kind shells out to, because that
// is what serves users best: a user needs Docker (or Podman, nerdctl) and
// nothing else, no kind binary on $PATH nor a Go toolchain for
// e2e-framework's `go install` fallback; the kind version is the one pinned
// in go.mod, released with gwdiag; errors come back as Go values rather
// than parsed output, and no command line is split on spaces. The images
// go in the way `kind load image-archive` puts them (the same library
// function, nodeutils.LoadImageArchive, on every node). It imports nothing
// of the e2e-framework, so the gwdiag binary can link it.
//
// The library cannot be pointed at a fake executable, so what Start does
// with kind goes through a small seam, Kind, which tests replace; the
// default, Library, is the only code that calls sigs.k8s.io/kind.
package kind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gwdiag/gwdiag/clusters/kube/images"
)

// defaultName is the cluster's name when Options.Name is empty; its
// kubectl context is kind-gwdiag.
const defaultName = "gwdiag"

// defaultWait is how long Start waits for the control plane to be Ready
// after creating the cluster, when Options.Wait is zero.
const defaultWait = 5 * time.Minute

// Kind is what Start needs of kind; each method is one kind command.
// Library implements it with sigs.k8s.io/kind; tests fake it.
type Kind interface {
	// List names the existing clusters (kind get clusters).
	List() ([]string, error)
	// Create creates a cluster and waits for its control plane (kind create
	// cluster --name name [--image] [--config] --wait --kubeconfig).
	Create(name string, o CreateOptions) error
	// KubeConfig returns the cluster's kubeconfig, for reaching it from
	// this machine (kind get kubeconfig --name name).
	KubeConfig(name string) (string, error)
	// LoadImageArchive imports a docker-archive tarball into every node's
	// containerd (kind load image-archive tarball --name name).
	LoadImageArchive(name, tarball string) error
	// Delete deletes the cluster and its entry in kubeconfig (kind delete
	// cluster --name name --kubeconfig kubeconfig).
	Delete(name, kubeconfig string) error
}

// CreateOptions are the flags of kind create cluster that Start sets.
type CreateOptions struct {
	// Image is the node image (--image); empty: kind's default for its
	// version.
	Image string
	// Config is a kind configuration file (--config); empty: one node.
	Config string
	// Wait bounds the wait for the control plane to be Ready (--wait).
	Wait time.Duration
	// Kubeconfig is the file kind writes the cluster's kubeconfig to
	// (--kubeconfig): the run's own, so the user's ~/.kube/config is left
	// alone.
	Kubeconfig string
}

// Options configure Start.
type Options struct {
	// Name is the cluster's name. Default "gwdiag" (kubectl context
	// kind-gwdiag).
	Name string
	// Image is kind's node image (kindest/node:vX.Y.Z); empty: the default
	// of the kind version in go.mod.
	Image string
	// Config is a kind configuration file, e.g. with the registry mirrors
	// a node needs; empty: a single node.
	Config string
	// Wait bounds the wait for a new cluster's control plane. Default 5
	// minutes.
	Wait time.Duration
	// Keep leaves the cluster behind at Stop (and after a failed start),
	// for the next run or for kubectl. A cluster of Name that exists
	// already is used as it is and never deleted, with or without Keep.
	Keep bool
	// Images are packed into one tarball and loaded into the nodes; pods
	// name them with imagePullPolicy: Never.
	Images []images.Image
	// Output receives progress lines; nil discards them.
	Output io.Writer
	// Kind runs the kind commands; nil: Library(Output).
	Kind Kind
}

// Cluster is a started kind cluster.
type Cluster struct {
	// Name is the kind cluster's name.
	Name string
	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// KubeconfigPath is a kubeconfig file for Config; removed by Stop.
	KubeconfigPath string
	// Created tells whether Start created the cluster (rather than finding
	// it): only then may Stop delete it.
	Created bool
	// Took is how long the start took.
	Took time.Duration

	keep     bool
	kind     Kind
	dir      string
	stopOnce sync.Once
	stopErr  error
}

// Network is the Docker network kind puts its nodes on ("kind", or
// $KIND_EXPERIMENTAL_DOCKER_NETWORK as kind reads it). Its gateway is the
// address of this machine the pods reach.
func Network() string {
	if n := os.Getenv("KIND_EXPERIMENTAL_DOCKER_NETWORK"); n != "" {
		return n
	}
	return "kind"
}

// Start creates the cluster named o.Name (or uses the one of that name
// that exists), writes its kubeconfig to a file of the run, and loads
// o.Images into its nodes. On a failed start it deletes a cluster it
// created (unless o.Keep) and removes its files; otherwise Stop does.
// kind's own calls take no context: ctx is checked between them.
func Start(ctx context.Context, o Options) (c *Cluster, err error) {
	start := time.Now()
	if o.Name == "" {
		o.Name = defaultName
	}
	if o.Wait == 0 {
		o.Wait = defaultWait
	}
	out := o.Output
	if out == nil {
		out = io.Discard
	}
	k := o.Kind
	if k == nil {
		k = Library(out)
	}
	dir, err := os.MkdirTemp("", "gwdiag-kind-")
	if err != nil {
		return nil, err
	}
	c = &Cluster{Name: o.Name, KubeconfigPath: filepath.Join(dir, "kubeconfig"), keep: o.Keep, kind: k, dir: dir}
	defer func() {
		if err != nil {
			c.Stop()
			c = nil
		}
	}()

	// Pack first: a missing binary fails before minutes of cluster creation.
	var tarball string
	if len(o.Images) > 0 {
		tarball = filepath.Join(dir, "images.tar")
		if err := images.WriteTarball(tarball, o.Images...); err != nil {
			return c, fmt.Errorf("kind: pack the images: %w", err)
		}
	}
	existing, err := k.List()
	if err != nil {
		return c, fmt.Errorf("kind get clusters: %w", err)
	}
	if slices.Contains(existing, o.Name) {
		fmt.Fprintf(out, "kind: using the existing cluster %q (it is never deleted by gwdiag)\n", o.Name)
	} else {
		if err := ctx.Err(); err != nil {
			return c, err
		}
		fmt.Fprintf(out, "kind: creating cluster %q\n", o.Name)
		// Marked created before the call: kind removes the nodes of a
		// failed create itself, and a delete after that removes the rest.
		c.Created = true
		if err := k.Create(o.Name, CreateOptions{Image: o.Image, Config: o.Config, Wait: o.Wait, Kubeconfig: c.KubeconfigPath}); err != nil {
			return c, fmt.Errorf("kind create cluster --name %s: %w", o.Name, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return c, err
	}
	kc, err := k.KubeConfig(o.Name)
	if err != nil {
		return c, fmt.Errorf("kind get kubeconfig --name %s: %w", o.Name, err)
	}
	if err := os.WriteFile(c.KubeconfigPath, []byte(kc), 0o600); err != nil {
		return c, err
	}
	if c.Config, err = clientcmd.RESTConfigFromKubeConfig([]byte(kc)); err != nil {
		return c, fmt.Errorf("kind get kubeconfig --name %s: %w", o.Name, err)
	}
	if tarball != "" {
		if err := ctx.Err(); err != nil {
			return c, err
		}
		fmt.Fprintf(out, "kind: loading %d images into cluster %q\n", len(o.Images), o.Name)
		if err := k.LoadImageArchive(o.Name, tarball); err != nil {
			return c, fmt.Errorf("kind load image-archive --name %s: %w", o.Name, err)
		}
		// The tarball is in the node's containerd now; do not keep the
		// binaries' copy around for the whole run.
		os.Remove(tarball)
	}
	c.Took = time.Since(start)
	return c, nil
}

// Stop deletes the cluster if Start created it and Keep is not set, and
// removes the run's files. It may be called more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		if c.Created && !c.keep {
			if err := c.kind.Delete(c.Name, c.KubeconfigPath); err != nil {
				errs = append(errs, fmt.Errorf("kind delete cluster --name %s: %w", c.Name, err))
			}
		}
		if err := os.RemoveAll(c.dir); err != nil {
			errs = append(errs, err)
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}
