package proxy

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// connBufferSize sizes the read and write buffers of every connection,
// client and backend side; it bounds a request's or a response's header
// block.
const connBufferSize = 8 << 10

// newClient is the keep-alive client of one backend. Paths and queries are
// sent as the client sent them (no normalising), headers as they came, and
// response bodies are streamed, never buffered.
func (dp *Dataplane) newClient(addr string, useTLS bool) *fasthttp.HostClient {
	return &fasthttp.HostClient{
		Addr:                          addr,
		IsTLS:                         useTLS,
		Dial:                          dp.dial,
		MaxConns:                      dp.opts.MaxConnsPerHost,
		MaxIdleConnDuration:           90 * time.Second,
		MaxIdemponentCallAttempts:     2, // one retry, on a pooled connection found closed
		RetryIfErr:                    retryIfErr,
		NoDefaultUserAgentHeader:      true,
		DisablePathNormalizing:        true,
		DisableHeaderNamesNormalizing: true, // see peekFold
		StreamResponseBody:            true,
		ReadBufferSize:                connBufferSize,
		WriteBufferSize:               connBufferSize,
		// A malformed response's error (backendCallResult.error, the
		// logs) does not quote its head: a set-cookie among its bytes.
		SecureErrorLogMessage: true,
	}
}

func (dp *Dataplane) dial(addr string) (net.Conn, error) {
	c, err := dp.dialer.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return newUpConn(c), nil
}

// retryIfErr is the client's retry rule after a failed attempt on a pooled
// connection: idempotent requests once, as fasthttp does by default, but
// never errIdleClosed, which forward handles itself so the trace shows it.
func retryIfErr(req *fasthttp.Request, _ int, err error) (resetTimeout, retry bool) {
	if errors.Is(err, errIdleClosed) {
		return false, false
	}
	h := &req.Header
	return false, h.IsGet() || h.IsHead() || h.IsPut()
}

// errIdleClosed is a pooled backend connection found closed (or sending
// bytes nobody asked for) before a request was written to it: servers close
// idle keep-alive connections after a few seconds. Nothing was sent, so the
// request is safe to send again on another connection, whatever its method.
var errIdleClosed = errors.New("the backend closed the idle connection before the request was sent")

// upConn is a backend connection that checks, before the first write of each
// request after the first, that the backend has not closed it while it sat
// in the pool: a peek at the socket (one non-blocking recv, no allocation).
type upConn struct {
	net.Conn
	raw syscall.RawConn // nil when the connection is not a socket
	// reused is set once a response was read: the next write starts a new
	// request on a pooled connection.
	reused bool
	peek   func(fd uintptr) bool // upConn.peekFD, bound once at dial
	closed bool                  // the result of the last peek
	buf    [1]byte
}

func newUpConn(c net.Conn) *upConn {
	uc := &upConn{Conn: c}
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			uc.raw = raw
		}
	}
	uc.peek = uc.peekFD
	return uc
}

func (c *upConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.reused = true
	}
	return n, err
}

func (c *upConn) Write(p []byte) (int, error) {
	if c.reused {
		c.reused = false
		if c.raw != nil {
			c.closed = false
			if err := c.raw.Read(c.peek); err != nil || c.closed {
				return 0, errIdleClosed
			}
		}
	}
	return c.Conn.Write(p)
}

// peekFD looks at the socket without waiting: end of stream, an error or
// unasked-for bytes mean the connection cannot carry a request.
func (c *upConn) peekFD(fd uintptr) bool {
	n, _, err := syscall.Recvfrom(int(fd), c.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	c.closed = n > 0 || (err == nil && n == 0) || (err != nil && err != syscall.EAGAIN && err != syscall.EINTR)
	return true
}

// tunnel forwards a protocol upgrade: the request goes to the backend on a
// connection of its own; when the backend answers 101, the client's and
// the backend's connections are joined byte for byte until either side
// closes. Any other answer is passed on as a normal response.
func (dp *Dataplane) tunnel(ctx *fasthttp.RequestCtx, c *call) {
	req := &ctx.Request
	up, _ := peekFold(&req.Header, "Upgrade")
	upgrade := string(up)
	rewriteRequest(ctx, c.be, true)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", upgrade)

	// A plain connection: once upgraded, either side writes whenever it
	// likes, which upConn's check between requests would take for a close.
	conn, err := dp.dialer.Dial("tcp", c.be.addr)
	if err == nil && c.be.tls {
		host, _, _ := net.SplitHostPort(c.be.addr)
		conn = tls.Client(conn, &tls.Config{ServerName: host})
	}
	if err != nil {
		dp.backendError(ctx, c, err)
		return
	}
	bw := bufio.NewWriter(conn)
	br := bufio.NewReaderSize(conn, connBufferSize)
	resp := fasthttp.AcquireResponse()
	resp.StreamBody = true
	if err = req.Write(bw); err == nil {
		if err = bw.Flush(); err == nil {
			err = resp.Read(br)
		}
	}
	if err != nil {
		conn.Close()
		fasthttp.ReleaseResponse(resp)
		dp.backendError(ctx, c, err)
		return
	}
	out := &ctx.Response.Header
	status := resp.StatusCode()
	if status != fasthttp.StatusSwitchingProtocols {
		// Not upgraded: an ordinary response on a connection used once.
		copyResponseHeader(out, &resp.Header)
		out.SetStatusCode(status)
		n := resp.Header.ContentLength()
		if n >= 0 {
			out.SetContentLength(n)
		}
		c.respond(status, &resp.Header, out)
		c.resp = resp
		if stream := resp.BodyStream(); stream != nil {
			c.body = readCloser{stream, conn}
		} else {
			conn.Close()
		}
		if n < 0 {
			n = -1
		}
		ctx.Response.SetBodyStream(c, n)
		return
	}
	for k, v := range resp.Header.All() {
		if !isHop(k) {
			out.AddBytesKV(k, v)
		}
	}
	out.Set("Connection", "Upgrade")
	up, _ = firstFold(&resp.Header, "Upgrade")
	out.SetBytesV("Upgrade", up)
	out.SetStatusCode(status)
	c.respond(status, &resp.Header, out)
	fasthttp.ReleaseResponse(resp)
	ctx.Hijack(func(client net.Conn) {
		done := make(chan struct{})
		go func() {
			_, _ = io.Copy(conn, client)
			conn.Close()
			close(done)
		}()
		_, _ = br.WriteTo(client)
		client.Close()
		<-done
		c.finish()
	})
}

// unreachable reports whether err is a failure to reach the backend at all.
func unreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" || errors.Is(err, fasthttp.ErrDialTimeout) || errors.Is(err, fasthttp.ErrNoFreeConns)
}

// clientMessage is an upstream error as the client may read it: the
// proxy's words, cut before any quoted bytes of the backend's answer and
// bounded in length.
func clientMessage(err error) string {
	msg, _, _ := strings.Cut(err.Error(), `"`)
	msg = strings.TrimRight(msg, " :")
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	return msg
}
