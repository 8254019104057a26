package mock_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/steps/mock"
)

// TestRemoteControl: the out-of-process client of the control endpoints
// reads the count a real request made, and a release that the echo server
// does not serve is an error that says what answered.
func TestRemoteControl(t *testing.T) {
	s, err := mock.Listen("127.0.0.1:0", mock.NewEcho())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if n, err := mock.RemoteCount(ctx, s.Addr()); err != nil || n != 0 {
		t.Fatalf("count before any request: %d, %v; want 0", n, err)
	}
	resp, err := http.Get("http://" + s.Addr() + "/get")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n, err := mock.RemoteCount(ctx, s.Addr()); err != nil || n != 1 {
		t.Errorf("count after one request: %d, %v; want 1", n, err)
	}
	if err := mock.RemoteRelease(ctx, s.Addr(), "k"); err == nil || !strings.Contains(err.Error(), "POST /__release?key=k") {
		t.Errorf("release on an echo server: %v; want an error naming the request", err)
	}
	llm, err := mock.Listen("127.0.0.1:0", mock.NewLLM())
	if err != nil {
		t.Fatal(err)
	}
	defer llm.Close()
	if err := mock.RemoteRelease(ctx, llm.Addr(), "k"); err != nil {
		t.Errorf("release on the LLM: %v", err)
	}
}

// TestRemote: a target's mock backends answered through Remote: a count
// and a release by a backend's name, an unknown name's error as Control
// says it, and an endpoint's failure as Failed words it.
func TestRemote(t *testing.T) {
	echo, err := mock.Listen("127.0.0.1:0", mock.NewEcho())
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	llm, err := mock.Listen("127.0.0.1:0", mock.NewLLM())
	if err != nil {
		t.Fatal(err)
	}
	defer llm.Close()
	addrs := map[string]string{"echo": echo.Addr(), "llm": llm.Addr()}
	r := mock.Remote{
		Control: func(backend string) (string, error) {
			if a, ok := addrs[backend]; ok {
				return a, nil
			}
			return "", fmt.Errorf("no mock backend %q", backend)
		},
		Failed: func(backend, addr string, err error) error {
			return fmt.Errorf("mock backend %q at %s: %w", backend, addr, err)
		},
	}
	ctx := context.Background()
	resp, err := http.Get("http://" + echo.Addr() + "/get")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n, err := r.BackendRequests(ctx, "echo"); err != nil || n != 1 {
		t.Errorf("echo's count: %d, %v; want 1", n, err)
	}
	if err := r.ReleaseHeld(ctx, "llm", "k"); err != nil {
		t.Errorf("release on the LLM: %v", err)
	}
	if _, err := r.BackendRequests(ctx, "nope"); err == nil || err.Error() != `no mock backend "nope"` {
		t.Errorf("an unknown backend's count: %v; want Control's error", err)
	}
	if err := r.ReleaseHeld(ctx, "echo", "k"); err == nil || !strings.HasPrefix(err.Error(), `mock backend "echo" at `+echo.Addr()+": ") {
		t.Errorf("a release the echo server does not serve: %v; want Failed's error", err)
	}
}
