package proxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// upstream is an HTTP/1.1 client for one plain-HTTP backend that makes each
// round trip on the calling goroutine. http.Transport hands every request
// and response between the handler and two goroutines per connection; under
// load those handoffs cost more than the proxying itself. Anything this
// client does not handle (TLS, upgrades, Expect: 100-continue) goes to the
// fallback transport.
type upstream struct {
	addr     string
	dialer   *net.Dialer
	fallback http.RoundTripper
	maxIdle  int

	mu   sync.Mutex
	idle []*upConn
}

type upConn struct {
	c      net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer
	reused bool
}

// aLongTimeAgo is a deadline that makes blocked reads and writes fail at once.
var aLongTimeAgo = time.Unix(1, 0)

func (u *upstream) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" || req.Header.Get("Upgrade") != "" || req.Header.Get("Expect") != "" {
		return u.fallback.RoundTrip(req)
	}
	ctx := req.Context()
	// A request whose body has been (partly) sent cannot be replayed.
	retryable := req.Body == nil || req.Body == http.NoBody
	for attempt := 0; ; attempt++ {
		pc, err := u.get(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		stop := context.AfterFunc(ctx, func() { pc.c.SetDeadline(aLongTimeAgo) })
		resp, err := pc.roundTrip(req)
		if err != nil {
			stop()
			pc.c.Close()
			// A pooled connection the backend has closed fails at once; try a
			// fresh one, as http.Transport does.
			if pc.reused && attempt == 0 && retryable && ctx.Err() == nil {
				continue
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		resp.Body = &upBody{rc: resp.Body, pc: pc, u: u, stop: stop, reusable: !resp.Close && !req.Close}
		return resp, nil
	}
}

func (pc *upConn) roundTrip(req *http.Request) (*http.Response, error) {
	if err := req.Write(pc.bw); err != nil {
		return nil, err
	}
	if err := pc.bw.Flush(); err != nil {
		return nil, err
	}
	for {
		resp, err := http.ReadResponse(pc.br, req)
		if err != nil {
			return nil, err
		}
		// Interim 1xx responses are skipped (no Expect was sent, so these are
		// informational only).
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		return resp, nil
	}
}

func (u *upstream) get(ctx context.Context) (*upConn, error) {
	u.mu.Lock()
	if n := len(u.idle); n > 0 {
		pc := u.idle[n-1]
		u.idle = u.idle[:n-1]
		u.mu.Unlock()
		return pc, nil
	}
	u.mu.Unlock()
	c, err := u.dialer.DialContext(ctx, "tcp", u.addr)
	if err != nil {
		return nil, err
	}
	return &upConn{c: c, br: bufio.NewReaderSize(c, 16<<10), bw: bufio.NewWriterSize(c, 16<<10)}, nil
}

func (u *upstream) put(pc *upConn) {
	pc.reused = true
	u.mu.Lock()
	if len(u.idle) < u.maxIdle {
		u.idle = append(u.idle, pc)
		u.mu.Unlock()
		return
	}
	u.mu.Unlock()
	pc.c.Close()
}

// CloseIdleConnections closes pooled connections (shutdown, reload).
func (u *upstream) CloseIdleConnections() {
	u.mu.Lock()
	idle := u.idle
	u.idle = nil
	u.mu.Unlock()
	for _, pc := range idle {
		pc.c.Close()
	}
	if f, ok := u.fallback.(interface{ CloseIdleConnections() }); ok {
		f.CloseIdleConnections()
	}
}

// upBody returns the connection to the pool once the body has been read to
// the end, and closes it if the reader gives up early.
type upBody struct {
	rc       io.ReadCloser
	pc       *upConn
	u        *upstream
	stop     func() bool
	reusable bool
	done     bool
}

func (b *upBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.release(true)
	} else if err != nil {
		b.release(false)
	}
	return n, err
}

func (b *upBody) Close() error {
	if !b.done {
		b.release(false)
	}
	return nil
}

func (b *upBody) release(complete bool) {
	b.done = true
	b.rc.Close()
	// If the context fired, the connection carries an expired deadline.
	stopped := b.stop()
	if complete && b.reusable && stopped && b.pc.br.Buffered() == 0 {
		b.u.put(b.pc)
		return
	}
	b.pc.c.Close()
}
