// Trace snapshots: the requestState and responseState of spec part 2.1,
// built only for traced requests.
package proxy

import (
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// requestState is requestSnapshot.requestState; be is set at the final request.
func (dp *Dataplane) requestState(ctx *fasthttp.RequestCtx, start time.Time, be *backend) map[string]any {
	host, port := remoteHostPort(ctx)
	req := requestInfo(ctx, start)
	if t := dp.table.Load(); t != nil && t.sensitive != nil {
		// config.sensitiveHeaders: their values stay out of traces.
		if hs, ok := req["headers"].(map[string]any); ok {
			for k := range hs {
				if t.sensitive[k] {
					hs[k] = "<redacted>"
				}
			}
		}
	}
	st := map[string]any{
		"request": req,
		"source":  map[string]any{"address": host, "port": port, "rawAddress": host, "rawPort": port},
	}
	if be != nil {
		st["backend"] = map[string]any{"name": be.name, "type": be.traceType, "protocol": "http"}
	}
	if dp.opts.Env != nil {
		st["env"] = dp.opts.Env
	}
	return st
}

func (dp *Dataplane) responseState(code int, headers map[string]any) map[string]any {
	st := map[string]any{"response": map[string]any{"code": code, "headers": headers}}
	if dp.opts.Env != nil {
		st["env"] = dp.opts.Env
	}
	return st
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
