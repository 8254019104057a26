package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/golden/configdump"
	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/refproxy"
	"github.com/gwdiag/gwdiag/refproxy/config/configtest"
	"github.com/gwdiag/gwdiag/refproxy/internal/proxy"
	"github.com/gwdiag/gwdiag/refproxy/refproxytest"
)

// hostileHeaderTimeout is the proxy's header timeout in the matrix: short,
// so that a stalled client is cut off quickly.
const hostileHeaderTimeout = 300 * time.Millisecond

// hostileBound bounds every wait of the matrix; no case waits for it.
const hostileBound = 20 * time.Second

// outcome is what one exchange looked like from the client, the trace and
// the backend's health.
type outcome struct {
	// client: "200", "502", ... for a whole response; "aborted <status>"
	// for a head followed by a body cut short; "closed" for no response.
	client string
	// traceError is the error the trace reports (backendCallResult or
	// requestFinished), "" for none; traced is false when no trace is
	// expected (the request never reached the proxy's handler).
	traceError string
	traced     bool
	// health is the backend's health in /config_dump after the exchange.
	health float64
}

// TestHostileNetwork is the matrix of hostile backends and clients: for each,
// what the client gets, what the trace says and what the backend's health
// becomes. The proxy must never crash, hang or lie about what happened.
func TestHostileNetwork(t *testing.T) {
	// idleClosed tells the idle-close case's client that the backend has
	// closed the connection it answered on.
	idleClosed := make(chan struct{}, 4)
	tests := []struct {
		name string
		// backend serves the raw connection (nil: a plain net/http echo).
		backend func(c net.Conn, r *http.Request)
		// client talks to the proxy's listener and returns what it saw.
		client func(t *testing.T, addr string) string
		want   outcome
	}{
		{name: "backend cuts its body early", backend: cutAfter(1000), client: get("/x"),
			want: outcome{client: "502", traceError: "body cut short", traced: true, health: 0}},
		{name: "backend cuts its body late", backend: cutAfter(40000), client: get("/x"),
			want: outcome{client: "aborted 200", traceError: "body cut short", traced: true, health: 0}},
		{name: "backend closes before answering", backend: func(c net.Conn, _ *http.Request) {}, client: get("/x"),
			want: outcome{client: "502", traceError: "closed", traced: true, health: 0}},
		{name: "backend answers garbage", backend: func(c net.Conn, _ *http.Request) { io.WriteString(c, "SECRET garbage, not HTTP") },
			client: get("/x"), want: outcome{client: "502", traceError: "error when reading response headers", traced: true, health: 0}},
		// Closed right after answering, as a server with a short keep-alive
		// timeout does: the proxy's pooled connection is dead when the
		// second POST comes, which must not cost it.
		{name: "backend closes idle keep-alive connections", backend: func(c net.Conn, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			c.Close()
			idleClosed <- struct{}{}
		}, client: posts(2, idleClosed), want: outcome{client: "200 200", traced: true, health: 1}},
		{name: "client sends half its headers", client: raw("GET /x HTTP/1.1\r\nHost: x\r\nX-Slow: "),
			want: outcome{client: "408", health: 1}},
		{name: "client sends a malformed chunked body", client: raw("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n\r\n"),
			want: outcome{client: "400", traceError: "the client's request body", traced: true, health: 1}},
		{name: "client sends its body slowly", client: slowBody(6, 2*hostileHeaderTimeout),
			want: outcome{client: "200", traced: true, health: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			backend := hostileBackend(t, tt.backend)
			p := refproxytest.Start(t, configtest.OneRoute(backend),
				refproxy.WithTimeouts(proxy.Timeouts{Header: hostileHeaderTimeout}))
			ctx, cancel := context.WithTimeout(context.Background(), hostileBound)
			defer cancel()
			st, err := sse.Open(ctx, http.DefaultClient, p.AdminAddr(), "")
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			awaitRegistered(t, st)
			got := outcome{client: tt.client(t, p.BindAddrs()[0])}
			if tt.want.traced {
				got.traced = true
				tr, err := sse.ReadTrace(sse.NewReader(st.Response.Body))
				if err != nil {
					t.Fatalf("reading the trace: %v", err)
				}
				got.traceError = traceError(tr.Events)
			}
			got.health = health(t, p.AdminAddr(), backend)
			if got.client != tt.want.client || got.traced != tt.want.traced || got.health != tt.want.health ||
				!strings.Contains(got.traceError, tt.want.traceError) || (tt.want.traceError == "" && got.traceError != "") {
				t.Errorf("got %+v\nwant %+v (traceError: a part of it)", got, tt.want)
			}
			// The proxy serves the next client as if nothing happened.
			if s := get("/next")(t, p.BindAddrs()[0]); tt.backend == nil && s != "200" {
				t.Errorf("the next request got %s, want 200", s)
			}
		})
	}
}

// awaitRegistered reads the stream's ": ready" comment: the watcher is
// registered, so the next request is the traced one.
func awaitRegistered(t *testing.T, st *sse.Stream) {
	t.Helper()
	f, err := st.Next()
	if err != nil || !f.IsComment || f.Comment != "ready" {
		t.Fatalf("trace stream: first frame %+v, %v; want the ready comment", f, err)
	}
}

// traceError is the first error a trace reports.
func traceError(events []trace.Event) string {
	for _, e := range events {
		if e.Type() != trace.BackendCallResult && e.Type() != trace.RequestFinished {
			continue
		}
		if msg, ok := e.Message["error"].(string); ok && msg != "" {
			return msg
		}
	}
	return ""
}

// health reads the backend's health from /config_dump.
func health(t *testing.T, admin, backend string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/config_dump")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	d, err := configdump.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range d.Endpoints() {
		if ep.Endpoint == backend {
			return ep.Info.Health
		}
	}
	t.Fatalf("config_dump has no endpoint %s", backend)
	return 0
}

// hostileBackend serves serve on every connection after reading its
// request; nil serves a plain echo of the request body.
func hostileBackend(t *testing.T, serve func(c net.Conn, r *http.Request)) string {
	t.Helper()
	if serve == nil {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			io.WriteString(w, "got "+string(b))
		}))
		t.Cleanup(s.Close)
		return s.Listener.Addr().String()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(hostileBound))
				r, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				serve(c, r)
			}()
		}
	}()
	return ln.Addr().String()
}

// cutAfter announces 100000 bytes of body, sends n and closes.
func cutAfter(n int) func(net.Conn, *http.Request) {
	return func(c net.Conn, _ *http.Request) {
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n%s", strings.Repeat("x", n))
	}
}

// get sends a GET with net/http and describes what came back.
func get(path string) func(t *testing.T, addr string) string {
	return func(t *testing.T, addr string) string {
		c := &http.Client{Timeout: hostileBound, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := c.Get("http://" + addr + path)
		if err != nil {
			return "closed"
		}
		defer resp.Body.Close()
		if _, err := io.ReadAll(resp.Body); err != nil {
			return fmt.Sprintf("aborted %d", resp.StatusCode)
		}
		return fmt.Sprint(resp.StatusCode)
	}
}

// posts sends n POSTs with a body, one after the other, each once the
// backend has closed the connection of the previous one, and lists their
// statuses.
func posts(n int, closed <-chan struct{}) func(t *testing.T, addr string) string {
	return func(t *testing.T, addr string) string {
		c := &http.Client{Timeout: hostileBound}
		var out []string
		for i := range n {
			if i > 0 {
				select {
				case <-closed:
				case <-time.After(hostileBound):
					t.Fatal("the backend never closed its connection")
				}
			}
			resp, err := c.Post("http://"+addr+"/v1/chat", "application/json", strings.NewReader(fmt.Sprintf(`{"n":%d}`, i)))
			if err != nil {
				out = append(out, "closed")
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			out = append(out, fmt.Sprint(resp.StatusCode))
		}
		return strings.Join(out, " ")
	}
}

// onConn dials the proxy, lets write send what it likes, then reads the
// proxy's answer: its status, or "closed" for none.
func onConn(write func(c net.Conn)) func(t *testing.T, addr string) string {
	return func(t *testing.T, addr string) string {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(hostileBound))
		write(c)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return "closed"
		}
		resp.Body.Close()
		return fmt.Sprint(resp.StatusCode)
	}
}

// raw writes bytes on a connection, then reads the answer.
func raw(sent string) func(t *testing.T, addr string) string {
	return onConn(func(c net.Conn) { io.WriteString(c, sent) })
}

// slowBody sends a prompt head, then an n-byte body over d.
func slowBody(n int, d time.Duration) func(t *testing.T, addr string) string {
	return onConn(func(c net.Conn) {
		fmt.Fprintf(c, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", n)
		for range n {
			// The client's pace is the case itself.
			time.Sleep(d / time.Duration(n))
			c.Write([]byte("b"))
		}
	})
}
