package proxy

import (
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// What the proxy's parts read of a request: route matching a no-copy
// view (reqView), CEL expressions and trace filters a map (activation,
// requestInfo); and the request line's helpers both use.

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

// requestInfo is the `request` of a requestSnapshot, and what a CEL trace
// filter sees: method, uri, path, pathAndQuery, host, scheme, version and
// the headers (lower-case names, repeated values joined with ",").
// start, when set, is added as startTime.
func requestInfo(ctx *fasthttp.RequestCtx, start time.Time) map[string]any {
	req := &ctx.Request
	return requestInfoOf(string(req.Header.Method()), string(req.Header.RequestURI()), string(req.Header.Host()),
		string(req.Header.Protocol()), ctx.IsTLS(), headerMap(&req.Header), startTime(start))
}

// startTime is a snapshot's startTime, or "" for none (zero).
func startTime(start time.Time) string {
	if start.IsZero() {
		return ""
	}
	return start.UTC().Format(time.RFC3339Nano)
}

// requestInfoOf is requestInfo from the request's parts; start, when set,
// is added as startTime.
func requestInfoOf(method, uri, host, proto string, tls bool, headers map[string]any, start string) map[string]any {
	scheme := schemeOf(tls)
	path, query := splitRequestURI(uri)
	pq := joinQuery(path, query)
	// Sized for every key: a ninth would grow the map.
	m := make(map[string]any, 9)
	m["method"], m["uri"], m["path"], m["pathAndQuery"] = method, scheme+"://"+host+pq, decodePath(path), pq
	m["host"], m["scheme"], m["version"], m["headers"] = host, scheme, proto, headers
	if start != "" {
		m["startTime"] = start
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
	// A short name is lower-cased on the stack (one string, not two).
	var lower [64]byte
	lk := appendLower(lower[:0], k)
	if prev, ok := m[string(lk)]; ok {
		m[string(lk)] = prev.(string) + "," + string(v)
		return
	}
	m[string(lk)] = string(v)
}

// sourceInfo is the client's address for descriptor expressions.
func sourceInfo(a net.Addr) map[string]any {
	m := map[string]any{"address": "", "port": int64(0)}
	if ta, ok := a.(*net.TCPAddr); ok {
		m["address"] = ta.IP.String()
		m["port"] = int64(ta.Port)
	}
	return m
}
