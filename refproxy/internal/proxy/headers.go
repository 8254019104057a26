// Headers: the rules of forwarding, as httputil.ReverseProxy has them
// (hop-by-hop headers out, X-Forwarded-* in, response headers copied), and
// at the end the lookups of a header by name in any case, which the whole
// data plane uses.
package proxy

import (
	"iter"
	"net"
	"net/url"
	"slices"
	"strings"
	"unsafe"

	"github.com/valyala/fasthttp"
)

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
	uri := ctx.Request.URI()
	if be.ai {
		h.SetHost(be.addr)
		if be.apiKey != "" {
			// A credential of the trace (serve registers it: AddSecret).
			delFold(h, "Authorization")
			h.Set("Authorization", "Bearer "+be.apiKey)
		}
		if p := aiPath(be, b2s(uri.Path())); p != "" {
			uri.SetPath(p)
		}
	}
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

// isUpgrade reports whether the request asks for a protocol upgrade
// (WebSocket and the like).
func isUpgrade(h *fasthttp.RequestHeader) bool {
	up, ok := peekFold(h, "Upgrade")
	return ok && len(up) > 0 && containsToken(valuesFold(h, "Connection"), "upgrade")
}

// isEventStream reports whether a Content-Type is text/event-stream, which
// always streams.
func isEventStream(ct []byte) bool {
	mt, _, _ := strings.Cut(b2s(ct), ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
}

// aiPath is the path an AI backend's pathOverride or pathPrefix makes of
// the request's ("" when it has neither): pathPrefix replaces the OpenAI
// base path /v1, so that prefix /openai/v1 sends /v1/chat/completions to
// /openai/v1/chat/completions, and prefix / to /chat/completions.
func aiPath(be *backend, path string) string {
	switch {
	case be.pathOverride != "":
		return be.pathOverride
	case be.pathPrefix != "":
		rest := path
		if r, ok := strings.CutPrefix(path, "/v1"); ok && (r == "" || r[0] == '/') {
			rest = r
		}
		if p := strings.TrimSuffix(be.pathPrefix, "/") + rest; p != "" {
			return p
		}
		return "/"
	}
	return ""
}

// b2s views b as a string without copying. The data plane only uses it on
// request bytes that fasthttp keeps unchanged until the handler returns,
// and never keeps the strings past that.
func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// headers is what the lookups need of a request's or a response's headers.
type headers interface {
	All() iter.Seq2[[]byte, []byte]
	Del(key string)
}

// peekFold returns the first value of the request header named name, in
// any case, and whether there is one. It takes the concrete type: ranging
// over All through an interface would allocate on every request.
func peekFold(h *fasthttp.RequestHeader, name string) ([]byte, bool) {
	for k, v := range h.All() {
		if len(k) == len(name) && strings.EqualFold(b2s(k), name) {
			return v, true
		}
	}
	return nil, false
}

// firstFold is peekFold for any header, off the request path.
func firstFold(h headers, name string) ([]byte, bool) {
	if vs := valuesFold(h, name); len(vs) > 0 {
		return vs[0], true
	}
	return nil, false
}

// valuesFold returns every value of the header named name, in any case.
func valuesFold(h headers, name string) [][]byte {
	var out [][]byte
	for k, v := range h.All() {
		if len(k) == len(name) && strings.EqualFold(b2s(k), name) {
			out = append(out, v)
		}
	}
	return out
}

// delFold deletes every header named name, in any case. On the request
// path it finds them one at a time through the concrete type's All and
// deletes each by the name it has: collecting the names, or ranging
// through the interface, allocates on every call
// (TestServePoliciesAllocations), and most calls find none.
func delFold(h headers, name string) {
	for range maxFoldRounds {
		var k []byte
		switch h := h.(type) {
		case *fasthttp.RequestHeader:
			k = requestKeyFold(h, name)
		case *fasthttp.ResponseHeader:
			k = responseKeyFold(h, name)
		default:
			delFoldAny(h, name)
			return
		}
		if k == nil {
			return
		}
		h.Del(string(k))
	}
	delFoldAny(h, name)
}

// maxFoldRounds bounds delFold's deletions one name at a time; a header
// with more fields of the name (in as many cases) is left to delFoldAny.
const maxFoldRounds = 8

// delFoldAny is delFold through the interface: the names collected, then
// deleted.
func delFoldAny(h headers, name string) {
	var keys []string
	for k := range h.All() {
		if len(k) == len(name) && strings.EqualFold(b2s(k), name) && !slices.Contains(keys, string(k)) {
			keys = append(keys, string(k))
		}
	}
	for _, k := range keys {
		h.Del(k)
	}
}

// requestKeyFold is the name, as the request has it, of its first header
// named name in any case; nil if there is none.
func requestKeyFold(h *fasthttp.RequestHeader, name string) []byte {
	for k := range h.All() {
		if len(k) == len(name) && strings.EqualFold(b2s(k), name) {
			return k
		}
	}
	return nil
}

// responseKeyFold is requestKeyFold for a response.
func responseKeyFold(h *fasthttp.ResponseHeader, name string) []byte {
	for k := range h.All() {
		if len(k) == len(name) && strings.EqualFold(b2s(k), name) {
			return k
		}
	}
	return nil
}
