// Package containertest builds the images the container target's tests
// run: the reference proxy and the mock backends, each FROM scratch from a
// static binary built from this module. It is the one fixture of those
// tests.
package containertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gwdiag/gwdiag/clusters/toolbin"
	"github.com/gwdiag/gwdiag/steps/targets/container"
)

// Repositories of the test images. Their tags are digests of their
// content, so an unchanged image is built once and reused.
const (
	proxyRepo = "gwdiag/refproxy-test"
	mockRepo  = "gwdiag/mockbackend-test"
)

var (
	once               sync.Once
	proxy, mocks, skip string
	err                error
)

// Images returns the reference proxy's image (as make image builds it:
// admin open to the container's network, config at
// container.DefaultConfigPath) and the mock backends' image. It skips t
// when no Docker daemon answers, and fails it when an image cannot be
// built.
func Images(t testing.TB) (proxyImage, mockImage string) {
	t.Helper()
	once.Do(build)
	if skip != "" {
		t.Skip(skip)
	}
	if err != nil {
		t.Fatal(err)
	}
	return proxy, mocks
}

func build() {
	ctx := context.Background()
	p, perr := container.DockerProvider()
	if perr == nil {
		perr = p.Health(ctx)
		p.Close()
	}
	if perr != nil {
		skip = fmt.Sprintf("no Docker daemon answers, so the container target cannot run: %v", perr)
		return
	}
	dir, derr := os.MkdirTemp("", "gwdiag-images-")
	if derr != nil {
		err = derr
		return
	}
	defer os.RemoveAll(dir)
	for _, b := range []struct {
		pkg, repo string
		image     *string
		args      []string
	}{
		{"github.com/gwdiag/gwdiag/refproxy/cmd/refproxy", proxyRepo, &proxy, []string{"--admin-allow-remote", "-f", container.DefaultConfigPath}},
		{"github.com/gwdiag/gwdiag/steps/mock/cmd/mockbackend", mockRepo, &mocks, nil},
	} {
		bin := filepath.Join(dir, filepath.Base(b.pkg))
		if err = toolbin.BuildStatic(ctx, "", bin, b.pkg); err != nil {
			return
		}
		if *b.image, err = container.BuildScratchImage(ctx, b.repo, bin, b.args...); err != nil {
			return
		}
	}
}
