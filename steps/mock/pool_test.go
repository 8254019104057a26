package mock_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/steps/mock"
)

// TestPool: servers made through the pool's control API serve on ports of
// their own with counters of their own, are controlled through the pool's
// address (a held stream released there), and are gone once removed.
func TestPool(t *testing.T) {
	pool := mock.NewPool("127.0.0.1")
	defer pool.Close()
	ps, err := mock.Listen("127.0.0.1:0", pool)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	ctx := t.Context()
	echo1, err := mock.PoolAdd(ctx, ps.Addr(), "echo")
	if err != nil {
		t.Fatal(err)
	}
	echo2, err := mock.PoolAdd(ctx, ps.Addr(), "echo")
	if err != nil {
		t.Fatal(err)
	}
	llm, err := mock.PoolAdd(ctx, ps.Addr(), "llm")
	if err != nil {
		t.Fatal(err)
	}
	if echo1 == echo2 || echo1 == llm || echo2 == llm {
		t.Fatalf("ports %d, %d, %d; want three servers on ports of their own", echo1, echo2, llm)
	}
	get(t, echo1, "/anything")
	get(t, echo1, "/headers")
	get(t, echo2, "/anything")
	for port, want := range map[int]int64{echo1: 2, echo2: 1, llm: 0} {
		if n, err := mock.RemoteCount(ctx, mock.PoolControl(ps.Addr(), port)); err != nil || n != want {
			t.Errorf("count of the server on %d through the pool: %d, %v; want %d", port, n, err, want)
		}
	}

	// A stream held by the LLM is released through the pool.
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	held, cancel := context.WithTimeout(ctx, 30*time.Second) // a release that does not work fails, not hangs
	defer cancel()
	req, _ := http.NewRequestWithContext(held, http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", llm), strings.NewReader(body))
	req.Header.Set(mock.HeaderHold, "k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if _, err := rd.ReadString('\n'); err != nil {
		t.Fatalf("first chunk of the held stream: %v", err)
	}
	if err := mock.RemoteRelease(ctx, mock.PoolControl(ps.Addr(), llm), "k"); err != nil {
		t.Fatalf("release through the pool: %v", err)
	}
	rest, err := io.ReadAll(rd)
	if err != nil || !strings.Contains(string(rest), "data: [DONE]") {
		t.Errorf("the held stream after the release: %q, %v; want it to end with data: [DONE]", rest, err)
	}

	// Only control endpoints are reached through the pool.
	if _, err := mock.RemoteCount(ctx, ps.Addr()+"/__pool/"+strconv.Itoa(echo1)+"/x"); err == nil {
		t.Error("GET /__pool/N/x/__count: no error; want 404 (not a control endpoint)")
	}
	if err := mock.PoolRemove(ctx, ps.Addr(), echo1); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(echo1), time.Second); err == nil {
		c.Close()
		t.Errorf("the removed server on %d still accepts connections", echo1)
	}
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"remove twice", mock.PoolRemove(ctx, ps.Addr(), echo1), fmt.Sprintf("no mock server on port %d", echo1)},
		{"count of a removed server", errOf(mock.RemoteCount(ctx, mock.PoolControl(ps.Addr(), echo1))), fmt.Sprintf("no mock server on port %d", echo1)},
		{"unknown kind", errOf(mock.PoolAdd(ctx, ps.Addr(), "grpc")), `unknown mock kind "grpc"`},
	} {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("%s: %v; want an error containing %q", tt.name, tt.err, tt.want)
		}
	}
	for _, port := range []int{echo2, llm} {
		if _, err := mock.RemoteCount(ctx, mock.PoolControl(ps.Addr(), port)); err != nil {
			t.Errorf("the server on %d after another was removed: %v", port, err)
		}
	}
}

// TestPoolBound: a pool holds at most MaxPoolServers servers, and makes
// more once some are removed.
func TestPoolBound(t *testing.T) {
	pool := mock.NewPool("127.0.0.1")
	defer pool.Close()
	var last int
	for range mock.MaxPoolServers {
		p, err := pool.Add("echo")
		if err != nil {
			t.Fatal(err)
		}
		last = p
	}
	if _, err := pool.Add("echo"); err == nil || !strings.Contains(err.Error(), "its most") {
		t.Fatalf("server %d: %v; want an error at the bound", mock.MaxPoolServers+1, err)
	}
	if err := pool.Remove(last); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Add("llm"); err != nil {
		t.Errorf("after a removal: %v", err)
	}
}

func errOf[T any](_ T, err error) error { return err }

func get(t *testing.T, port int, path string) {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s on %d: %s", path, port, resp.Status)
	}
}
