package mock

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// MaxPoolServers bounds the servers a Pool holds at once: a harness that
// forgets to remove them gets an error, not a process out of ports.
const MaxPoolServers = 512

// Pool makes mock backends on demand, each a server of its own on a free
// port with a counter of its own, and serves their control endpoints on
// its own address. A target that runs the mocks out of process and starts
// many scenarios runs one pool (one container) for all of them instead of
// one process per scenario:
//
//	POST   /__pool/{kind}                 starts a server of kind (echo or llm) on a
//	                                      free port: 201 {"port": N}
//	DELETE /__pool/{port}                 closes it, dropping its connections
//	                                      (held streams included): 204
//	GET    /__pool/{port}/__count         the server's control endpoints (and
//	POST   /__pool/{port}/__reset         only those): RemoteCount and
//	POST   /__pool/{port}/__release?key=K RemoteRelease take HOST:PORT/__pool/N
//
// The servers listen on the pool's host (every interface when it is
// empty), so that whoever reaches the pool's container reaches them too.
type Pool struct {
	host string

	mu      sync.Mutex
	servers map[int]*poolServer
	closed  bool
}

type poolServer struct {
	srv *Server
	h   http.Handler
}

// NewPool returns a pool whose servers listen on host ("" for every
// interface).
func NewPool(host string) *Pool { return &Pool{host: host, servers: map[int]*poolServer{}} }

// Add starts a server of kind ("echo" or "llm") and returns its port.
func (p *Pool) Add(kind string) (int, error) {
	var h http.Handler
	switch kind {
	case "echo":
		h = NewEcho()
	case "llm":
		h = NewLLM()
	default:
		return 0, fmt.Errorf("unknown mock kind %q (echo or llm)", kind)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, fmt.Errorf("the pool is closed")
	}
	if len(p.servers) >= MaxPoolServers {
		return 0, fmt.Errorf("the pool holds %d servers, its most: remove some first", len(p.servers))
	}
	s, err := Listen(net.JoinHostPort(p.host, "0"), h)
	if err != nil {
		return 0, err
	}
	port := s.ln.Addr().(*net.TCPAddr).Port
	p.servers[port] = &poolServer{srv: s, h: h}
	return port, nil
}

// Remove closes the server on port.
func (p *Pool) Remove(port int) error {
	p.mu.Lock()
	s, ok := p.servers[port]
	delete(p.servers, port)
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("no mock server on port %d in the pool", port)
	}
	return s.srv.Close()
}

// Close closes every server; Add fails after it.
func (p *Pool) Close() error {
	p.mu.Lock()
	servers := p.servers
	p.servers, p.closed = map[int]*poolServer{}, true
	p.mu.Unlock()
	for _, s := range servers {
		_ = s.srv.Close()
	}
	return nil
}

func (p *Pool) server(port string) (*poolServer, bool) {
	n, err := strconv.Atoi(port)
	if err != nil {
		return nil, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.servers[n]
	return s, ok
}

// ServeHTTP answers the pool's control API.
func (p *Pool) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/__pool/")
	if !ok {
		http.Error(w, "not a pool endpoint: "+r.URL.Path, http.StatusNotFound)
		return
	}
	id, sub, nested := strings.Cut(rest, "/")
	switch {
	case !nested && r.Method == http.MethodPost:
		port, err := p.Add(id)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, http.StatusCreated, map[string]int{"port": port})
	case !nested && r.Method == http.MethodDelete:
		n, err := strconv.Atoi(id)
		if err == nil {
			err = p.Remove(n)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case nested && strings.HasPrefix(sub, "__"):
		s, ok := p.server(id)
		if !ok {
			http.Error(w, "no mock server on port "+id+" in the pool", http.StatusNotFound)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path, r2.URL.RawPath = "/"+sub, ""
		s.h.ServeHTTP(w, r2)
	default:
		http.Error(w, "unknown pool endpoint "+r.Method+" "+r.URL.Path, http.StatusNotFound)
	}
}

// PoolAdd asks the pool at addr (host:port) for a server of kind and
// returns its port.
func PoolAdd(ctx context.Context, addr, kind string) (int, error) {
	b, err := control(ctx, addr, http.MethodPost, "/__pool/"+kind)
	if err != nil {
		return 0, err
	}
	var a struct{ Port int }
	if err := json.Unmarshal(b, &a); err != nil || a.Port == 0 {
		return 0, fmt.Errorf("POST /__pool/%s: no port in %q", kind, b)
	}
	return a.Port, nil
}

// PoolRemove asks the pool at addr to close its server on port.
func PoolRemove(ctx context.Context, addr string, port int) error {
	_, err := control(ctx, addr, http.MethodDelete, "/__pool/"+strconv.Itoa(port))
	return err
}

// PoolControl is the address RemoteCount and RemoteRelease take for the
// server on port of the pool at addr.
func PoolControl(addr string, port int) string {
	return addr + "/__pool/" + strconv.Itoa(port)
}
