package proxy

import (
	"iter"
	"net/url"
	"slices"
	"strings"
	"unsafe"

	"github.com/valyala/fasthttp"
)

// b2s views b as a string without copying. The data plane only uses it on
// request bytes that fasthttp keeps unchanged until the handler returns,
// and never keeps the strings past that.
func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// reqView is what route matching reads of a request, prepared once per
// request without copying: method, the percent-decoded path as net/http's
// URL.Path has it (not normalised: /a/../b stays as sent), the raw query
// and the lower-case host without port.
type reqView struct {
	req    *fasthttp.Request
	method string
	path   string
	query  string
	host   string
}

func newView(req *fasthttp.Request) reqView {
	path, query := splitRequestURI(b2s(req.Header.RequestURI()))
	path = decodePath(path)
	return reqView{req: req, method: b2s(req.Header.Method()), path: path, query: query, host: hostOnly(b2s(req.Header.Host()))}
}

// header returns the first value of a header and whether the request has it.
func (v *reqView) header(name string) (string, bool) {
	b, ok := peekFold(&v.req.Header, name)
	return b2s(b), ok
}

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
// decodePath is a request path as routes match it and `request.path`
// shows it: percent-decoded, unless it does not decode (then as sent).
func decodePath(path string) string {
	if strings.IndexByte(path, '%') < 0 {
		return path
	}
	if p, err := url.PathUnescape(path); err == nil {
		return p
	}
	return path
}

// joinQuery is a request's pathAndQuery.
func joinQuery(path, query string) string {
	if query == "" {
		return path
	}
	return path + "?" + query
}

// schemeOf is a request's scheme.
func schemeOf(tls bool) string {
	if tls {
		return "https"
	}
	return "http"
}

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
