package proxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// forward proxies r to a plain-HTTP backend on the calling goroutine, doing
// what httputil.ReverseProxy (with Rewrite and SetXForwarded) does for such
// requests, with less work per request: one pass over the request headers
// that drops hop-by-hop and client-sent forwarding headers and shares the
// remaining value slices instead of cloning them, no outgoing context, no
// client trace, and the token watch installed directly instead of through
// a context value and ModifyResponse. Measured: see docs/benchmarks.md.
// Protocol upgrades and Expect: 100-continue still go through the
// ReverseProxy (be.rp), which handles 101 and interim responses.
//
// inBody is the server's request body, before PrepareRequest may have
// replaced it with one in memory.
func (dp *Dataplane) forward(rw *respWriter, r *http.Request, be *backend, inBody io.ReadCloser) {
	out := new(http.Request)
	*out = *r
	u := *r.URL
	u.Scheme, u.Host = "http", be.addr
	u.RawQuery = cleanQueryParams(u.RawQuery)
	out.URL = &u
	out.RequestURI = ""
	out.Close = false
	switch {
	case r.ContentLength == 0:
		out.Body = nil // a client request with a nil body sends no body
	case out.Body != inBody:
		// Already in memory (PrepareRequest): Request.Write sends it with
		// the headers in one write.
	case r.ContentLength > 0 && r.ContentLength <= maxBufferedBody:
		// Request.Write flushes the headers on their own before a body it
		// does not know to be in memory, which costs a second write here
		// and a second read and wake-up at the backend. Small bodies of
		// known length are read first (nginx buffers request bodies too),
		// so headers and body leave in one write.
		buf := dp.bufs.Get()
		defer dp.bufs.Put(buf)
		n, err := io.ReadFull(inBody, buf[:r.ContentLength])
		if err != nil {
			dp.backendError(rw, r, err)
			return
		}
		out.Body = io.NopCloser(bytes.NewReader(buf[:n]))
	default:
		// Request.Write closes the body it sends, and closing the server's
		// request body early can block reading the rest of it from the
		// client; the server closes it after the handler.
		out.Body = noCloseBody{out.Body}
	}
	if be.ai {
		out.Host = be.addr
	}
	out.Header = forwardHeader(r)

	resp, err := be.direct.RoundTrip(out)
	if err != nil {
		dp.backendError(rw, r, err)
		return
	}
	if rw.rt.tokens {
		dp.watchTokens(rw, resp)
	}
	removeHopByHop(resp.Header)
	dst := rw.Header()
	for k, vv := range resp.Header {
		if cur, ok := dst[k]; ok {
			dst[k] = append(cur, vv...)
		} else {
			dst[k] = vv
		}
	}
	announced := len(resp.Trailer)
	if announced > 0 {
		keys := make([]string, 0, announced)
		for k := range resp.Trailer {
			keys = append(keys, k)
		}
		dst.Add("Trailer", strings.Join(keys, ", "))
	}
	rw.WriteHeader(resp.StatusCode)

	// As ReverseProxy does: streamed bodies (SSE, unknown length) are
	// flushed after every write, so they pass through chunk by chunk; fixed
	// length bodies go out with the headers in one write when they fit.
	stream := resp.ContentLength == -1
	if !stream {
		ct, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
		stream = strings.EqualFold(strings.TrimSpace(ct), "text/event-stream")
	}
	if err := dp.copyBody(rw, resp.Body, stream); err != nil {
		resp.Body.Close()
		// The status is gone; the only way to tell the client the body is
		// incomplete is to abort the connection, as ReverseProxy does.
		panic(http.ErrAbortHandler)
	}
	resp.Body.Close()
	if len(resp.Trailer) > 0 {
		// Forces chunking, so net/http does not compute a Content-Length.
		_ = rw.FlushError()
	}
	if len(resp.Trailer) == announced {
		for k, vv := range resp.Trailer {
			dst[k] = append(dst[k], vv...)
		}
		return
	}
	for k, vv := range resp.Trailer {
		k = http.TrailerPrefix + k
		dst[k] = append(dst[k], vv...)
	}
}

// maxBufferedBody is the largest request body forward reads before sending.
const maxBufferedBody = 16 << 10

// noCloseBody is a request body whose Close does nothing.
type noCloseBody struct{ io.Reader }

func (noCloseBody) Close() error { return nil }

// copyBody copies body to rw with a pooled buffer, flushing after every
// write when stream is set. It returns read (other than EOF) and write errors.
func (dp *Dataplane) copyBody(rw *respWriter, body io.Reader, stream bool) error {
	if body == http.NoBody {
		return nil
	}
	buf := dp.bufs.Get()
	defer dp.bufs.Put(buf)
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if _, werr := rw.Write(buf[:n]); werr != nil {
				return werr
			}
			if stream {
				if err := rw.FlushError(); err != nil {
					return err
				}
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				dp.log.Debug("read error during body copy", "err", rerr)
			}
			return rerr
		}
	}
}

// hopHeaders are the hop-by-hop headers of RFC 9110 section 7.6.1 (and the
// obsolete ones ReverseProxy also removes).
var hopHeaders = [...]string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func isHop(k string) bool {
	for _, h := range hopHeaders {
		if k == h {
			return true
		}
	}
	return false
}

// forwardHeader is the outgoing request's header: r's without hop-by-hop
// headers (those of RFC 9110 and those named in Connection), without the
// client's Forwarded and X-Forwarded-*, with X-Forwarded-For (the client's
// address), -Host and -Proto set as a Rewrite ReverseProxy calling
// httputil.ProxyRequest.SetXForwarded sets them. Value slices
// are shared with r.Header, which nothing changes while the request is
// forwarded.
func forwardHeader(r *http.Request) http.Header {
	in := r.Header
	conn := in["Connection"]
	h := make(http.Header, len(in)+3)
	for k, vv := range in {
		switch k {
		case "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto":
			continue
		}
		if isHop(k) || (len(conn) > 0 && connectionListed(conn, k)) {
			continue
		}
		h[k] = vv
	}
	// Te: trailers is the one Te value a proxy passes on.
	if containsToken(in["Te"], "trailers") {
		h["Te"] = teTrailers
	}
	if _, ok := h["User-Agent"]; !ok {
		// Keeps Request.Write from sending Go's own User-Agent.
		h["User-Agent"] = emptyValue
	}
	// The client's own X-Forwarded-For is dropped, not extended: a Rewrite
	// ReverseProxy strips it before SetXForwarded, which then has no prior
	// value to append to.
	if clientIP, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		h["X-Forwarded-For"] = []string{clientIP}
	}
	h["X-Forwarded-Host"] = []string{r.Host}
	if r.TLS == nil {
		h["X-Forwarded-Proto"] = protoHTTP
	} else {
		h["X-Forwarded-Proto"] = protoHTTPS
	}
	return h
}

// Shared read-only header values; Request.Write only reads them.
var (
	teTrailers = []string{"trailers"}
	emptyValue = []string{""}
	protoHTTP  = []string{"http"}
	protoHTTPS = []string{"https"}
)

// connectionListed reports whether the Connection header values name k.
func connectionListed(conn []string, k string) bool {
	for _, v := range conn {
		for f := range strings.SplitSeq(v, ",") {
			if f = textprotoTrim(f); f != "" && http.CanonicalHeaderKey(f) == k {
				return true
			}
		}
	}
	return false
}

// containsToken reports whether the comma-separated header values hold
// token (case-insensitive).
func containsToken(values []string, token string) bool {
	for _, v := range values {
		for f := range strings.SplitSeq(v, ",") {
			if f, _, _ = strings.Cut(f, ";"); strings.EqualFold(textprotoTrim(f), token) {
				return true
			}
		}
	}
	return false
}

func textprotoTrim(s string) string { return strings.Trim(s, " \t") }

// removeHopByHop deletes hop-by-hop headers from a backend response.
func removeHopByHop(h http.Header) {
	for _, f := range h["Connection"] {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = textprotoTrim(sf); sf != "" {
				h.Del(sf)
			}
		}
	}
	for _, k := range hopHeaders {
		delete(h, k)
	}
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
