// Trace snapshots: the requestState and responseState of spec part 2.1,
// built only for traced requests.
package proxy

import (
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/redact"
	"github.com/gwdiag/gwdiag/refproxy/internal/tracing"
)

// Snapshots are captured (refproxy/internal/tracing.Capture) and rendered by the
// functions below: at once for a request a watcher takes whole, at
// requestFinished for one only outcome filters watch, if one keeps it.
// The request's method, URI, host, protocol and headers are copied when
// captured, since the proxy rewrites them and fasthttp reuses their
// bytes; the backend, the config table, the client's address and the
// data plane are held by reference. The values of credential headers are
// redacted as the trace's Redaction says (refproxy/internal/tracing/redaction.go),
// in requests and responses alike.

// captureRequest captures the request for a requestSnapshot at stage (be
// is set at the final request).
func (dp *Dataplane) captureRequest(ctx *fasthttp.RequestCtx, tr *tracing.Tracer, stage string, be *backend) tracing.Capture {
	req := &ctx.Request
	c := tracing.Capture{Render: renderRequestSnapshot, Str: stage, Flag: ctx.IsTLS()}
	c.Refs[0], c.Refs[1], c.Refs[2] = dp, dp.table.Load(), ctx.RemoteAddr()
	if be != nil {
		c.Refs[3] = be
	}
	h := &req.Header
	if spans, p, ok := tr.Kept(); ok && sameAsKept(tr, spans, p, h) {
		// Unchanged since the last snapshot (most stages): its bytes, shared.
		c.Spans, c.Pairs = spans, p
		return c
	}
	c.Spans[0] = tr.Copy(h.Method())
	c.Spans[1] = tr.Copy(h.RequestURI())
	c.Spans[2] = tr.Copy(h.Host())
	c.Spans[3] = tr.Copy(h.Protocol())
	p := tr.PairsStart()
	for k, v := range h.All() {
		tr.AddPair(k, v)
	}
	c.Pairs = tr.PairsEnd(p)
	tr.Keep(c.Spans, c.Pairs)
	return c
}

// sameAsKept reports whether the request's method, URI, host, protocol
// and headers (in order) are the bytes a capture kept (spans, p).
func sameAsKept(tr *tracing.Tracer, spans [4]tracing.Span, p tracing.Pairs, h *fasthttp.RequestHeader) bool {
	if !tr.Holds(spans[0], h.Method()) || !tr.Holds(spans[1], h.RequestURI()) ||
		!tr.Holds(spans[2], h.Host()) || !tr.Holds(spans[3], h.Protocol()) {
		return false
	}
	i, n := 0, p.Len()
	for k, v := range h.All() {
		if i == n {
			return false
		}
		kk, kv := tr.Pair(p, i)
		if string(k) != string(kk) || string(v) != string(kv) {
			return false
		}
		i++
	}
	return i == n
}

// traceRequest traces a requestSnapshot at stage.
func (dp *Dataplane) traceRequest(ctx *fasthttp.RequestCtx, tr *tracing.Tracer, stage string, be *backend) {
	tr.Record(trace.SeverityInfo, trace.RequestSnapshot, nil, dp.captureRequest(ctx, tr, stage, be))
}

// renderRequestSnapshot is a requestSnapshot's requestState and stage.
func renderRequestSnapshot(b []byte, tr *tracing.Tracer, c tracing.Capture) []byte {
	b = append(b, `"requestState":`...)
	if prev, st, ok := tr.Memo(); ok && sameRequest(tr, prev, c) {
		// The request did not change since the last snapshot (most route
		// policies stages): its state is shared, as gateway policies'.
		b = append(b, tr.Bytes(st)...)
	} else {
		at := len(b)
		b = appendRequestState(b, tr, c)
		tr.SetMemo(c, tr.Copy(b[at:]))
	}
	b = append(b, `,"stage":`...)
	return tracing.AppendString(b, c.Str)
}

// sameRequest reports whether two request snapshot captures hold the same
// request, client, config table and backend.
func sameRequest(tr *tracing.Tracer, a, b tracing.Capture) bool {
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

// appendRequestState appends a request snapshot's requestState, written
// straight to JSON: what encoding/json writes for the map of spec part 2.1
// (keys sorted), without building it. TestRequestStateMatchesMaps holds
// it to the maps.
func appendRequestState(b []byte, tr *tracing.Tracer, c tracing.Capture) []byte {
	dp := c.Refs[0].(*Dataplane)
	addr, _ := c.Refs[2].(net.Addr)
	be, _ := c.Refs[3].(*backend)
	b = append(b, '{')
	if be != nil {
		b = append(b, `"backend":{"name":`...)
		b = tracing.AppendString(b, be.name)
		b = append(b, `,"protocol":"http","type":`...)
		b = tracing.AppendString(b, be.traceType)
		b = append(b, "},"...)
	}
	b = dp.appendEnv(b)
	b = append(b, `"request":`...)
	b = appendRequestInfo(b, tr, c)
	host, port := hostPort(addr)
	b = append(b, `,"source":{"address":`...)
	b = tracing.AppendString(b, host)
	b = append(b, `,"port":`...)
	b = strconv.AppendInt(b, int64(port), 10)
	b = append(b, `,"rawAddress":`...)
	b = tracing.AppendString(b, host)
	b = append(b, `,"rawPort":`...)
	b = strconv.AppendInt(b, int64(port), 10)
	return append(b, "}}"...)
}

// appendEnv appends `"env":{...},` when the data plane has a cluster
// identity.
func (dp *Dataplane) appendEnv(b []byte) []byte {
	if dp.opts.Env == nil {
		return b
	}
	at := len(b)
	b = append(b, `"env":`...)
	b, ok := tracing.AppendValue(b, dp.opts.Env)
	if !ok {
		return b[:at] // not JSON: left out rather than a broken event
	}
	return append(b, ',')
}

// appendRequestInfo appends a snapshot's `request` (requestInfoOf, as
// JSON) from a captured request: method, URI, host and protocol in
// c.Spans, headers in c.Pairs; the values of credential headers redacted.
func appendRequestInfo(b []byte, tr *tracing.Tracer, c tracing.Capture) []byte {
	method, uri, host, proto := tr.Bytes(c.Spans[0]), tr.Bytes(c.Spans[1]), tr.Bytes(c.Spans[2]), tr.Bytes(c.Spans[3])
	scheme := schemeOf(c.Flag)
	path, query := splitRequestURI(b2s(uri))
	if query != "" {
		query = redactQuery(tr, query)
	}
	decoded := decodePath(path)
	b = append(b, `{"headers":`...)
	b = appendHeaders(b, tr, c.Pairs)
	b = append(b, `,"host":`...)
	b = tracing.AppendString(b, b2s(host))
	b = append(b, `,"method":`...)
	b = tracing.AppendString(b, b2s(method))
	b = append(b, `,"path":`...)
	b = tracing.AppendString(b, decoded)
	// pathAndQuery and uri, built on the stack (a long one spills).
	var scratch [256]byte
	u := append(scratch[:0], scheme...)
	u = append(u, "://"...)
	u = append(u, host...)
	hostEnd := len(u)
	u = append(u, path...)
	if query != "" {
		u = append(u, '?')
		u = append(u, query...)
	}
	b = append(b, `,"pathAndQuery":`...)
	b = tracing.AppendString(b, b2s(u[hostEnd:]))
	b = append(b, `,"scheme":`...)
	b = tracing.AppendString(b, scheme)
	b = append(b, `,"startTime":`...)
	b = tracing.AppendString(b, tr.StartTime())
	b = append(b, `,"uri":`...)
	b = tracing.AppendString(b, b2s(u))
	b = append(b, `,"version":`...)
	b = tracing.AppendString(b, b2s(proto))
	return append(b, '}')
}

// snapHeader is one captured header of a snapshot: its name lower-cased
// (a view of appendHeaders' scratch names) and its value.
type snapHeader struct {
	name  string
	value []byte
}

// appendHeaders appends captured headers as a snapshot shows them (as
// headerMap's map encodes): lower-case names in order, a repeated name's
// values joined with "," in the order they came, the values of the
// trace's credential headers redacted. A request's few headers (up to 32)
// are lowered and sorted on the stack, by insertion (a sort taking a
// function would move them to the heap); more are sorted by
// slices.SortStableFunc.
func appendHeaders(b []byte, tr *tracing.Tracer, p tracing.Pairs) []byte {
	var hsArr [32]snapHeader
	var namesArr [1024]byte
	rd := tr.Redaction()
	if p.Len() > len(hsArr) {
		hs := lowerHeaders(tr, p)
		slices.SortStableFunc(hs, func(a, c snapHeader) int { return strings.Compare(a.name, c.name) })
		return writeHeaders(b, tr, hs, rd)
	}
	// Stored into the array itself: what is stored through a slice moves
	// to the heap.
	n, names := p.Len(), namesArr[:0]
	for i := range n {
		k, v := tr.Pair(p, i)
		at := len(names)
		names = appendLower(names, k)
		hsArr[i] = snapHeader{name: b2s(names[at:]), value: v}
	}
	for i := 1; i < n; i++ {
		for j := i; j > 0 && hsArr[j].name < hsArr[j-1].name; j-- {
			hsArr[j], hsArr[j-1] = hsArr[j-1], hsArr[j]
		}
	}
	return writeHeaders(b, tr, hsArr[:n], rd)
}

// lowerHeaders is the pairs of p with their names lower-cased.
func lowerHeaders(tr *tracing.Tracer, p tracing.Pairs) []snapHeader {
	hs, names := make([]snapHeader, 0, p.Len()), []byte(nil)
	for i := range p.Len() {
		k, v := tr.Pair(p, i)
		at := len(names)
		names = appendLower(names, k)
		hs = append(hs, snapHeader{name: b2s(names[at:]), value: v})
	}
	return hs
}

// writeHeaders writes headers sorted by name as a JSON object, joining
// the values of a repeated name; the value of a header rd redacts is
// written as the redact package redacts it (the scheme of an
// authorization, the names of cookies and the attributes of a set-cookie
// kept, each secret a keyed fingerprint).
func writeHeaders(b []byte, tr *tracing.Tracer, hs []snapHeader, rd *tracing.Redaction) []byte {
	b = append(b, '{')
	for i := 0; i < len(hs); {
		k := hs[i].name
		if i > 0 {
			b = append(b, ',')
		}
		b = tracing.AppendString(b, k)
		b = append(b, ':')
		j := i + 1
		for j < len(hs) && hs[j].name == k {
			j++
		}
		var joined []byte
		if j == i+1 {
			joined = hs[i].value
		} else {
			for x, h := range hs[i:j] {
				if x > 0 {
					joined = append(joined, ',')
				}
				joined = append(joined, h.value...)
			}
		}
		if rd.SensitiveLower(k) {
			var vb [128]byte
			b = tracing.AppendString(b, b2s(tr.AppendRedacted(vb[:0], k, joined)))
		} else {
			b = tracing.AppendString(b, b2s(joined))
		}
		i = j
	}
	return append(b, '}')
}

// appendLower appends k lower-cased: ASCII byte by byte, anything else as
// strings.ToLower does it.
func appendLower(b, k []byte) []byte {
	for _, c := range k {
		if c >= utf8.RuneSelf {
			return append(b, strings.ToLower(b2s(k))...)
		}
	}
	for _, c := range k {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

// renderSameState is a requestSnapshot at stage c.Str whose state is the
// previous snapshot's (kept by renderRequestSnapshot), shared.
func renderSameState(b []byte, tr *tracing.Tracer, c tracing.Capture) []byte {
	b = append(b, `"requestState":`...)
	if _, st, ok := tr.Memo(); ok {
		b = append(b, tr.Bytes(st)...)
	} else {
		b = append(b, "null"...) // no snapshot before it: not from this proxy
	}
	b = append(b, `,"stage":`...)
	return tracing.AppendString(b, c.Str)
}

// captureResponse captures a response's status and headers for a
// responseSnapshot at stage; backend: as the proxy takes the backend's
// (without hop-by-hop headers).
func (dp *Dataplane) captureResponse(tr *tracing.Tracer, stage string, code int, h *fasthttp.ResponseHeader, backend bool) tracing.Capture {
	c := tracing.Capture{Render: renderResponseSnapshot, Str: stage, Code: code}
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
func (dp *Dataplane) traceResponse(tr *tracing.Tracer, stage string, code int, h *fasthttp.ResponseHeader, backend bool) {
	tr.Record(trace.SeverityInfo, trace.ResponseSnapshot, nil, dp.captureResponse(tr, stage, code, h, backend))
}

// renderResponseSnapshot is a responseSnapshot's requestState and stage.
func renderResponseSnapshot(b []byte, tr *tracing.Tracer, c tracing.Capture) []byte {
	b = append(b, `"requestState":`...)
	b = c.Refs[0].(*Dataplane).appendResponseState(b, tr, c)
	b = append(b, `,"stage":`...)
	return tracing.AppendString(b, c.Str)
}

// appendResponseState appends a response snapshot's requestState,
// written straight to JSON as appendRequestState: env, then the
// response's code and headers.
func (dp *Dataplane) appendResponseState(b []byte, tr *tracing.Tracer, c tracing.Capture) []byte {
	b = append(b, '{')
	b = dp.appendEnv(b)
	b = append(b, `"response":{"code":`...)
	b = strconv.AppendInt(b, int64(c.Code), 10)
	b = append(b, `,"headers":`...)
	b = appendHeaders(b, tr, c.Pairs)
	return append(b, "}}"...)
}

// hostPort is the client's address as host and port.
func hostPort(addr net.Addr) (string, int) {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.IP.String(), a.Port
	}
	return addr.String(), 0
}

// sensitiveParam reports whether red redacts the query parameter k, as a
// query has it (percent-encoded).
func sensitiveParam(red *redact.Redactor, k string) bool {
	if strings.ContainsAny(k, "%+") {
		var err error
		if k, err = url.QueryUnescape(k); err != nil {
			return false
		}
	}
	return red.SensitiveQuery(k)
}

// redactQuery is a request's query with the value of each parameter the
// trace's Redactor redacts (SensitiveQuery: redact.QueryDefaults and those
// the config's auth policies read there, in any case) replaced by its
// marker, and made a secret of the trace: the initial snapshot goes out
// before any policy has read the credential, and a short one would not be
// found by the scrubbing pass inside a URI. The query as it came
// otherwise.
func redactQuery(tr *tracing.Tracer, query string) string {
	rd := tr.Redaction()
	if rd == nil {
		return query
	}
	red := rd.Redactor()
	var out []byte
	last := 0
	for at := 0; at <= len(query); {
		end := strings.IndexByte(query[at:], '&')
		if end < 0 {
			end = len(query)
		} else {
			end += at
		}
		k, v, ok := strings.Cut(query[at:end], "=")
		if ok && v != "" && sensitiveParam(red, k) && !redact.HasMarker(v) {
			tr.AddSecret(v)
			if dv, err := url.QueryUnescape(v); err == nil && dv != v {
				tr.AddSecret(dv)
			}
			vs := at + len(k) + 1
			out = append(out, query[last:vs]...)
			out = red.AppendMarker(out, v)
			last = end
		}
		at = end + 1
	}
	if out == nil {
		return query
	}
	return string(append(out, query[last:]...))
}
