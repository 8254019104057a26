package images_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gwdiag/gwdiag/clusters/kube/images"
	"github.com/gwdiag/gwdiag/clusters/toolbin"
)

// TestWriteTarball packs the pause binary as two images, reads them back as
// an importer would, and checks entrypoint, platform, the file itself and
// that packing again gives the same digests.
func TestWriteTarball(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "pause")
	if err := toolbin.BuildStatic(context.Background(), "", bin, "../cmd/pause"); err != nil {
		t.Fatal(err)
	}
	imgs := []images.Image{
		{Ref: "gwdiag.local/pause:dev", Files: map[string]string{"/pause": bin}, Entrypoint: []string{"/pause"}},
		{Ref: "gwdiag.local/other:dev", Files: map[string]string{"/bin/other": bin}, Entrypoint: []string{"/bin/other", "-x"}},
	}
	file := filepath.Join(dir, "images.tar")
	if err := images.WriteTarball(file, imgs...); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	digests := map[string]string{}
	for _, img := range imgs {
		tag, err := name.NewTag(img.Ref)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tarball.ImageFromPath(file, &tag)
		if err != nil {
			t.Fatalf("%s: %v", img.Ref, err)
		}
		cf, err := got.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cf.Config.Entrypoint, img.Entrypoint) || cf.OS != "linux" || cf.Architecture == "" {
			t.Errorf("%s: entrypoint %v, platform %s/%s; want %v on linux", img.Ref, cf.Config.Entrypoint, cf.OS, cf.Architecture, img.Entrypoint)
		}
		layers, err := got.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%s: %d layers, %v; want 1", img.Ref, len(layers), err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		hdr, err := tr.Next()
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		rc.Close()
		var path string
		for p := range img.Files {
			path = p[1:]
		}
		if hdr.Name != path || hdr.Mode&0o111 == 0 || !bytes.Equal(data, want) {
			t.Errorf("%s: layer holds %s mode %o (%d bytes); want %s, executable, the binary", img.Ref, hdr.Name, hdr.Mode, len(data), path)
		}
		d, err := got.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests[img.Ref] = d.String()
	}
	again := filepath.Join(dir, "again.tar")
	if err := images.WriteTarball(again, imgs[0]); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(imgs[0].Ref)
	img, err := tarball.ImageFromPath(again, &tag)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := img.Digest(); d.String() != digests[imgs[0].Ref] {
		t.Errorf("packing again gave digest %s, first %s; want the same", d, digests[imgs[0].Ref])
	}
}

// TestCachedTarball: the same images are packed once and come from the
// cache after that, byte for byte what packing writes; a changed file, a
// changed entrypoint or another ref is packed anew; the cache keeps the
// most recently used few.
func TestCachedTarball(t *testing.T) {
	dir, cache := t.TempDir(), t.TempDir()
	bin := filepath.Join(dir, "prog")
	if err := os.WriteFile(bin, bytes.Repeat([]byte("binary "), 1000), 0o755); err != nil {
		t.Fatal(err)
	}
	img := images.Image{Ref: "gwdiag.local/prog:dev", Files: map[string]string{"/prog": bin}, Entrypoint: []string{"/prog"}}
	pack := func(name string, imgs ...images.Image) (bool, []byte) {
		t.Helper()
		file := filepath.Join(dir, name)
		hit, err := images.CachedTarball(cache, file, imgs...)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return hit, b
	}
	hit, first := pack("1.tar", img)
	if hit {
		t.Fatal("the first pack came from an empty cache")
	}
	plain := filepath.Join(dir, "plain.tar")
	if err := images.WriteTarball(plain, img); err != nil {
		t.Fatal(err)
	}
	if want, _ := os.ReadFile(plain); !bytes.Equal(first, want) {
		t.Error("the cached pack differs from WriteTarball's")
	}
	if hit, again := pack("2.tar", img); !hit || !bytes.Equal(again, first) {
		t.Errorf("second pack: hit %v, same bytes %v; want the cache's", hit, bytes.Equal(again, first))
	}
	// Removing what the node imported leaves the cache whole.
	if err := os.Remove(filepath.Join(dir, "2.tar")); err != nil {
		t.Fatal(err)
	}
	if hit, _ := pack("3.tar", img); !hit {
		t.Error("the cache lost the tarball when a copy of it was removed")
	}
	changed := img
	changed.Entrypoint = []string{"/prog", "-v"}
	if hit, _ := pack("4.tar", changed); hit {
		t.Error("a changed entrypoint came from the cache")
	}
	other := img
	other.Ref = "gwdiag.local/other:dev"
	if hit, _ := pack("5.tar", other); hit {
		t.Error("another ref came from the cache")
	}
	if err := os.WriteFile(bin, bytes.Repeat([]byte("changed "), 1000), 0o755); err != nil {
		t.Fatal(err)
	}
	if hit, _ := pack("6.tar", img); hit {
		t.Error("a changed file came from the cache")
	}
	for i := range 4 {
		e := img
		e.Entrypoint = []string{"/prog", strconv.Itoa(i)}
		pack("e"+strconv.Itoa(i)+".tar", e)
	}
	if tars, _ := filepath.Glob(filepath.Join(cache, "*.tar")); len(tars) != 4 {
		t.Errorf("the cache holds %d tarballs, want the 4 most recently used", len(tars))
	}
}

// BenchmarkWriteTarball packs the benchmark's own binary as an image's
// one file, at the level the local node uses (none) and at gzip's
// fastest, which it used before. Run it with -race too: the tests that
// start a local node pack their images in race-detector binaries.
func BenchmarkWriteTarball(b *testing.B) {
	for _, level := range []struct {
		name  string
		level int
	}{{"none", gzip.NoCompression}, {"best-speed", gzip.BestSpeed}} {
		b.Run(level.name, func(b *testing.B) {
			defer func(l int) { *images.CompressionLevel = l }(*images.CompressionLevel)
			*images.CompressionLevel = level.level
			imgs := []images.Image{{Ref: "gwdiag.local/bench:dev", Files: map[string]string{"/bench": os.Args[0]}, Entrypoint: []string{"/bench"}}}
			fi, err := os.Stat(os.Args[0])
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(fi.Size())
			file := filepath.Join(b.TempDir(), "images.tar")
			for b.Loop() {
				if err := images.WriteTarball(file, imgs...); err != nil {
					b.Fatal(err)
				}
			}
			st, err := os.Stat(file)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(st.Size()), "tarball-bytes")
		})
	}
}
