package proxy

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
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
		NoDefaultUserAgentHeader:      true,
		DisablePathNormalizing:        true,
		DisableHeaderNamesNormalizing: true, // see peekFold
		StreamResponseBody:            true,
		ReadBufferSize:                connBufferSize,
		WriteBufferSize:               connBufferSize,
	}
}

func (dp *Dataplane) dial(addr string) (net.Conn, error) {
	return dp.dialer.Dial("tcp", addr)
}

// isUpgrade reports whether the request asks for a protocol upgrade
// (WebSocket and the like).
func isUpgrade(h *fasthttp.RequestHeader) bool {
	up, ok := peekFold(h, "Upgrade")
	return ok && len(up) > 0 && containsToken(valuesFold(h, "Connection"), "upgrade")
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

	conn, err := dp.dial(c.be.addr)
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

// readCloser reads from r and closes c.
type readCloser struct {
	io.Reader
	c io.Closer
}

func (rc readCloser) Close() error { return rc.c.Close() }
