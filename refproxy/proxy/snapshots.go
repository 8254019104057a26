// Trace snapshots: the requestState and responseState of spec part 2.1,
// built only for traced requests.
package proxy

import (
	"net"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/gwdiag/gwdiag/golden/trace"
	reftrace "github.com/gwdiag/gwdiag/refproxy/trace"
)

// Snapshots are captured (refproxy/trace.Capture) and rendered by the
// functions below: at once for a request a watcher takes whole, at
// requestFinished for one only outcome filters watch, if one keeps it.
// The request's method, URI, host, protocol and headers are copied when
// captured, since the proxy rewrites them and fasthttp reuses their
// bytes; the backend, the config table (sensitive headers), the client's
// address and the data plane are held by reference.

// captureRequest captures the request for a requestSnapshot at stage (be
// is set at the final request).
func (dp *Dataplane) captureRequest(ctx *fasthttp.RequestCtx, tr *reftrace.Tracer, stage string, be *backend) reftrace.Capture {
	req := &ctx.Request
	c := reftrace.Capture{Render: renderRequestSnapshot, Str: stage, Flag: ctx.IsTLS()}
	c.Refs[0], c.Refs[1], c.Refs[2] = dp, dp.table.Load(), ctx.RemoteAddr()
	if be != nil {
		c.Refs[3] = be
	}
	c.Spans[0] = tr.Copy(req.Header.Method())
	c.Spans[1] = tr.Copy(req.Header.RequestURI())
	c.Spans[2] = tr.Copy(req.Header.Host())
	c.Spans[3] = tr.Copy(req.Header.Protocol())
	p := tr.PairsStart()
	for k, v := range req.Header.All() {
		tr.AddPair(k, v)
	}
	c.Pairs = tr.PairsEnd(p)
	return c
}

// traceRequest traces a requestSnapshot at stage.
func (dp *Dataplane) traceRequest(ctx *fasthttp.RequestCtx, tr *reftrace.Tracer, stage string, be *backend) {
	tr.Record(trace.SeverityInfo, trace.RequestSnapshot, nil, dp.captureRequest(ctx, tr, stage, be))
}

func renderRequestSnapshot(tr *reftrace.Tracer, c reftrace.Capture) map[string]any {
	if prev, st := tr.Memo(); st != nil && sameRequest(tr, prev, c) {
		// The request did not change since the last snapshot (most route
		// policies stages): its state is shared, as gateway policies'.
		return map[string]any{"stage": c.Str, "requestState": st}
	}
	st := renderRequestState(tr, c)
	tr.SetMemo(c, st)
	return map[string]any{"stage": c.Str, "requestState": st}
}

// sameRequest reports whether two request snapshot captures hold the same
// request, client, config table and backend.
func sameRequest(tr *reftrace.Tracer, a, b reftrace.Capture) bool {
	if a.Flag != b.Flag || a.Refs[0] != b.Refs[0] || a.Refs[1] != b.Refs[1] || a.Refs[3] != b.Refs[3] {
		return false // the data plane, the config table, the backend: pointers
	}
	// The client's address, compared only as the pointer net gives (an
	// interface of another type could panic when compared).
	if pa, ok := a.Refs[2].(*net.TCPAddr); !ok || pa != b.Refs[2] {
		return false
	}
	for i := range a.Spans {
		if !tr.SameBytes(a.Spans[i], b.Spans[i]) {
			return false
		}
	}
	return tr.SamePairs(a.Pairs, b.Pairs)
}

// renderRequestState is a request snapshot's requestState.
func renderRequestState(tr *reftrace.Tracer, c reftrace.Capture) map[string]any {
	dp := c.Refs[0].(*Dataplane)
	table, _ := c.Refs[1].(*Table)
	addr, _ := c.Refs[2].(net.Addr)
	be, _ := c.Refs[3].(*backend)
	hs := map[string]any{}
	tr.EachPair(c.Pairs, func(k, v []byte) { addHeader(hs, k, v) })
	req := requestInfoOf(tr.String(c.Spans[0]), tr.String(c.Spans[1]), tr.String(c.Spans[2]), tr.String(c.Spans[3]), c.Flag, hs, tr.StartTime())
	return dp.stateOf(req, table, addr, be)
}

// renderSameState is a requestSnapshot at stage c.Str whose state is the
// previous snapshot's, shared.
func renderSameState(tr *reftrace.Tracer, c reftrace.Capture) map[string]any {
	return map[string]any{"stage": c.Str, "requestState": tr.Previous()["requestState"]}
}

// captureResponse captures a response's status and headers for a
// responseSnapshot at stage; backend: as the proxy takes the backend's
// (without hop-by-hop headers).
func (dp *Dataplane) captureResponse(tr *reftrace.Tracer, stage string, code int, h *fasthttp.ResponseHeader, backend bool) reftrace.Capture {
	c := reftrace.Capture{Render: renderResponseSnapshot, Str: stage, Code: code}
	c.Refs[0] = dp
	var conn []byte
	if backend {
		conn = connectionTokens(h)
	}
	p := tr.PairsStart()
	for k, v := range h.All() {
		if !backend || forwardable(k, conn) {
			tr.AddPair(k, v)
		}
	}
	c.Pairs = tr.PairsEnd(p)
	return c
}

// traceResponse traces a responseSnapshot at stage (see captureResponse).
func (dp *Dataplane) traceResponse(tr *reftrace.Tracer, stage string, code int, h *fasthttp.ResponseHeader, backend bool) {
	tr.Record(trace.SeverityInfo, trace.ResponseSnapshot, nil, dp.captureResponse(tr, stage, code, h, backend))
}

func renderResponseSnapshot(tr *reftrace.Tracer, c reftrace.Capture) map[string]any {
	hs := map[string]any{}
	tr.EachPair(c.Pairs, func(k, v []byte) { addHeader(hs, k, v) })
	return map[string]any{"stage": c.Str, "requestState": c.Refs[0].(*Dataplane).responseState(c.Code, hs)}
}

// stateOf is requestSnapshot.requestState from the request's `request`
// (requestInfo), the config table, the client's address and the backend
// (set at the final request).
func (dp *Dataplane) stateOf(req map[string]any, t *Table, addr net.Addr, be *backend) map[string]any {
	host, port := hostPort(addr)
	h, p := any(host), any(port) // boxed once, shown twice
	if t != nil && t.sensitive != nil {
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
		"source":  map[string]any{"address": h, "port": p, "rawAddress": h, "rawPort": p},
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
	scheme := "http"
	if tls {
		scheme = "https"
	}
	path, query := splitRequestURI(uri)
	decoded := path
	if p, err := url.PathUnescape(path); err == nil {
		decoded = p
	}
	pq := path
	if query != "" {
		pq += "?" + query
	}
	// Sized for every key: a ninth would grow the map.
	m := make(map[string]any, 9)
	m["method"], m["uri"], m["path"], m["pathAndQuery"] = method, scheme+"://"+host+pq, decoded, pq
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
	// An ASCII name is lower-cased on the stack (one string, not two);
	// another, as strings.ToLower does it.
	var lower [64]byte
	lk := lower[:0]
	for _, c := range k {
		if c >= utf8.RuneSelf || len(lk) == len(lower) {
			lk = []byte(strings.ToLower(string(k)))
			break
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lk = append(lk, c)
	}
	if prev, ok := m[string(lk)]; ok {
		m[string(lk)] = prev.(string) + "," + string(v)
		return
	}
	m[string(lk)] = string(v)
}

// hostPort is the client's address as host and port.
func hostPort(addr net.Addr) (string, int) {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.IP.String(), a.Port
	}
	return addr.String(), 0
}
