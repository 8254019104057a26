// Package bundle keeps the evidence of a failed conformance scenario: the
// HTTP exchanges it made (recorded as they happen), the config the suite
// wrote, the proxy's output, the config dump at the failure, and what the
// scenario was. Write lays it out as one folder per scenario (the
// exchanges as HAR 1.2, each trace stream as the bytes came), redacted;
// Read takes it back, for `gwdiag conformance replay`.
package bundle

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"time"
)

// Bounds of what a recorder keeps: a body past maxBody is cut (and marked
// so), and past maxTotal of bodies in all the exchanges keep no body. A
// hostile proxy's endless stream costs a bundle at most this.
const (
	maxBody  = 1 << 20
	maxTotal = 16 << 20
)

// Exchange is one HTTP exchange a scenario made.
type Exchange struct {
	Started time.Time
	// Wait is the time to the response's head; Ended when its body was
	// closed or read to its end (zero while it is open).
	Wait  time.Duration
	Ended time.Time

	Method        string
	URL           string
	RequestHeader http.Header
	RequestBody   []byte

	Status         int
	Proto          string
	ResponseHeader http.Header
	ResponseBody   []byte
	// Cut says the body kept is not the whole of what came (a bound).
	Cut bool
	// Err is why the exchange failed or its body ended early.
	Err string
}

// Recorder is an http.RoundTripper that keeps every exchange it carries,
// the response bodies as the caller reads them (a trace stream the
// scenario still reads shows what came so far). Safe for concurrent use.
type Recorder struct {
	Base http.RoundTripper

	mu    sync.Mutex
	ex    []*Exchange
	total int
}

// RoundTrip implements http.RoundTripper.
func (r *Recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	e := &Exchange{Started: time.Now(), Method: req.Method, URL: req.URL.String(), RequestHeader: req.Header.Clone()}
	if req.Body != nil && req.GetBody != nil {
		if b, err := req.GetBody(); err == nil {
			e.RequestBody, e.Cut = r.keep(b)
			b.Close()
		}
	}
	r.mu.Lock()
	r.ex = append(r.ex, e)
	r.mu.Unlock()
	resp, err := r.Base.RoundTrip(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	e.Wait = time.Since(e.Started)
	if err != nil {
		e.Err, e.Ended = err.Error(), time.Now()
		return nil, err
	}
	e.Status, e.Proto, e.ResponseHeader = resp.StatusCode, resp.Proto, resp.Header.Clone()
	resp.Body = &teeBody{ReadCloser: resp.Body, r: r, e: e}
	return resp, nil
}

// keep reads a request body whole, bounded.
func (r *Recorder) keep(b io.Reader) ([]byte, bool) {
	var buf bytes.Buffer
	n, _ := io.Copy(&buf, io.LimitReader(b, maxBody+1))
	if n > maxBody {
		return buf.Bytes()[:maxBody], true
	}
	return buf.Bytes(), false
}

// Exchanges returns a copy of what was recorded so far, in the order the
// requests were sent.
func (r *Recorder) Exchanges() []Exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Exchange, len(r.ex))
	for i, e := range r.ex {
		out[i] = *e
		out[i].ResponseBody = bytes.Clone(e.ResponseBody)
	}
	return out
}

// teeBody keeps what the caller reads of a response body.
type teeBody struct {
	io.ReadCloser
	r *Recorder
	e *Exchange
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	if n > 0 {
		room := min(maxBody-len(t.e.ResponseBody), maxTotal-t.r.total)
		if room < n {
			t.e.Cut = true
		}
		if k := max(min(room, n), 0); k > 0 {
			t.e.ResponseBody = append(t.e.ResponseBody, p[:k]...)
			t.r.total += k
		}
	}
	if err != nil && t.e.Ended.IsZero() {
		t.e.Ended = time.Now()
		if err != io.EOF {
			t.e.Err = err.Error()
		}
	}
	return n, err
}

func (t *teeBody) Close() error {
	t.r.mu.Lock()
	if t.e.Ended.IsZero() {
		t.e.Ended = time.Now()
	}
	t.r.mu.Unlock()
	return t.ReadCloser.Close()
}

// CloseIdleConnections closes the idle connections of Base, as
// http.Client.CloseIdleConnections does for a transport that has them.
func (r *Recorder) CloseIdleConnections() {
	if c, ok := r.Base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
