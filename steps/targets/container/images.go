package container

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// ensureImage checks that image is present, pulling it when the policy
// allows. flag names the option the image came from, for errors.
func ensureImage(ctx context.Context, docker client.APIClient, image string, pull PullPolicy, flag string) error {
	_, err := docker.ImageInspect(ctx, image)
	if err == nil {
		return nil
	}
	if !errdefs.IsNotFound(err) {
		return fmt.Errorf("container target: inspect image %s: %w", image, err)
	}
	if pull == PullNever {
		return fmt.Errorf("container target: %s %s: no such image on the Docker host, and --pull never forbids pulling it (make image builds gwdiag/refproxy:dev; or allow --pull missing)", flag, image)
	}
	// One attempt, no retries: a registry that cannot be reached should
	// fail the run now, not after minutes of back-off.
	resp, err := docker.ImagePull(ctx, image, client.ImagePullOptions{})
	if err == nil {
		err = resp.Wait(ctx)
		resp.Close()
	}
	if err != nil {
		return fmt.Errorf("container target: %s %s is not on the Docker host and pulling it failed: %w", flag, image, err)
	}
	return nil
}

// MockBuild is a statically linked Linux executable that serves the mock
// backends when run with Args followed by mock.Command's flags. The target
// builds the mock image FROM scratch with it, once per executable (the
// image's tag is the executable's digest).
type MockBuild struct {
	// Binary is the executable's path.
	Binary string
	// Args come before the mock flags, e.g. ["mockbackend"] for gwdiag.
	Args []string
}

// mockRepo is the repository of the mock images the target builds.
const mockRepo = "gwdiag/conformance-mocks"

// buildMockImage builds (or finds, when already built) the mock image of b.
func buildMockImage(ctx context.Context, p *testcontainers.DockerProvider, b MockBuild) (string, error) {
	if b.Binary == "" {
		return "", errors.New("container target: no mock-backend image: give --mock-image, or run a gwdiag built with CGO_ENABLED=0, which builds one from itself")
	}
	image, err := buildScratch(ctx, p, mockRepo, b.Binary, b.Args)
	if err != nil {
		return "", fmt.Errorf("container target: the mock backends run in a container built FROM scratch from %s, but %w; give --mock-image, or build gwdiag with CGO_ENABLED=0 GOOS=linux", b.Binary, err)
	}
	return image, nil
}

// BuildScratchImage builds an image FROM scratch holding one statically
// linked executable, run with args, and returns its name: repo, tagged
// with a digest of the executable and the args. An image of that name
// already present is reused.
func BuildScratchImage(ctx context.Context, repo, binary string, args ...string) (string, error) {
	p, err := DockerProvider()
	if err != nil {
		return "", err
	}
	defer p.Close()
	return buildScratch(ctx, p, repo, binary, args)
}

func buildScratch(ctx context.Context, p *testcontainers.DockerProvider, repo, binary string, args []string) (string, error) {
	if err := CheckStatic(binary); err != nil {
		return "", err
	}
	bin, err := os.ReadFile(binary)
	if err != nil {
		return "", err
	}
	name := filepath.Base(binary)
	entrypoint, _ := json.Marshal(append([]string{"/" + name}, args...))
	dockerfile := "FROM scratch\nCOPY " + name + " /" + name + "\nENTRYPOINT " + string(entrypoint) + "\n"
	sum := sha256.New()
	sum.Write(bin)
	sum.Write([]byte(dockerfile))
	tag := hex.EncodeToString(sum.Sum(nil))[:16]
	image := repo + ":" + tag
	if _, err := p.Client().ImageInspect(ctx, image); err == nil {
		return image, nil
	}
	archive, err := buildContext(dockerfile, name, bin)
	if err != nil {
		return "", err
	}
	defer os.Remove(archive.Name())
	defer archive.Close()
	_, err = p.BuildImage(ctx, &testcontainers.ContainerRequest{FromDockerfile: testcontainers.FromDockerfile{
		ContextArchive: archive, Repo: repo, Tag: tag, KeepImage: true, BuildLogWriter: io.Discard,
	}})
	if err != nil {
		return "", fmt.Errorf("build image %s: %w", image, err)
	}
	pruneOlder(ctx, p.Client(), repo, image)
	return image, nil
}

// PruneGrace is how old an image of a repository must be before a newer
// build into it removes it. Another run on the same Docker host (another
// checkout, another gwdiag, a test beside) may have built it a moment ago
// and not yet started its containers: with no grace, a make test whose
// tests build two mock images at once lost one that way ("create
// container: ... registry-1.docker.io"), 2026-11-30.
var PruneGrace = 24 * time.Hour

// pruneOlder removes the other images of repo built more than PruneGrace
// ago, older builds of the same executable, so that rebuilding gwdiag does
// not pile up images on the Docker host. An image still in use stays.
func pruneOlder(ctx context.Context, docker client.APIClient, repo, keep string) {
	list, err := docker.ImageList(ctx, client.ImageListOptions{Filters: client.Filters{}.Add("reference", repo)})
	if err != nil {
		return
	}
	for _, img := range list.Items {
		if slices.Contains(img.RepoTags, keep) || time.Since(time.Unix(img.Created, 0)) < PruneGrace {
			continue
		}
		for _, tag := range img.RepoTags {
			_, _ = docker.ImageRemove(ctx, tag, client.ImageRemoveOptions{PruneChildren: true})
		}
	}
}

// buildContext writes a build context (a tar of the Dockerfile and the
// binary) to a temporary file.
func buildContext(dockerfile, name string, bin []byte) (*os.File, error) {
	f, err := os.CreateTemp("", "gwdiag-mock-context-*.tar")
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		mode int64
		body []byte
	}{{"Dockerfile", 0o644, []byte(dockerfile)}, {name, 0o755, bin}} {
		if err = tw.WriteHeader(&tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.body))}); err != nil {
			break
		}
		if _, err = tw.Write(e.body); err != nil {
			break
		}
	}
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("image build context: %w", err)
	}
	return f, nil
}

// CheckStatic tells why path cannot run in a FROM scratch Linux image: not
// an ELF executable, or linked against a dynamic loader.
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("it is not a Linux executable (this gwdiag is %s/%s): %v", runtime.GOOS, runtime.GOARCH, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("it is dynamically linked (built with cgo)")
		}
	}
	return nil
}

// publishAddrs is where published ports listen and where the suite dials
// them. When the daemon's end of the run's network (its bridge's gateway
// address) is an address of this machine, the daemon shares this network
// namespace: ports are published on loopback only and dialled there. Else
// (a remote daemon, or a socket mounted into a container) they are
// published on every address and dialled at the daemon's host as
// testcontainers finds it (TESTCONTAINERS_HOST_OVERRIDE sets it).
func publishAddrs(ctx context.Context, p *testcontainers.DockerProvider, nw *testcontainers.DockerNetwork) (bind netip.Addr, dial, gateway string, err error) {
	in, err := p.Client().NetworkInspect(ctx, nw.ID, client.NetworkInspectOptions{})
	if err != nil {
		return netip.Addr{}, "", "", err
	}
	if gw, ok := localGateway(in.Network.IPAM.Config); ok {
		return netip.MustParseAddr("127.0.0.1"), "127.0.0.1", gw, nil
	}
	host, err := p.DaemonHost(ctx)
	if err != nil {
		return netip.Addr{}, "", "", err
	}
	return netip.IPv4Unspecified(), host, "", nil
}
