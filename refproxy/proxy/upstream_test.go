package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingServer is a backend that counts the connections it accepted.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	s := httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s, &conns
}

func newUpstream(s *httptest.Server) *upstream {
	return &upstream{addr: strings.TrimPrefix(s.URL, "http://"), dialer: &net.Dialer{}, fallback: http.DefaultTransport, maxIdle: 4}
}

func roundTrip(t *testing.T, u *upstream, method, path, body string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = io.NopCloser(strings.NewReader(body)) // unknown length: sent chunked
	}
	req, _ := http.NewRequest(method, "http://"+u.addr+path, rd)
	resp, err := u.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s %s body: %v", method, path, err)
	}
	return resp, string(b)
}

func TestUpstreamReusesConnections(t *testing.T) {
	s, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write([]byte(r.Method + " " + r.URL.Path + " " + string(b)))
	})
	u := newUpstream(s)
	tests := []struct{ method, path, body, want string }{
		{"GET", "/a", "", "GET /a "},
		{"POST", "/b", "hello", "POST /b hello"},
		{"HEAD", "/c", "", ""},
		{"GET", "/d", "", "GET /d "},
	}
	for _, tt := range tests {
		resp, got := roundTrip(t, u, tt.method, tt.path, tt.body)
		if resp.StatusCode != 200 || got != tt.want {
			t.Errorf("%s %s: %d %q, want 200 %q", tt.method, tt.path, resp.StatusCode, got, tt.want)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("backend saw %d connections for 4 sequential requests, want 1", n)
	}
}

func TestUpstreamRetriesStalePooledConnection(t *testing.T) {
	s, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	u := newUpstream(s)
	roundTrip(t, u, "GET", "/", "")
	// The backend drops its idle keep-alive connections, as servers do after
	// their idle timeout; the pooled one is now dead.
	s.CloseClientConnections()
	if _, got := roundTrip(t, u, "GET", "/", ""); got != "ok" {
		t.Errorf("after the backend closed the pooled connection: %q, want ok", got)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("connections %d, want 2 (the retry dials afresh)", n)
	}
}

func TestUpstreamDoesNotReuseClosedOrAbandoned(t *testing.T) {
	s, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		if r.URL.Path == "/big" {
			w.Write([]byte(strings.Repeat("x", 1<<20)))
			return
		}
		w.Write([]byte("ok"))
	})
	u := newUpstream(s)
	roundTrip(t, u, "GET", "/close", "")
	// A body closed before its end leaves the connection unusable.
	req, _ := http.NewRequest("GET", "http://"+u.addr+"/big", nil)
	resp, err := u.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Read(make([]byte, 10))
	resp.Body.Close()
	roundTrip(t, u, "GET", "/ok", "")
	if n := conns.Load(); n != 3 {
		t.Errorf("connections %d, want 3 (none reused after Connection: close or an abandoned body)", n)
	}
}

func TestUpstreamCancelUnblocks(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{})
	s, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	u := newUpstream(s)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+u.addr+"/hang", nil)
	errc := make(chan error, 1)
	go func() {
		_, err := u.RoundTrip(req)
		errc <- err
	}()
	<-started // the request is out; RoundTrip waits for the response
	cancel()
	select {
	case err := <-errc:
		if err != context.Canceled {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RoundTrip still blocked after its context was cancelled")
	}
}
