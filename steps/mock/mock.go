// Package mock provides the mock backends the conformance suite and the
// reference proxy's tests send traffic to: an OpenAI-compatible chat
// completions server (LLM) and an httpbin-like echo server (Echo). Both count
// the requests they receive, so a test can prove that a refused request never
// reached the backend.
//
// Both are plain http.Handlers, usable in-process (Listen, or httptest), and
// are served by the steps/mock/cmd/mockbackend binary.
//
// # Control endpoints (both servers)
//
// Paths under /__ are for the test harness and are not counted:
//
//	GET  /__count   {"count": N}: requests received since start or the last reset
//	POST /__reset   sets the count to 0 (answers 204)
//	POST /__release?key=K   releases streams held with x-mock-hold: K (LLM only)
//
// # LLM: POST /v1/chat/completions
//
// The request is an OpenAI chat completion request; "stream": true selects an
// SSE response. Request headers set what the response looks like:
//
//	x-mock-prompt-tokens: N       usage.prompt_tokens (default 10)
//	x-mock-completion-tokens: N   usage.completion_tokens (default 20); also the
//	                              number of words of generated content
//	x-mock-chunks: N              streaming: number of content chunks (default 3, >= 1)
//	x-mock-chunk-delay-ms: N      streaming: pause before each content chunk after
//	                              the first (default 0)
//	x-mock-usage: MODE            how usage is reported (default ok):
//	    ok         well-formed usage (streaming: in a final chunk with empty
//	               choices, sent only when stream_options.include_usage is true,
//	               as OpenAI does)
//	    missing    no usage at all
//	    malformed  usage of the wrong type: "usage": "lots"
//	    garbage    the body (streaming: the usage chunk) is not JSON
//	    truncated  the body (streaming: the usage chunk) is cut in the middle of
//	               the usage object and the response ends cleanly, with no [DONE]
//	    abort      like truncated, but the connection is dropped instead
//	x-mock-status: CODE           answer CODE with an OpenAI-style error body
//	x-mock-hold: KEY              streaming: after the first chunk, wait until
//	                              Release(KEY) or POST /__release?key=KEY
//	x-mock-hold-before-done: KEY  streaming: the same, after the usage chunk and
//	                              before data: [DONE]
//
// A non-streaming answer with well-formed, missing or malformed usage is
// gzip-compressed (Content-Encoding: gzip) when the request's
// Accept-Encoding allows gzip, as real providers do; Go clients send that
// header and decompress transparently unless compression is disabled.
//
// Response headers tell a test what the backend saw:
//
//	x-mock-request-count: N       this request's number (1-based)
//	x-mock-include-usage: B       whether the request had stream_options.include_usage: true
//
// In-process, LLM.LastRequestBody returns the last request body as received.
//
// Both answer with a Set-Cookie for each x-mock-set-cookie header of the
// request, and the LLM tells which Authorization it received without
// showing it (a credential must not travel back where a trace would show
// it under another name):
//
//	x-mock-response-header: N: V    the response carries the header N: V
//	                                (each one given, in order)
//	x-mock-set-cookie: NAME         the response carries Set-Cookie:
//	                                NAME=<24 random hex digits>; Path=/; HttpOnly
//	x-mock-authorization-sha256: H  (LLM response) hex SHA-256 of the
//	                                request's Authorization, "" without one
//
// # Echo
//
//	/headers         {"headers": {name: value}} of the request
//	/status/{code}   answers code with an empty body
//	/delay/{ms}      waits ms milliseconds (at most 60000), then echoes like /anything
//	/anything[/...]  {"method", "url", "path", "query", "headers", "body"} of the request
//	any other path   same as /anything
package mock

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Header names understood by the mock LLM.
const (
	HeaderPromptTokens     = "X-Mock-Prompt-Tokens"
	HeaderCompletionTokens = "X-Mock-Completion-Tokens"
	HeaderChunks           = "X-Mock-Chunks"
	HeaderChunkDelayMs     = "X-Mock-Chunk-Delay-Ms"
	HeaderUsage            = "X-Mock-Usage"
	headerStatus           = "X-Mock-Status"
	HeaderHold             = "X-Mock-Hold"
	HeaderHoldBeforeDone   = "X-Mock-Hold-Before-Done"

	// HeaderSetCookie asks either backend for a Set-Cookie of a cookie of
	// that name with a random value.
	HeaderSetCookie = "X-Mock-Set-Cookie"
	// HeaderResponseHeader ("Name: value") asks either backend to answer
	// with that header: a provider's own rate-limit headers, say.
	HeaderResponseHeader = "X-Mock-Response-Header"

	// Response headers.
	headerRequestCount = "X-Mock-Request-Count"
	// HeaderAuthorizationSHA256 is the hex SHA-256 of the Authorization
	// the LLM received ("" without one).
	HeaderAuthorizationSHA256 = "X-Mock-Authorization-Sha256"
	HeaderIncludeUsage        = "X-Mock-Include-Usage"
)

// Usage modes of the x-mock-usage header.
const (
	usageOK        = "ok"
	UsageMissing   = "missing"
	UsageMalformed = "malformed"
	UsageGarbage   = "garbage"
	UsageTruncated = "truncated"
	usageAbort     = "abort"
)

// Counter counts the requests a mock backend received.
type Counter struct{ n atomic.Int64 }

// Count returns the number of requests received since start or the last Reset.
func (c *Counter) Count() int64 { return c.n.Load() }

// Reset sets the count to 0.
func (c *Counter) Reset() { c.n.Store(0) }

// serveControl answers the /__ endpoints; it reports whether it did.
func (c *Counter) serveControl(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case !strings.HasPrefix(r.URL.Path, "/__"):
		return false
	case r.URL.Path == "/__count" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]int64{"count": c.Count()})
	case r.URL.Path == "/__reset" && r.Method == http.MethodPost:
		c.Reset()
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, "unknown control endpoint "+r.Method+" "+r.URL.Path, http.StatusNotFound)
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// Server is a mock backend listening on a loopback port.
type Server struct {
	srv *http.Server
	ln  net.Listener
}

// Listen serves h on addr ("127.0.0.1:0" picks a free port) until Close.
func Listen(addr string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, ln: ln}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Addr is the host:port the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is http://host:port.
func (s *Server) URL() string { return "http://" + s.Addr() }

// Close stops the server and drops open connections (held streams included).
func (s *Server) Close() error {
	err := s.srv.Close()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops the server gracefully.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// holds lets tests pause streams at a known point.
type holds struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

func (h *holds) get(key string) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ch == nil {
		h.ch = map[string]chan struct{}{}
	}
	c, ok := h.ch[key]
	if !ok {
		c = make(chan struct{})
		h.ch[key] = c
	}
	return c
}

func (h *holds) release(key string) {
	c := h.get(key)
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-c:
	default:
		close(c)
	}
}
