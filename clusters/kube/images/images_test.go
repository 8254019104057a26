package images_test

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gwdiag/gwdiag/clusters/kube/images"
)

// TestWriteTarball packs the pause binary as two images, reads them back as
// an importer would, and checks entrypoint, platform, the file itself and
// that packing again gives the same digests.
func TestWriteTarball(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "pause")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/pause")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build pause: %v\n%s", err, out)
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
