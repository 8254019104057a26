// Package images packs static binaries into one-layer OCI images, written
// as a docker-archive tarball that `ctr images import`, `docker load` and
// `kind load image-archive` all take: the local node has no registry to
// pull the pause, refproxy and mock images from.
package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Image is one image to pack.
type Image struct {
	// Ref is its name, e.g. docker.io/gwdiag/refproxy:dev.
	Ref string
	// Files maps a path in the image (e.g. /refproxy) to the host file
	// copied there, executable.
	Files map[string]string
	// Entrypoint is the image's entrypoint.
	Entrypoint []string
}

// WriteTarball packs imgs into one tarball at file. The layers are
// reproducible: the same binaries give the same image digests.
func WriteTarball(file string, imgs ...Image) error {
	refs := map[name.Reference]v1.Image{}
	for _, img := range imgs {
		ref, err := name.ParseReference(img.Ref)
		if err != nil {
			return fmt.Errorf("image %q: %w", img.Ref, err)
		}
		i, err := build(img)
		if err != nil {
			return fmt.Errorf("image %s: %w", img.Ref, err)
		}
		refs[ref] = i
	}
	if err := tarball.MultiRefWriteToFile(file, refs); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	return nil
}

func build(img Image) (v1.Image, error) {
	layerTar, err := layer(img.Files)
	if err != nil {
		return nil, err
	}
	// The fastest gzip: the image goes from this machine to its own
	// containerd, where the default level's compression made the node's
	// start wait (about 2 s for refproxy and gwdiag) for no space saved
	// that counts.
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil },
		tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return nil, err
	}
	i, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return nil, err
	}
	cf, err := i.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH // the binaries are built for this machine
	cf.Config.Entrypoint = img.Entrypoint
	return mutate.ConfigFile(i, cf)
}

// layer is a tar of files, in path order, with fixed times and owners.
func layer(files map[string]string) ([]byte, error) {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		data, err := os.ReadFile(files[p])
		if err != nil {
			return nil, err
		}
		hdr := &tar.Header{Name: path.Clean("/" + p)[1:], Mode: 0o755, Size: int64(len(data)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
