package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gwdiag/gwdiag/refproxy/llm"
)

// forward sends the request to c.be and streams the answer back: the
// request is rewritten in place (hop-by-hop headers out, X-Forwarded-*
// in) and sent on a pooled keep-alive connection; the response's status
// and headers are copied, and its body becomes the body stream of the
// client's response, written (and, when it has no length, flushed chunk by
// chunk, so SSE passes through as it comes) after the handler returns.
// What the client and the backend see is what httputil.ReverseProxy would
// show them, header for header (TestForwardMatchesReverseProxy).
func (dp *Dataplane) forward(ctx *fasthttp.RequestCtx, c *call, dropped bool) {
	req := &ctx.Request
	clientClose := req.Header.ConnectionClose()
	rewriteRequest(ctx, c.be, dropped)
	if n := req.Header.ContentLength(); req.IsBodyStream() && n >= 0 && n <= maxBufferedBody {
		// The server read this body whole before calling the handler:
		// take it as bytes, so that the request can be sent again.
		req.Body()
	}
	if req.IsBodyStream() {
		// A body streamed from the client (large, or chunked) is read while
		// it is sent; a request of its own reads it through clientBody, to
		// tell a failure of the client's (a malformed chunked body) from the
		// backend's. The client's request keeps its stream, which the
		// server releases.
		c.clientBody = clientBody{r: req.BodyStream()}
		up := fasthttp.AcquireRequest()
		defer fasthttp.ReleaseRequest(up)
		req.Header.CopyTo(&up.Header)
		up.SetBodyStream(&c.clientBody, req.Header.ContentLength())
		req = up
	}
	resp := fasthttp.AcquireResponse()
	resp.StreamBody = true
	err := c.be.do(req, resp)
	// A pooled connection the backend had closed carried nothing: send the
	// request again on another (the pool may hold several such), unless its
	// body was a stream already partly read.
	for try := 0; errors.Is(err, errIdleClosed) && !req.IsBodyStream() && try < maxIdleRetries; try++ {
		c.retried(err)
		err = c.be.do(req, resp)
	}
	if clientClose {
		ctx.Response.SetConnectionClose()
	}
	if err != nil {
		fasthttp.ReleaseResponse(resp)
		if cerr := c.clientBody.err; cerr != nil {
			dp.clientBodyError(ctx, c, cerr)
			return
		}
		dp.backendError(ctx, c, err)
		return
	}
	status := resp.StatusCode()
	n := resp.Header.ContentLength()
	stream := resp.BodyStream()
	if stream != nil && n >= 0 && !isEventStream(resp.Header.ContentType()) {
		// A body of known length is read ahead before anything goes to the
		// client: whole when small (the backend connection goes back to the
		// pool before the client is answered, and the response leaves in
		// one write), else its first part. A body cut short there gets a
		// 502, and the trace's backendCallResult says why. On a
		// token-limited route a small body is read through the usage watch,
		// which charges at its end.
		small := n <= maxBufferedResponse
		var watch io.ReadCloser
		body := io.Reader(stream)
		if small && c.rt.tokens {
			watch = dp.watchTokens(c, resp, io.NopCloser(stream))
			body = watch
		}
		buf, k, err := readAhead(body, n, small)
		if watch != nil {
			_ = watch.Close() // the watch reports before the call ends
		}
		if err != nil {
			fasthttp.ReleaseResponse(resp)
			dp.backendError(ctx, c, bodyError(err))
			return
		}
		c.resp = resp
		dp.respondHeaders(ctx, c, status, n)
		if small {
			ctx.Response.SetBody(buf[:k])
			readBufs.Put(buf)
			c.finish()
			return
		}
		c.up = upBody{resp: resp}
		c.ahead = aheadBody{buf: buf, n: k, rest: &c.up}
		c.body = &c.ahead
		c.watchClient(ctx.Conn(), stream)
		if c.rt.tokens {
			c.body = dp.watchTokens(c, resp, c.body)
		}
		ctx.Response.SetBodyStream(c, n)
		return
	}
	c.resp = resp
	dp.respondHeaders(ctx, c, status, n)
	if stream != nil {
		c.up = upBody{resp: resp}
		c.body = &c.up
		c.watchClient(ctx.Conn(), stream)
	}
	if c.rt.tokens {
		c.body = dp.watchTokens(c, resp, c.body)
	}
	if n < 0 {
		n = -1 // chunked to the client, flushed after every chunk
	}
	// An event stream's headers go out at once, before its first event.
	ctx.Response.ImmediateHeaderFlush = isEventStream(resp.Header.ContentType())
	ctx.Response.SetBodyStream(c, n)
}

// maxIdleRetries bounds the new attempts after pooled connections found
// closed by the backend.
const maxIdleRetries = 8

// maxBufferedResponse is the largest response body forward reads whole
// before answering, and how much of a larger one of known length it reads
// ahead; bodies of unknown length stream through as they come.
const maxBufferedResponse = 16 << 10

// readBufs hold read-ahead bodies: one byte more than maxBufferedResponse,
// to read past a small body's end.
var readBufs = sync.Pool{New: func() any { return new([maxBufferedResponse + 1]byte) }}

// readAhead reads the first min(n, maxBufferedResponse) bytes of a body of
// length n into a pooled buffer; with whole (n fits), it reads on to the
// body's end, which also tells the backend's client that the connection can
// go back to the pool. On error the buffer is already returned.
func readAhead(body io.Reader, n int, whole bool) (buf *[maxBufferedResponse + 1]byte, k int, err error) {
	buf = readBufs.Get().(*[maxBufferedResponse + 1]byte)
	want := min(n, maxBufferedResponse)
	k, err = io.ReadFull(body, buf[:want])
	if err == io.EOF && want > 0 {
		err = io.ErrUnexpectedEOF
	}
	if err == nil && whole {
		if _, err = body.Read(buf[k : k+1]); err == io.EOF {
			err = nil
		} else if err == nil {
			err = errors.New("backend sent more than Content-Length")
		}
	}
	if err != nil {
		readBufs.Put(buf)
		return nil, 0, err
	}
	return buf, k, nil
}

// bodyError says what went wrong with a backend's body.
func bodyError(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("backend body cut short: %w", err)
	}
	return fmt.Errorf("backend body: %w", err)
}

// aheadBody is a body of known length whose first part was read ahead: it
// serves that part, then the rest, and returns the buffer on Close.
type aheadBody struct {
	buf    *[maxBufferedResponse + 1]byte
	off, n int
	rest   io.ReadCloser
}

func (a *aheadBody) Read(p []byte) (int, error) {
	if a.off < a.n {
		k := copy(p, a.buf[a.off:a.n])
		a.off += k
		return k, nil
	}
	return a.rest.Read(p)
}

func (a *aheadBody) Close() error {
	if a.buf != nil {
		readBufs.Put(a.buf)
		a.buf = nil
	}
	return a.rest.Close()
}

// respondHeaders copies the backend's status and headers to the client's
// response, announces the trailers the backend announced, and traces the
// answer (call.respond).
func (dp *Dataplane) respondHeaders(ctx *fasthttp.RequestCtx, c *call, status, n int) {
	resp := c.resp
	out := &ctx.Response.Header
	copyResponseHeader(out, &resp.Header)
	for t := range resp.Header.Trailers() {
		// Announced to the client as the backend announced them; the values
		// follow the body (call.Read). Trailers the backend sends without
		// announcing them are not passed on.
		if out.AddTrailerBytes(t) == nil {
			c.trailers = out
		}
	}
	out.SetStatusCode(status)
	if n >= 0 {
		out.SetContentLength(n)
	}
	c.respond(status, &resp.Header, out)
}

// isEventStream reports whether a Content-Type is text/event-stream, which
// always streams.
func isEventStream(ct []byte) bool {
	mt, _, _ := strings.Cut(b2s(ct), ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
}

// upBody is the backend response's body stream; closing it returns the
// connection to the pool, or closes it when the body was not read to the end.
type upBody struct{ resp *fasthttp.Response }

func (b *upBody) Read(p []byte) (int, error) { return b.resp.BodyStream().Read(p) }

func (b *upBody) Close() error { return b.resp.CloseBodyStream() }

// backendError answers a failed upstream call: 503 when the backend could
// not be reached, 502 when it answered wrongly (a malformed response, a
// body cut short). The trace shows the transport error in
// backendCallResult.error; the client is told what failed, never the bytes
// the backend sent.
func (dp *Dataplane) backendError(ctx *fasthttp.RequestCtx, c *call, err error) {
	c.err = err
	dp.log.Debug("backend call failed", "host", c.be.addr, "err", err)
	code := fasthttp.StatusBadGateway
	if unreachable(err) {
		code = fasthttp.StatusServiceUnavailable
	}
	resp := &ctx.Response
	resp.Header.SetContentType("text/plain; charset=utf-8")
	resp.SetStatusCode(code)
	c.respond(code, nil, &resp.Header)
	resp.SetBodyString("upstream call failed: " + clientMessage(err) + "\n")
	c.finish()
}

// clientBodyError answers a request whose body the client sent malformed:
// 400, and the backend's health does not count the call.
func (dp *Dataplane) clientBodyError(ctx *fasthttp.RequestCtx, c *call, err error) {
	c.err, c.clientFault = fmt.Errorf("the client's request body: %w", err), true
	resp := &ctx.Response
	resp.Header.SetContentType("text/plain; charset=utf-8")
	resp.SetStatusCode(fasthttp.StatusBadRequest)
	resp.SetConnectionClose()
	c.respond(fasthttp.StatusBadRequest, nil, &resp.Header)
	resp.SetBodyString("malformed request body: " + clientMessage(err) + "\n")
	c.finish()
}

// clientBody is a client's streamed request body; it keeps the error
// reading it failed with.
type clientBody struct {
	r   io.Reader
	err error
}

func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
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

// watchTokens charges LLM token usage once the body has passed through.
func (dp *Dataplane) watchTokens(c *call, resp *fasthttp.Response, body io.ReadCloser) io.ReadCloser {
	set, route := c.rt.set, c.rt.key
	// Error answers from LLM providers carry no usage: counting them as 0 is
	// expected, not worth a warning.
	success := resp.StatusCode() < 300
	return llm.Watch(body, b2s(resp.Header.ContentType()), b2s(resp.Header.ContentEncoding()), func(u llm.Usage, err error) {
		set.Charge(time.Now(), u.Total())
		if err != nil && success {
			msg := "token usage not counted: " + err.Error()
			dp.log.Warn(msg, "route", route)
			c.warnMu.Lock()
			c.warnings = append(c.warnings, msg)
			c.warnMu.Unlock()
		}
	})
}

// prepareLLMRequest applies llm.PrepareBody to a JSON request body of
// known, bounded size that is already in memory or can be read.
func prepareLLMRequest(req *fasthttp.Request) {
	if ct := req.Header.ContentType(); len(ct) > 0 && !llm.IsJSON(b2s(ct)) {
		return
	}
	n := req.Header.ContentLength()
	if n == 0 || n > llm.MaxRequestSize {
		return
	}
	if stream := req.BodyStream(); stream != nil {
		body, rest, ok := llm.ReadBody(stream, int64(n))
		if !ok {
			req.SetBodyStream(rest, -1) // too large, or broken: goes on untouched
			return
		}
		req.SetBodyRaw(body)
		req.Header.SetContentLength(len(body))
	}
	if out, ok := llm.PrepareBody(req.Body()); ok {
		req.SetBodyRaw(out)
		req.Header.SetContentLength(len(out))
	}
}

// errReader is a body that fails with err: writing it aborts the response.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// hopHeaders are the hop-by-hop headers of RFC 9110 section 7.6.1 (and the
// obsolete ones ReverseProxy also removes).
var hopHeaders = [...]string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func isHop(k []byte) bool { return hopIndex(k) >= 0 }

// hopIndex is k's index in hopHeaders, or -1. Names are told apart by
// length first: this runs on every header of every request and response.
func hopIndex(k []byte) int {
	var i int
	switch len(k) {
	case 2:
		i = 5 // Te
	case 7:
		if k[0]|0x20 == 't' {
			i = 6 // Trailer
		} else {
			i = 8 // Upgrade
		}
	case 10:
		if k[0]|0x20 == 'c' {
			i = 0 // Connection
		} else {
			i = 2 // Keep-Alive
		}
	case 16:
		i = 1 // Proxy-Connection
	case 17:
		i = 7 // Transfer-Encoding
	case 18:
		i = 3 // Proxy-Authenticate
	case 19:
		i = 4 // Proxy-Authorization
	default:
		return -1
	}
	if strings.EqualFold(b2s(k), hopHeaders[i]) {
		return i
	}
	return -1
}

// rewriteRequest turns the client's request into the backend's, as a
// Rewrite httputil.ReverseProxy calling SetXForwarded does: hop-by-hop
// headers (RFC 9110 and those named in Connection) and the client's
// Forwarded and X-Forwarded-* are dropped; X-Forwarded-For (the client's
// address), -Host and -Proto are set; "Te: trailers" is kept; a query Go
// could not parse is re-encoded; Host stays the client's, except for AI
// backends, which get their own.
//
// dropped is hasDroppedHeader's answer for the request.
func rewriteRequest(ctx *fasthttp.RequestCtx, be *backend, dropped bool) {
	h := &ctx.Request.Header
	h.ResetConnectionClose()
	if dropped {
		dropRequestHeaders(h)
	}
	if a, ok := ctx.RemoteAddr().(*net.TCPAddr); ok {
		var buf [64]byte
		ip, _ := a.IP.AppendText(buf[:0])
		h.SetCanonical(headerXFF, ip)
	}
	h.SetCanonical(headerXFHost, h.Host())
	if ctx.IsTLS() {
		h.SetCanonical(headerXFProto, valueHTTPS)
	} else {
		h.SetCanonical(headerXFProto, valueHTTP)
	}
	ctx.Request.UseHostHeader = true
	if be.ai {
		h.SetHost(be.addr)
	}
	uri := ctx.Request.URI()
	if be.tls {
		uri.SetScheme("https")
	} else {
		uri.SetScheme("http")
	}
	if q := b2s(uri.QueryString()); q != "" {
		if clean := cleanQueryParams(q); clean != q {
			uri.SetQueryString(clean)
		}
	}
}

// dropRequestHeaders removes hop-by-hop headers (RFC 9110 and those named
// in Connection), Expect (the server has answered 100-continue itself) and
// the client's Forwarded and X-Forwarded-*, keeping "Te: trailers" and the
// order of every other header: fasthttp's Del moves the last header into
// the gap, which would reorder repeated fields, so the rest are added back
// in order instead.
func dropRequestHeaders(h *fasthttp.RequestHeader) {
	var listed []string
	for _, conn := range valuesFold(h, "Connection") {
		for f := range strings.SplitSeq(string(conn), ",") {
			if f = strings.TrimSpace(f); f != "" {
				listed = append(listed, f)
			}
		}
	}
	teTrailers := containsToken(valuesFold(h, "Te"), "trailers")
	dropped := func(k string) bool {
		if isHop([]byte(k)) || strings.EqualFold(k, "Expect") || strings.EqualFold(k, "Forwarded") ||
			len(k) > 12 && strings.EqualFold(k[:12], "X-Forwarded-") {
			return true
		}
		return slices.ContainsFunc(listed, func(l string) bool { return strings.EqualFold(l, k) })
	}
	type field struct{ k, v string }
	var kept []field
	var names []string
	for k, v := range h.All() {
		ks := string(k)
		if specialRequestHeader(ks) {
			continue // kept apart by fasthttp, in no order
		}
		if !slices.Contains(names, ks) {
			names = append(names, ks)
		}
		if !dropped(ks) {
			kept = append(kept, field{ks, string(v)})
		}
	}
	delFold(h, "Trailer")
	for _, k := range names {
		h.Del(k)
	}
	for _, f := range kept {
		h.Add(f.k, f.v)
	}
	if teTrailers {
		h.Set("Te", "trailers")
	}
}

// specialRequestHeader reports whether fasthttp keeps a request header
// apart from the others (none of these is dropped, except Trailer).
func specialRequestHeader(k string) bool {
	for _, s := range [...]string{"Host", "Content-Length", "Content-Type", "User-Agent", "Cookie", "Trailer"} {
		if strings.EqualFold(k, s) {
			return true
		}
	}
	return false
}

// Canonical header names and values rewriteRequest sets (read only).
var (
	headerXFF     = []byte("X-Forwarded-For")
	headerXFHost  = []byte("X-Forwarded-Host")
	headerXFProto = []byte("X-Forwarded-Proto")
	valueHTTP     = []byte("http")
	valueHTTPS    = []byte("https")
)

// hasDroppedHeader reports whether the request has any header
// rewriteRequest drops, so that the usual request costs one pass.
func hasDroppedHeader(h *fasthttp.RequestHeader) bool {
	for k := range h.All() {
		if isHop(k) {
			return true
		}
		switch ks := b2s(k); {
		case strings.EqualFold(ks, "Expect"), strings.EqualFold(ks, "Forwarded"),
			len(ks) > 12 && strings.EqualFold(ks[:12], "X-Forwarded-"):
			return true
		}
	}
	return false
}

// copyResponseHeader copies the backend's response headers to the client's
// response, in order, without hop-by-hop headers (RFC 9110 and those named
// in Connection). The server sets Content-Length from the body and its own
// Date (as nginx does), in place of the backend's.
func copyResponseHeader(dst, src *fasthttp.ResponseHeader) {
	conn := connectionTokens(src)
	for k, v := range src.All() {
		if !forwardable(k, conn) {
			continue
		}
		switch len(k) {
		case 4:
			if strings.EqualFold(b2s(k), "Date") {
				continue
			}
		case 14:
			if strings.EqualFold(b2s(k), "Content-Length") {
				continue
			}
		}
		dst.AddBytesKV(k, v)
	}
}

// backendHeaders renders the backend's response headers for the trace as
// the proxy takes them: without hop-by-hop headers.
func backendHeaders(src *fasthttp.ResponseHeader) map[string]any {
	conn := connectionTokens(src)
	m := make(map[string]any, src.Len())
	for k, v := range src.All() {
		if forwardable(k, conn) {
			addHeader(m, k, v)
		}
	}
	return m
}

// connectionTokens is the values of a response's Connection headers,
// comma-separated, without keep-alive and close (the usual values, which
// name no header), so that it is usually empty.
func connectionTokens(h *fasthttp.ResponseHeader) []byte {
	var conn []byte
	for k, v := range h.All() {
		if hopIndex(k) == 0 && !strings.EqualFold(b2s(v), "keep-alive") && !strings.EqualFold(b2s(v), "close") {
			conn = append(conn, v...)
			conn = append(conn, ',')
		}
	}
	return conn
}

// forwardable reports whether a response header goes past the proxy: not
// hop-by-hop, and not named in Connection (conn, from connectionTokens).
func forwardable(k, conn []byte) bool {
	return !isHop(k) && (len(conn) == 0 || !containsToken([][]byte{conn}, b2s(k)))
}

// containsToken reports whether the comma-separated header values hold
// token (case-insensitive).
func containsToken(values [][]byte, token string) bool {
	for _, v := range values {
		for f := range strings.SplitSeq(b2s(v), ",") {
			if f, _, _ = strings.Cut(f, ";"); strings.EqualFold(strings.TrimSpace(f), token) {
				return true
			}
		}
	}
	return false
}

// cleanQueryParams drops query parameters Go cannot parse (';' separators,
// bad escapes) by re-encoding, as ReverseProxy does for Rewrite proxies, so
// the backend cannot read a query differently than the proxy did.
func cleanQueryParams(s string) string {
	reencode := func(s string) string {
		v, _ := url.ParseQuery(s)
		return v.Encode()
	}
	for i := 0; i < len(s); {
		switch s[i] {
		case ';':
			return reencode(s)
		case '%':
			if i+2 >= len(s) || !ishex(s[i+1]) || !ishex(s[i+2]) {
				return reencode(s)
			}
			i += 3
		default:
			i++
		}
	}
	return s
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
