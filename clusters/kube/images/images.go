// Package images packs static binaries into one-layer OCI images, written
// as a docker-archive tarball that `ctr images import`, `docker load` and
// `kind load image-archive` all take: the local node has no registry to
// pull the pause, refproxy and mock images from.
package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
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

// compressionLevel is the layers' gzip level (a variable for the
// benchmark).
var compressionLevel = gzip.NoCompression

func build(img Image) (v1.Image, error) {
	layerTar, err := layer(img.Files)
	if err != nil {
		return nil, err
	}
	// No compression (gzip's stored blocks): the image goes from this
	// machine to its own containerd, where compressing saved no space
	// that counts and cost the node's start the most of its packing. The
	// tests pack in race-detector binaries, where compress/flate runs
	// about ten times slower: BestSpeed took 1m17s of a node start for
	// gwdiag and refproxy on a fresh machine (2026-12-03);
	// BenchmarkWriteTarball measures the two side by side.
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil },
		tarball.WithCompressionLevel(compressionLevel))
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

// keepCached is how many packed tarballs CachedTarball keeps: the images
// of the current build and a few before it.
const keepCached = 4

// CachedTarball is WriteTarball through a cache in dir: the same images
// (the same refs, entrypoints, paths and file contents) are packed once
// and linked (or copied) to file after that. Packing the refproxy, mock
// and pause images took a local node's start 12 to 60 s, every start,
// for bytes that did not change. The cache keeps the keepCached most
// recently used tarballs. It reports whether file came from the cache; a
// cache that cannot be used falls back to packing.
func CachedTarball(dir, file string, imgs ...Image) (hit bool, err error) {
	key, err := cacheKey(imgs)
	if err != nil {
		return false, err
	}
	cached := filepath.Join(dir, key+".tar")
	if linkOrCopy(cached, file) == nil {
		now := time.Now()
		_ = os.Chtimes(cached, now, now) // recently used: kept by the eviction
		return true, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, WriteTarball(file, imgs...)
	}
	tmp, err := os.CreateTemp(dir, key+".*.tmp")
	if err != nil {
		return false, WriteTarball(file, imgs...)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	_ = os.Chmod(tmp.Name(), 0o644) // as WriteTarball's own file
	if err := WriteTarball(tmp.Name(), imgs...); err != nil {
		return false, err
	}
	if err := os.Rename(tmp.Name(), cached); err != nil {
		return false, WriteTarball(file, imgs...)
	}
	evict(dir, keepCached)
	if err := linkOrCopy(cached, file); err != nil {
		return false, WriteTarball(file, imgs...)
	}
	return false, nil
}

// cacheKey is a digest of everything an image tarball is made of.
func cacheKey(imgs []Image) (string, error) {
	sorted := slices.Clone(imgs)
	slices.SortFunc(sorted, func(a, b Image) int { return strings.Compare(a.Ref, b.Ref) })
	h := sha256.New()
	fmt.Fprintf(h, "gwdiag images v2 %s\n", runtime.GOARCH)
	for _, img := range sorted {
		fmt.Fprintf(h, "image %q %q\n", img.Ref, img.Entrypoint)
		for _, p := range slices.Sorted(maps.Keys(img.Files)) {
			f, err := os.Open(img.Files[p])
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "file %q ", p)
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return "", err
			}
			fmt.Fprintln(h)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// linkOrCopy makes dst the file src is (a hard link), or a copy of it
// across file systems.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(dst)
		return err
	}
	return out.Close()
}

// evict removes all but the keep most recently used tarballs of dir.
func evict(dir string, keep int) {
	es, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type used struct {
		name string
		at   time.Time
	}
	var all []used
	for _, e := range es {
		if !strings.HasSuffix(e.Name(), ".tar") {
			continue
		}
		if info, err := e.Info(); err == nil {
			all = append(all, used{e.Name(), info.ModTime()})
		}
	}
	slices.SortFunc(all, func(a, b used) int { return b.at.Compare(a.at) })
	for _, u := range all[min(keep, len(all)):] {
		os.Remove(filepath.Join(dir, u.name))
	}
}
