package mock_test

import (
	"context"
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
