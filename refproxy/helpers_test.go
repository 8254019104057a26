package refproxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/refproxy/config"
	"github.com/gwdiag/gwdiag/refproxy/config/configtest"
)

// startProxy runs a proxy for cfgYAML (binds on port 0, admin on a free
// port) until the test ends.
func startProxy(t testing.TB, cfgYAML string, opts ...Option) *Proxy {
	t.Helper()
	cfg, err := config.Parse(t.Name()+".yaml", []byte(cfgYAML))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	opts = append([]Option{WithAdminAddr("127.0.0.1:0"), WithLogOutput(io.Discard), WithEnv("", "", "")}, opts...)
	p, err := New(cfg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := p.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return p
}

// oneRoute is configtest.OneRoute: one bind, every path to backend.
func oneRoute(backend string) string { return configtest.OneRoute(backend) }

// backendServer is an HTTP backend that names itself in x-backend.
func backendServer(t testing.TB, name string, h http.HandlerFunc) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-backend", name)
		if h != nil {
			h(w, r)
			return
		}
		fmt.Fprintf(w, "%s %s\n", name, r.URL.Path)
	}))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

func get(t *testing.T, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "host") {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s body: %v", url, err)
	}
	return resp, string(b)
}

// traceStream is an open /debug/trace stream.
type traceStream struct {
	resp     *http.Response
	events   chan trace.Event
	comments chan string
	done     chan struct{} // closed at EOF
	cancel   context.CancelFunc
}

// watch opens /debug/trace and returns once the watcher is registered
// (the server writes `: ready` after registering).
func watch(t *testing.T, p *Proxy, method, query string) *traceStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, method, "http://"+p.AdminAddr()+"/debug/trace"+query, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("open trace: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("open trace: status %d: %s", resp.StatusCode, b)
	}
	s := &traceStream{resp: resp, events: make(chan trace.Event, 64), comments: make(chan string, 64), done: make(chan struct{}), cancel: cancel}
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-s.done })
	fr := sse.NewReader(resp.Body)
	if f, err := fr.Next(); err != nil || !f.IsComment || f.Comment != "ready" {
		t.Fatalf("first frame = %+v, %v; want the comment \"ready\"", f, err)
	}
	go func() {
		defer close(s.done)
		for {
			f, err := fr.Next()
			if err != nil {
				return
			}
			if f.IsComment {
				select {
				case s.comments <- ": " + f.Comment:
				default:
				}
				continue
			}
			e, err := trace.Parse([]byte(f.Data))
			if err != nil {
				t.Errorf("bad event %q: %v", f.Data, err)
				return
			}
			s.events <- e
		}
	}()
	return s
}

// collect waits for the stream to end and returns its events.
func (s *traceStream) collect(t *testing.T) []trace.Event {
	t.Helper()
	var out []trace.Event
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-s.events:
			out = append(out, e)
		case <-s.done:
			for {
				select {
				case e := <-s.events:
					out = append(out, e)
				default:
					strictReasons(t, out)
					return out
				}
			}
		case <-timeout:
			t.Fatalf("trace did not end; got %d events", len(out))
		}
	}
}

// strictReasons fails t for an event whose reasons are not the shapes
// golden/trace writes them as (trace.StrictReasons): every trace a test
// reads is held to them.
func strictReasons(t *testing.T, evs []trace.Event) {
	t.Helper()
	for _, e := range evs {
		if err := trace.StrictReasons(e); err != nil {
			t.Errorf("a reason of another shape than golden/trace/reasons.go writes: %v", err)
		}
	}
}

func types(evs []trace.Event) []string {
	var out []string
	for _, e := range evs {
		s := string(e.Type())
		if st := e.Stage(); st != "" {
			s += "/" + st
		}
		out = append(out, s)
	}
	return out
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
