package ratelimitsvc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/clusters/toolbin"
)

// TestPinCopiesTheToolsModule: what an installed gwdiag builds from is
// byte for byte the tools module a checkout builds from (go generate
// ./steps/ratelimitsvc copies it).
func TestPinCopiesTheToolsModule(t *testing.T) {
	for name, embedded := range map[string][]byte{"go.mod": pinnedMod, "go.sum": pinnedSum} {
		b, err := os.ReadFile(filepath.Join("tools", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, embedded) {
			t.Errorf("the embedded copy of tools/%s differs from it: run go generate ./steps/ratelimitsvc", name)
		}
	}
}

// TestErrNoGoNamesThePinnedGo: the Go that ErrNoGo asks for is the go
// line of the pin.
func TestErrNoGoNamesThePinnedGo(t *testing.T) {
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(pinnedMod)
	if m == nil {
		t.Fatalf("no go line in the pin:\n%s", pinnedMod)
	}
	if want := "install Go " + string(m[1]) + "+ "; !strings.Contains(ErrNoGo.Error(), want) {
		t.Errorf("ErrNoGo = %q, want it to say %q (the pin's go line)", ErrNoGo, want)
	}
}

// noCheckout runs the test from a directory outside any checkout, with a
// cache of its own, no $GWDIAG_RATELIMIT_BIN and PATH holding only bin
// (made here, returned). It returns the pin's cache directory.
func noCheckout(t *testing.T) (root, bin string) {
	t.Chdir(t.TempDir())
	cache := t.TempDir()
	bin = t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv(EnvBin, "")
	t.Setenv("PATH", bin)
	return filepath.Join(cache, "gwdiag", "ratelimit-"+pinHash()), bin
}

// TestNoGoSaysWhatToInstall: with no checkout, no cached service and no
// go command, the error is ErrNoGo, one line saying what to install; the
// pin is in the cache already, for when go is there.
func TestNoGoSaysWhatToInstall(t *testing.T) {
	root, _ := noCheckout(t)
	var progress bytes.Buffer
	_, err := ensureBinary(context.Background(), nil, &progress)
	if !errors.Is(err, ErrNoGo) || !errors.Is(err, errEnvironment) {
		t.Fatalf("err = %v, want ErrNoGo, an ErrEnvironment", err)
	}
	if want := "the global rate-limit service is built with the Go toolchain: install Go 1.26+ or set $GWDIAG_RATELIMIT_BIN"; err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
	if progress.Len() > 0 {
		t.Errorf("progress says %q; nothing was built", progress.String())
	}
	if b, err := os.ReadFile(filepath.Join(root, "tools", "go.mod")); err != nil || !bytes.Equal(b, pinnedMod) {
		t.Errorf("the cache's go.mod: %v; want the pin", err)
	}
}

// TestCachedServiceNeedsNoGo: a service built into the cache before is
// used as it is, with no go command and no progress line; the pin is not
// written again (which would make it stale).
func TestCachedServiceNeedsNoGo(t *testing.T) {
	root, _ := noCheckout(t)
	if _, err := cacheRoot(); err != nil {
		t.Fatal(err)
	}
	then := time.Now().Add(-time.Minute)
	for _, f := range []string{"go.mod", "go.sum"} {
		if err := os.Chtimes(filepath.Join(root, "tools", f), then, then); err != nil {
			t.Fatal(err)
		}
	}
	want := filepath.Join(root, "ratelimit")
	if err := os.WriteFile(want, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	got, err := ensureBinary(context.Background(), nil, &progress)
	if err != nil || got != want {
		t.Fatalf("ensureBinary = %q, %v; want %q", got, err, want)
	}
	if progress.Len() > 0 {
		t.Errorf("progress says %q; nothing was built", progress.String())
	}
	if st, err := os.Stat(filepath.Join(root, "tools", "go.mod")); err != nil || st.ModTime().After(then) {
		t.Errorf("the cache's go.mod was written again (%v)", err)
	}
}

// TestBuildFailuresSayWhatToDo: a go command that cannot reach the module
// proxy, or is older than the pin, gives one line saying what to do, an
// errEnvironment; a compile error is not one. The build is announced on
// progress, once.
func TestBuildFailuresSayWhatToDo(t *testing.T) {
	tests := []struct {
		name, goSays string
		is           []error
		says         string
	}{
		{"no network", `go: github.com/envoyproxy/ratelimit@v1.4.1: Get "https://proxy.golang.org/github.com/envoyproxy/ratelimit/@v/v1.4.1.zip": dial tcp: lookup proxy.golang.org: no such host`,
			[]error{errEnvironment, toolbin.ErrNoNetwork}, "which the go command cannot reach (go: github.com/envoyproxy/ratelimit@v1.4.1: Get"},
		{"old go", "go: go.mod requires go >= 1.26.0 (running go 1.25.1; GOTOOLCHAIN=local)",
			[]error{errEnvironment, ErrNoGo}, ErrNoGo.Error() + " (go: go.mod requires go >= 1.26.0"},
		{"compile error", "../service_cmd/main.go:3:1: syntax error: non-declaration statement outside function body", nil, "syntax error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, bin := noCheckout(t)
			script := "#!/bin/sh\necho '" + tt.goSays + "' >&2\nexit 1\n"
			if err := os.WriteFile(filepath.Join(bin, "go"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			var progress bytes.Buffer
			_, err := ensureBinary(context.Background(), nil, &progress)
			if err == nil {
				t.Fatal("no error")
			}
			for _, target := range tt.is {
				if !errors.Is(err, target) {
					t.Errorf("err is not %v: %v", target, err)
				}
			}
			if tt.is == nil && errors.Is(err, errEnvironment) {
				t.Errorf("a compile error is an ErrEnvironment: %v", err)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Errorf("err = %q, want it to say %q", err, tt.says)
			}
			if tt.is != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("err is more than one line: %q", err)
			}
			if want := "building the global rate-limit service (github.com/envoyproxy/ratelimit/src/service_cmd) with the Go toolchain into " + root + "; the first time takes a minute or two\n"; progress.String() != want {
				t.Errorf("progress = %q, want %q", progress.String(), want)
			}
		})
	}
}

// TestErrNoRedisIsEnvironment: a missing redis-server is the machine's.
func TestErrNoRedisIsEnvironment(t *testing.T) {
	if err := error(ErrNoRedis); !errors.Is(err, errEnvironment) || errors.Is(err, ErrNoGo) {
		t.Errorf("ErrNoRedis: Is(errEnvironment) = %v, Is(ErrNoGo) = %v", errors.Is(err, errEnvironment), errors.Is(err, ErrNoGo))
	}
}
