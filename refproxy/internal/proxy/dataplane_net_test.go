package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/refproxy/config"
	"github.com/gwdiag/gwdiag/refproxy/config/configtest"
)

// These tests run the real Dataplane on loopback in front of real backends
// (net/http servers, or raw TCP listeners where a backend must misbehave)
// and talk to it over TCP, as clients do.

// netTestTimeout bounds every client connection, so that a proxy that
// hangs fails the test instead of the whole run. No test waits for it.
const netTestTimeout = 30 * time.Second

// startNetProxy runs a Dataplane with one bind whose only route sends
// everything to backendAddr, and returns the bind's address.
func startNetProxy(t *testing.T, backendAddr string) string {
	t.Helper()
	_, addr := startNetDataplane(t, backendAddr)
	return addr
}

// startNetDataplane is startNetProxy that also returns the Dataplane.
func startNetDataplane(t *testing.T, backendAddr string) (*Dataplane, string) {
	t.Helper()
	return startNetDataplaneWith(t, backendAddr, Options{})
}

// startNetDataplaneWith is startNetDataplane with options (the logger is
// always discarded).
func startNetDataplaneWith(t *testing.T, backendAddr string, opts Options) (*Dataplane, string) {
	t.Helper()
	cfg, err := config.Parse("net.yaml", []byte(configtest.OneRoute(backendAddr)))
	if err != nil {
		t.Fatal(err)
	}
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	dp := New(opts)
	if err := dp.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// t.Context is already canceled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), netTestTimeout)
		defer cancel()
		if err := dp.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	addrs := dp.Addrs()
	if len(addrs) != 1 {
		t.Fatalf("proxy listens on %v, want one address", addrs)
	}
	return dp, addrs[0]
}

// startHTTPBackend is a net/http backend; its address is host:port.
func startHTTPBackend(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.Listener.Addr().String()
}

// startRawBackend is a backend on a bare TCP listener: it reads each
// request with net/http and lets serve write whatever bytes it likes on the
// connection; the connection is closed when serve returns false.
func startRawBackend(t *testing.T, serve func(r *http.Request, c net.Conn) (keep bool)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		conns  = map[net.Conn]struct{}{}
		closed bool
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				mu.Unlock()
				c.Close()
				return
			}
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Go(func() {
				defer func() {
					c.Close()
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
				}()
				br := bufio.NewReader(c)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if _, err := io.Copy(io.Discard, r.Body); err != nil {
						return
					}
					if !serve(r, c) {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		closed = true
		for c := range conns {
			c.Close() // connections the proxy keeps in its pool
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// rawOK answers 200 "ok" and keeps the connection.
func rawOK(c net.Conn) bool {
	_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")
	return err == nil
}

// netClient is one client connection to the proxy, sending requests as
// raw bytes and reading responses with net/http.
type netClient struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialProxy(t *testing.T, addr string) *netClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(netTestTimeout)); err != nil {
		t.Fatal(err)
	}
	return &netClient{t: t, c: c, br: bufio.NewReader(c)}
}

// send writes a request head (request line and headers, without the final
// empty line) with Host added, then body.
func (nc *netClient) send(head string, body []byte) {
	nc.t.Helper()
	msg := append([]byte(head+"\r\nHost: gw.example\r\n\r\n"), body...)
	if _, err := nc.c.Write(msg); err != nil {
		nc.t.Fatal(err)
	}
}

// read reads one response to a request of the given method, and its body.
// A response whose head cannot be read returns a nil response; a body that
// cannot be read to its end returns the bytes read and the error.
func (nc *netClient) read(method string) (*http.Response, []byte, error) {
	resp, err := http.ReadResponse(nc.br, &http.Request{Method: method})
	if err != nil {
		return nil, nil, err
	}
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// get sends a GET on this connection and fails the test unless the
// response is complete.
func (nc *netClient) get(path string) (*http.Response, []byte) {
	nc.t.Helper()
	nc.send("GET "+path+" HTTP/1.1", nil)
	resp, body, err := nc.read(http.MethodGet)
	if err != nil {
		nc.t.Fatalf("GET %s: %v", path, err)
	}
	return resp, body
}

// expectServing checks that the proxy still answers a normal request, on a
// new connection.
func expectServing(t *testing.T, proxyAddr string) {
	t.Helper()
	resp, body := dialProxy(t, proxyAddr).get("/ok")
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Fatalf("after that, GET /ok = %d %q, want 200 \"ok\"", resp.StatusCode, body)
	}
}

// payload is n deterministic pseudo-random bytes.
func netPayload(n int, seed byte) []byte {
	b := make([]byte, n)
	var s [32]byte
	s[0] = seed
	rand.NewChaCha8(s).Read(b)
	return b
}

func netSum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func TestUpgradeTunnel(t *testing.T) {
	backend := startHTTPBackend(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Upgrade") {
		case "echo":
			if !strings.EqualFold(r.Header.Get("Connection"), "upgrade") {
				http.Error(w, "Connection: "+r.Header.Get("Connection"), http.StatusBadRequest)
				return
			}
			conn, brw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n"); err != nil {
				return
			}
			_, _ = io.Copy(conn, brw.Reader) // until the proxy closes
		case "refuse":
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("X-Refused", "yes")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, "no upgrade to refuse, sorry\n")
		default:
			http.Error(w, "not an upgrade", http.StatusTeapot)
		}
	})
	proxy := startNetProxy(t, backend)

	t.Run("switched", func(t *testing.T) {
		nc := dialProxy(t, proxy)
		nc.send("GET /ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: echo", nil)
		resp, err := http.ReadResponse(nc.br, &http.Request{Method: http.MethodGet})
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("status %d (%q), want 101", resp.StatusCode, b)
		}
		if got := resp.Header.Get("Upgrade"); got != "echo" {
			t.Errorf("Upgrade: %q, want echo", got)
		}
		if !containsToken([][]byte{[]byte(strings.Join(resp.Header.Values("Connection"), ","))}, "upgrade") {
			t.Errorf("Connection: %q, want upgrade", resp.Header.Values("Connection"))
		}

		// Bytes pass both ways: a short message, then a large one written
		// while the echo is read.
		if _, err := io.WriteString(nc.c, "ping"); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 4)
		if _, err := io.ReadFull(nc.br, got); err != nil {
			t.Fatalf("reading the echo: %v", err)
		}
		if string(got) != "ping" {
			t.Fatalf("echo %q, want \"ping\"", got)
		}
		big := netPayload(256<<10, 1)
		werr := make(chan error, 1)
		go func() {
			_, err := nc.c.Write(big)
			werr <- err
		}()
		got = make([]byte, len(big))
		if _, err := io.ReadFull(nc.br, got); err != nil {
			t.Fatalf("reading the large echo: %v", err)
		}
		if err := <-werr; err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, big) {
			t.Fatal("the large echo differs from what was sent")
		}
	})

	t.Run("refused", func(t *testing.T) {
		nc := dialProxy(t, proxy)
		nc.send("GET /ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: refuse", nil)
		resp, body, err := nc.read(http.MethodGet)
		if err != nil {
			t.Fatalf("reading the refusal: %v (body so far %q)", err, body)
		}
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("status %d, want 400", resp.StatusCode)
		}
		if got := string(body); got != "no upgrade to refuse, sorry\n" {
			t.Errorf("body %q, want the backend's", got)
		}
		if got := resp.Header.Get("X-Refused"); got != "yes" {
			t.Errorf("X-Refused: %q, want the backend's header", got)
		}
		if got := resp.Header.Get("Upgrade"); got != "" {
			t.Errorf("Upgrade: %q on a refused upgrade", got)
		}
	})
}

func TestHeadKeepsContentLength(t *testing.T) {
	backend := startHTTPBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", "11")
		if r.Method != http.MethodHead {
			io.WriteString(w, "hello world")
		}
	})
	nc := dialProxy(t, startNetProxy(t, backend))

	nc.send("HEAD /h HTTP/1.1", nil)
	resp, body, err := nc.read(http.MethodHead)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD status %d, want 200", resp.StatusCode)
	}
	if got := resp.Header.Get("Content-Length"); got != "11" {
		t.Errorf("HEAD Content-Length: %q, want 11", got)
	}
	if len(resp.TransferEncoding) != 0 {
		t.Errorf("HEAD Transfer-Encoding: %q, want none", resp.TransferEncoding)
	}
	if len(body) != 0 {
		t.Errorf("HEAD body %q, want none", body)
	}
	if resp.Close {
		t.Fatal("the proxy closes the connection after a HEAD")
	}

	// The same connection carries the next request: no body bytes of the
	// HEAD response were left on it.
	resp, body = nc.get("/h")
	if resp.StatusCode != http.StatusOK || string(body) != "hello world" {
		t.Errorf("GET after HEAD = %d %q, want 200 \"hello world\"", resp.StatusCode, body)
	}
}

func TestLargeBodies(t *testing.T) {
	const size = 1 << 20
	data := netPayload(size, 2)
	want := netSum(data)
	backend := startHTTPBackend(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/known":
			w.Header().Set("Content-Length", strconv.Itoa(size))
			w.Write(data)
		case "/chunked":
			// A flush before the end forces a chunked response.
			w.Write(data[:1000])
			w.(http.Flusher).Flush()
			w.Write(data[1000:])
		case "/upload":
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			fmt.Fprintf(w, "%d %s", len(b), netSum(b))
		}
	})
	proxy := startNetProxy(t, backend)
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: netTestTimeout}

	for _, path := range []string{"/known", "/chunked"} {
		t.Run("response "+path, func(t *testing.T) {
			resp, err := client.Get("http://" + proxy + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("reading the body: %v after %d bytes", err, len(b))
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if path == "/known" && resp.ContentLength != size {
				t.Errorf("Content-Length %d, want %d", resp.ContentLength, size)
			}
			if len(b) != size || netSum(b) != want {
				t.Errorf("got %d bytes (sha256 %s), want the %d bytes sent (sha256 %s)", len(b), netSum(b), size, want)
			}
		})
	}

	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("request chunked=%v", chunked), func(t *testing.T) {
			var body io.Reader = bytes.NewReader(data)
			if chunked {
				body = io.MultiReader(body) // no known length
			}
			req, err := http.NewRequest(http.MethodPost, "http://"+proxy+"/upload", body)
			if err != nil {
				t.Fatal(err)
			}
			if chunked {
				req.ContentLength = -1
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %q", resp.StatusCode, b)
			}
			if w := fmt.Sprintf("%d %s", size, want); string(b) != w {
				t.Errorf("the backend received %q (length and sha256), want %q", b, w)
			}
		})
	}
}

func TestTruncatedBackendBody(t *testing.T) {
	backend := startRawBackend(t, func(r *http.Request, c net.Conn) bool {
		var n, sent int
		switch r.URL.Path {
		case "/small": // read whole before answering
			n, sent = 100, 10
		case "/large": // the case: 1000 of 100000 bytes
			n, sent = 100000, 1000
		case "/late": // cut after more than the proxy reads ahead
			n, sent = 100000, 40000
		default:
			return rawOK(c)
		}
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", n)
		c.Write(netPayload(sent, 1))
		return false
	})
	dp, proxy := startNetDataplane(t, backend)

	for _, tc := range []struct {
		path string
		n    int
		// early: the cut is found before anything went to the client, who
		// gets a 502 and a trace whose backendCallResult carries the error;
		// otherwise the client's connection is aborted mid-body and the
		// trace's requestFinished carries it.
		early bool
	}{{"/small", 100, true}, {"/large", 100000, true}, {"/late", 100000, false}} {
		t.Run(tc.path, func(t *testing.T) {
			wt := dp.reg.Watch(nil)
			defer wt.Cancel()
			nc := dialProxy(t, proxy)
			nc.send("GET "+tc.path+" HTTP/1.1", nil)
			resp, body, err := nc.read(http.MethodGet)
			switch {
			case tc.early && (err != nil || resp.StatusCode != http.StatusBadGateway):
				t.Errorf("got %v %v, want a 502 before any byte of the body", resp, err)
			case !tc.early && (err == nil || len(body) >= tc.n):
				t.Errorf("got %v with %d bytes and error %v, want the body aborted", resp, len(body), err)
			}
			var events []trace.Event
			for {
				evs, _, final := drainEvents(t, wt)
				events = append(events, evs...)
				if final != nil {
					events = append(events, *final)
					break
				}
				select {
				case <-wt.Notify():
				case <-time.After(netTestTimeout):
					t.Fatal("the trace never finished")
				}
			}
			var result, finished *trace.Event
			var finalCode any
			for i, e := range events {
				switch e.Type() {
				case trace.BackendCallResult:
					result = &events[i]
				case trace.RequestFinished:
					finished = &events[i]
				case trace.ResponseSnapshot:
					if e.Stage() == trace.StageFinalResponse {
						finalCode = e.Message["requestState"].(map[string]any)["response"].(map[string]any)["code"]
					}
				}
			}
			if result == nil || finished == nil {
				t.Fatalf("trace lacks backendCallResult or requestFinished: %v", events)
			}
			if tc.early {
				if msg, _ := result.Message["error"].(string); !strings.Contains(msg, "body cut short") || result.Severity != trace.SeverityError {
					t.Errorf("backendCallResult %v (%s), want the error and severity error", result.Message, result.Severity)
				}
				if finalCode != float64(http.StatusBadGateway) {
					t.Errorf("final response code %v, want 502, what the client received", finalCode)
				}
			} else if msg, _ := finished.Message["error"].(string); !strings.Contains(msg, "body cut short") || finished.Severity != trace.SeverityError {
				t.Errorf("requestFinished %v (%s), want the error and severity error", finished.Message, finished.Severity)
			}
			expectServing(t, proxy)
		})
	}
	// Every cut body counts against the backend's health.
	if n, health, _ := dp.backends[backend+"|"+backend].stats.Snapshot(); n < 3 || health > float64(n-3)/float64(n) {
		t.Errorf("backend stats: %d requests, health %.2f, want the 3 cut bodies counted as failures", n, health)
	}
}

func TestBackendConnectionsReused(t *testing.T) {
	large := netPayload(32<<10, 3)
	var accepted atomic.Int64
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/small":
			io.WriteString(w, "ok")
		case "/large": // streamed through the proxy: longer than it reads at once
			w.Header().Set("Content-Length", strconv.Itoa(len(large)))
			w.Write(large)
		case "/chunked":
			io.WriteString(w, "o")
			w.(http.Flusher).Flush()
			io.WriteString(w, "k")
		}
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			accepted.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)

	for _, tc := range []struct {
		path string
		want []byte
	}{{"/small", []byte("ok")}, {"/large", large}, {"/chunked", []byte("ok")}} {
		t.Run(tc.path, func(t *testing.T) {
			// A proxy of its own, so that its pool starts empty.
			proxy := startNetProxy(t, s.Listener.Addr().String())
			before := accepted.Load()
			nc := dialProxy(t, proxy)
			for i := range 50 {
				resp, body := nc.get(tc.path)
				if resp.StatusCode != http.StatusOK || !bytes.Equal(body, tc.want) {
					t.Fatalf("request %d: status %d, %d bytes, want 200 and the backend's %d bytes", i, resp.StatusCode, len(body), len(tc.want))
				}
				if resp.Close {
					t.Fatalf("request %d: the proxy closes the client connection", i)
				}
			}
			if n := accepted.Load() - before; n != 1 {
				t.Errorf("50 sequential requests opened %d backend connections, want 1", n)
			}
		})
	}
}

func TestMalformedBackendResponse(t *testing.T) {
	backend := startRawBackend(t, func(r *http.Request, c net.Conn) bool {
		switch r.URL.Path {
		case "/bad-status":
			io.WriteString(c, "HTTP/1.1 abc\r\n\r\n")
		case "/not-http":
			io.WriteString(c, "not http at all")
		case "/garbage":
			io.WriteString(c, "SECRET "+strings.Repeat("garbage ", 320))
		default:
			return rawOK(c)
		}
		return false
	})
	proxy := startNetProxy(t, backend)

	for _, path := range []string{"/bad-status", "/not-http", "/garbage"} {
		t.Run(path, func(t *testing.T) {
			resp, body := dialProxy(t, proxy).get(path)
			// 502: the backend answered, wrongly. The client hears what
			// failed, never the backend's bytes.
			if resp.StatusCode != http.StatusBadGateway || len(body) > 300 ||
				bytes.Contains(body, []byte("not http")) || bytes.Contains(body, []byte("SECRET")) || bytes.Contains(body, []byte("garbage")) {
				t.Errorf("status %d, body %q, want 502 saying what failed, in its own words", resp.StatusCode, body)
			}
			expectServing(t, proxy)
		})
	}
}

// TestBackendClosesIdleConnections: many servers (Python's, Node's) close a
// keep-alive connection after a short idle time. A request must never be
// sent on such a connection and fail for it: every POST after the backend
// closed the pooled connection succeeds, reaches the backend exactly once,
// and its trace shows the discarded connection and the new attempt.
func TestBackendClosesIdleConnections(t *testing.T) {
	var received atomic.Int64
	closed := make(chan struct{}, 64)
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		received.Add(1)
		io.WriteString(w, "got "+string(b))
	}))
	s.Config.IdleTimeout = 20 * time.Millisecond
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			closed <- struct{}{}
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	dp, proxy := startNetDataplane(t, s.Listener.Addr().String())
	nc := dialProxy(t, proxy)
	const rounds = 4
	for i := range rounds {
		body := fmt.Sprintf(`{"n":%d}`, i)
		wt := dp.reg.Watch(nil)
		nc.send(fmt.Sprintf("POST /v1/chat HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: %d", len(body)), []byte(body))
		resp, got, err := nc.read(http.MethodPost)
		if err != nil || resp.StatusCode != http.StatusOK || string(got) != "got "+body {
			t.Fatalf("round %d: %v %v %q, want 200 %q", i, resp, err, got, "got "+body)
		}
		events, _, final := drainEvents(t, wt)
		wt.Cancel()
		if final == nil {
			t.Fatalf("round %d: the trace did not finish", i)
		}
		var results []string
		for _, e := range events {
			if e.Type() == trace.BackendCallResult {
				results = append(results, fmt.Sprintf("%v/%v", e.Message["status"], e.Message["error"]))
			}
		}
		want := 1
		if i > 0 {
			want = 2 // the pooled connection, closed by the backend, then a new one
		}
		if len(results) != want || !strings.HasPrefix(results[len(results)-1], "200/") ||
			(want == 2 && !strings.Contains(results[0], "closed the idle connection")) {
			t.Errorf("round %d: backendCallResults %q, want %d ending in 200 (the first naming the closed idle connection)", i, results, want)
		}
		// Wait until the backend has closed the idle connection.
		select {
		case <-closed:
		case <-time.After(netTestTimeout):
			t.Fatalf("round %d: the backend never closed its idle connection", i)
		}
	}
	if n := received.Load(); n != rounds {
		t.Errorf("the backend received %d requests, want %d: each exactly once", n, rounds)
	}
}

// TestHeaderTimeout: a client that sends nothing, or half its headers, is cut
// off once the header timeout passes (it used to hold its connection for
// minutes); a body that arrives slowly after a prompt head is not; and while
// many such clients hang, a normal client is served at once.
func TestHeaderTimeout(t *testing.T) {
	const headerTimeout = 300 * time.Millisecond
	backend := startHTTPBackend(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, "got "+string(b))
	})
	_, proxy := startNetDataplaneWith(t, backend, Options{Timeouts: Timeouts{Header: headerTimeout}})

	// cutOff waits for the proxy to end a connection stalled since start:
	// it may say 408 first; it must not answer anything else.
	cutOff := func(t *testing.T, c net.Conn, start time.Time, sent string) {
		t.Helper()
		if _, err := io.WriteString(c, sent); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(netTestTimeout))
		got, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("after sending %q: %v, want the proxy to close the connection", sent, err)
		}
		if len(got) > 0 && !bytes.HasPrefix(got, []byte("HTTP/1.1 408")) {
			t.Errorf("after sending %q: got %q, want nothing or a 408", sent, got)
		}
		if took := time.Since(start); took < headerTimeout {
			t.Errorf("after sending %q: closed after %s, before the header timeout %s", sent, took, headerTimeout)
		}
	}
	// Slowloris connections open while a normal client is served.
	var stalled []net.Conn
	stalledAt := time.Now()
	for range 50 {
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n")
		stalled = append(stalled, c)
	}
	nc := dialProxy(t, proxy)
	if resp, body := nc.get("/fast"); resp.StatusCode != 200 || string(body) != "got " {
		t.Errorf("a normal client among 50 stalled ones: %d %q, want 200", resp.StatusCode, body)
	}
	for _, tc := range []struct{ name, sent string }{
		{"nothing", ""},
		{"half the headers", "GET /x HTTP/1.1\r\nHost: x\r\nX-Slow: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The clock starts before the dial: on loopback the proxy can
			// accept (and start its timer) before Dial returns here.
			start := time.Now()
			c, err := net.Dial("tcp", proxy)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			cutOff(t, c, start, tc.sent)
		})
	}
	t.Run("stalled keep-alive connections", func(t *testing.T) {
		for _, c := range stalled {
			cutOff(t, c, stalledAt, "")
		}
	})
	t.Run("slow body after a prompt head", func(t *testing.T) {
		nc := dialProxy(t, proxy)
		body := "abcdef"
		nc.send("POST /upload HTTP/1.1\r\nContent-Length: "+strconv.Itoa(len(body)), nil)
		for i := range len(body) {
			// The client's pace is the point of the test: the body takes
			// twice the header timeout to arrive.
			time.Sleep(2 * headerTimeout / time.Duration(len(body)))
			if _, err := nc.c.Write([]byte{body[i]}); err != nil {
				t.Fatal(err)
			}
		}
		resp, got, err := nc.read(http.MethodPost)
		if err != nil || resp.StatusCode != 200 || string(got) != "got "+body {
			t.Errorf("slow body: %v %v %q, want 200 %q", resp, err, got, "got "+body)
		}
	})
}

// TestMalformedChunkedRequestBody: a client whose chunked body is malformed
// gets 400, the proxy keeps serving, and the backend's health does not pay
// for the client's fault (it used to get 503 and lower the health).
func TestMalformedChunkedRequestBody(t *testing.T) {
	backend := startHTTPBackend(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	})
	dp, proxy := startNetDataplane(t, backend)
	nc := dialProxy(t, proxy)
	nc.send("POST /upload HTTP/1.1\r\nTransfer-Encoding: chunked", []byte("5\r\nhello\r\nzz-not-a-size\r\n\r\n"))
	resp, body, err := nc.read(http.MethodPost)
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("malformed chunked body: %v %v %q, want 400", resp, err, body)
	}
	expectServing(t, proxy)
	if n, health, _ := dp.backends[backend+"|"+backend].stats.Snapshot(); health != 1 {
		t.Errorf("backend stats after a client's malformed body: %d requests, health %.2f, want 1.00", n, health)
	}
}
