package proxy

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gwdiag/gwdiag/refproxy/config"
)

// seen is what the backend received, or what the client received.
type seen struct {
	Method, URI, Host string
	Header            http.Header
	Body              string
	Trailer           http.Header
	Status            int
}

// TestForwardMatchesReverseProxy is the contract of forward: for every
// request, the backend and the client see exactly what they see when the
// same request goes through net/http's httputil.ReverseProxy, header for
// header.
func TestForwardMatchesReverseProxy(t *testing.T) {
	var mu sync.Mutex
	var got seen
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = seen{Method: r.Method, URI: r.RequestURI, Host: r.Host, Header: r.Header.Clone(), Body: string(body)}
		mu.Unlock()
		h := w.Header()
		h.Set("Connection", "X-Resp-Hop")
		h.Set("X-Resp-Hop", "secret")
		h.Set("Keep-Alive", "timeout=5")
		h.Set("X-Resp", "yes")
		h.Add("X-Multi", "a")
		h.Add("X-Multi", "b")
		switch r.URL.Path {
		case "/trailers":
			h.Set("Trailer", "X-Sum")
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, "body with trailer")
			h.Set("X-Sum", "42")
		case "/sse":
			h.Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: 1\n\n")
			w.(http.Flusher).Flush()
			io.WriteString(w, "data: 2\n\n")
		case "/status":
			w.WriteHeader(http.StatusTeapot)
			io.WriteString(w, "short and stout")
		default:
			io.WriteString(w, "hello "+r.URL.RawQuery)
		}
	}))
	defer backend.Close()
	addr := strings.TrimPrefix(backend.URL, "http://")

	cfg, err := config.Parse("forward.yaml", []byte(fmt.Sprintf(`
binds:
- port: 0
  listeners:
  - routes:
    - name: plain
      matches: [{path: {pathPrefix: /}, headers: [{name: x-route, value: {exact: plain}}]}]
      backends: [{host: %q}]
    - name: ai
      matches: [{path: {pathPrefix: /}}]
      backends:
      - ai: {name: openai, provider: {openAI: {}}, hostOverride: %q}
`, addr, addr)))
	if err != nil {
		t.Fatal(err)
	}
	dp := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := dp.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	defer dp.Shutdown(t.Context())
	proxyAddr := dp.Addrs()[0]
	// The reference: httputil.ReverseProxy configured as the routes are.
	ref := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.Out.URL.Scheme, pr.Out.URL.Host = "http", addr
		if pr.In.Header.Get("X-Route") != "plain" {
			pr.Out.Host = addr // the ai route
		}
		pr.SetXForwarded()
	},
		// A proxy passes Accept-Encoding on; it must not add its own.
		Transport: &http.Transport{DisableCompression: true},
	})
	defer ref.Close()
	refAddr := strings.TrimPrefix(ref.URL, "http://")

	cases := []struct {
		name string
		raw  string // request sent as is, Host and Connection: close added
	}{
		{"plain GET", "GET /get?x=1 HTTP/1.1\r\nX-Route: plain\r\nUser-Agent: test\r\n"},
		{"no user agent", "GET /get HTTP/1.1\r\nX-Route: plain\r\n"},
		{"hop-by-hop and forwarding headers", "GET /get HTTP/1.1\r\nX-Route: plain\r\nConnection: X-Hop, x-other\r\nX-Hop: 1\r\nX-Other: 2\r\n" +
			"Keep-Alive: timeout=5\r\nProxy-Authorization: Basic x\r\nProxy-Connection: keep-alive\r\nTe: gzip\r\nUpgrade-Insecure-Requests: 1\r\n" +
			"Forwarded: for=1.2.3.4\r\nX-Forwarded-For: 1.2.3.4\r\nX-Forwarded-For: 5.6.7.8\r\nX-Forwarded-Host: evil\r\nX-Forwarded-Proto: https\r\n"},
		{"te trailers kept", "GET /get HTTP/1.1\r\nX-Route: plain\r\nTe: trailers, deflate\r\n"},
		{"repeated headers keep their order", "GET /get HTTP/1.1\r\nX-Route: plain\r\nX-Rep: 1\r\nConnection: x-hop\r\nX-Hop: 1\r\nX-Rep: 2\r\n" +
			"X-Forwarded-For: 1.2.3.4\r\nX-Rep: 3\r\nAccept: a\r\nAccept: b\r\n"},
		{"header names in any case", "GET /get HTTP/1.1\r\nx-route: plain\r\nconnection: x-hop\r\nx-hop: 1\r\nkeep-alive: timeout=5\r\n" +
			"te: trailers\r\nx-forwarded-for: 1.2.3.4\r\nforwarded: for=1.2.3.4\r\nuser-agent: lower\r\nx-lower: kept\r\n"},
		{"unparsable query cleaned", "GET /get?a=1;b=2&c=%zz HTTP/1.1\r\nX-Route: plain\r\n"},
		{"post body", "POST /post HTTP/1.1\r\nX-Route: plain\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}"},
		{"chunked body", "POST /post HTTP/1.1\r\nX-Route: plain\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"},
		{"status passed on", "GET /status HTTP/1.1\r\nX-Route: plain\r\n"},
		{"trailers", "GET /trailers HTTP/1.1\r\nX-Route: plain\r\n"},
		{"sse", "GET /sse HTTP/1.1\r\nX-Route: plain\r\n"},
		{"ai backend sets Host", "GET /v1/models HTTP/1.1\r\n"},
	}
	send := func(t *testing.T, to, raw string) (backendSaw, clientSaw seen) {
		t.Helper()
		c, err := net.Dial("tcp", to)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		head, body, _ := strings.Cut(raw, "\r\n\r\n")
		if !strings.Contains(raw, "\r\n\r\n") {
			head = strings.TrimSuffix(raw, "\r\n")
		}
		req := head + "\r\nHost: gw.example\r\n\r\n" + body
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Header.Del("Date")
		mu.Lock()
		backendSaw = got
		got = seen{}
		mu.Unlock()
		// The client's port differs between the two runs.
		if xff := backendSaw.Header["X-Forwarded-For"]; len(xff) == 1 {
			backendSaw.Header["X-Forwarded-For"] = []string{strings.TrimSuffix(xff[0], ", 127.0.0.1") + " (client)"}
		}
		return backendSaw, seen{Status: resp.StatusCode, Header: resp.Header, Body: string(b), Trailer: resp.Trailer}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantBackend, wantClient := send(t, refAddr, c.raw)
			gotBackend, gotClient := send(t, proxyAddr, c.raw)
			if wantBackend.Method == "" {
				t.Fatal("the backend saw no request through ReverseProxy")
			}
			if d := cmp.Diff(wantBackend, gotBackend); d != "" {
				t.Errorf("backend saw (-ReverseProxy +refproxy):\n%s", d)
			}
			if d := cmp.Diff(wantClient, gotClient); d != "" {
				t.Errorf("client saw (-ReverseProxy +refproxy):\n%s", d)
			}
		})
	}
}
