package proxy

import (
	"iter"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"
)

// b2s views b as a string without copying. The data plane only uses it on
// request bytes that fasthttp keeps unchanged until the handler returns,
// and never keeps the strings past that.
func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// reqView is what route matching reads of a request, prepared once per
// request without copying: method, the percent-decoded path as net/http's
// URL.Path has it (not normalised: /a/../b stays as sent), and the
// lower-case host without port.
type reqView struct {
	req    *fasthttp.Request
	method string
	path   string
	host   string
}

func newView(req *fasthttp.Request) reqView {
	path, _ := splitRequestURI(b2s(req.Header.RequestURI()))
	if strings.IndexByte(path, '%') >= 0 {
		if p, err := url.PathUnescape(path); err == nil {
			path = p
		}
	}
	return reqView{req: req, method: b2s(req.Header.Method()), path: path, host: hostOnly(b2s(req.Header.Host()))}
}

// header returns the first value of a header and whether the request has it.
func (v *reqView) header(name string) (string, bool) {
	b, ok := peekFold(&v.req.Header, name)
	return b2s(b), ok
}

// Header names are kept as received (fasthttp's normalising is off: it costs
// on every header of every request and response, and a proxy passes names
// on as they came), so lookups by name compare without regard to case.

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

// delFold deletes every header named name, in any case.
func delFold(h headers, name string) {
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

// splitRequestURI splits a request target into its path and query, taking
// the path out of the absolute form (http://host/path) a client may send.
func splitRequestURI(uri string) (path, query string) {
	if !strings.HasPrefix(uri, "/") {
		if i := strings.Index(uri, "://"); i >= 0 {
			rest := uri[i+3:]
			if j := strings.IndexAny(rest, "/?"); j >= 0 {
				uri = rest[j:]
			} else {
				uri = ""
			}
		}
	}
	path, query, _ = strings.Cut(uri, "?")
	if path == "" {
		path = "/"
	}
	return path, query
}

// hostOnly is a Host header lower-cased and without port.
func hostOnly(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(h)
		}
	}
	return h
}

// requestInfo is the `request` of a requestSnapshot, and what a CEL trace
// filter sees: method, uri, path, pathAndQuery, host, scheme, version and
// the headers (lower-case names, repeated values joined with ",").
// start, when set, is added as startTime.
func requestInfo(ctx *fasthttp.RequestCtx, start time.Time) map[string]any {
	req := &ctx.Request
	scheme := "http"
	if ctx.IsTLS() {
		scheme = "https"
	}
	path, query := splitRequestURI(string(req.Header.RequestURI()))
	decoded := path
	if p, err := url.PathUnescape(path); err == nil {
		decoded = p
	}
	pq := path
	if query != "" {
		pq += "?" + query
	}
	host := string(req.Header.Host())
	m := map[string]any{
		"method":       string(req.Header.Method()),
		"uri":          scheme + "://" + host + pq,
		"path":         decoded,
		"pathAndQuery": pq,
		"host":         host,
		"scheme":       scheme,
		"version":      string(req.Header.Protocol()),
		"headers":      headerMap(&req.Header),
	}
	if !start.IsZero() {
		m["startTime"] = start.UTC().Format(time.RFC3339Nano)
	}
	return m
}

// headerMap renders headers (of a request or a response) as lower-case
// name to value, joining repeats with ",", as HTTP/1.1 sent them (Host
// included). It is for traces only: it allocates.
func headerMap(h headers) map[string]any {
	m := map[string]any{}
	for k, v := range h.All() {
		addHeader(m, k, v)
	}
	return m
}

func addHeader(m map[string]any, k, v []byte) {
	key := strings.ToLower(string(k))
	if prev, ok := m[key]; ok {
		m[key] = prev.(string) + "," + string(v)
		return
	}
	m[key] = string(v)
}

// remoteHostPort is the client's address as host and port.
func remoteHostPort(ctx *fasthttp.RequestCtx) (string, int) {
	if a, ok := ctx.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String(), a.Port
	}
	return ctx.RemoteAddr().String(), 0
}
