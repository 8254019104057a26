package proxy

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/refproxy/internal/llm"
	"github.com/gwdiag/gwdiag/refproxy/internal/tracing"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit"
)

var callPool = sync.Pool{New: func() any { return new(call) }}

// call is one request forwarded to a backend, from the backend call to the
// end of the response body: it adds the rate-limit headers, traces the
// backend's answer, and records the call when the body is done (or the
// client gone). As the response's body stream, it is read and then closed
// by the server once the body is written.
type call struct {
	dp *Dataplane
	tr *tracing.Tracer
	rt *route
	be *backend
	// held is the local limits that admitted the request (charged with
	// its tokens); cors what the route's cors policy decided.
	held  ratelimit.Held
	cors  corsResult
	d     ratelimit.Decision
	start time.Time
	// remote is what the global limits decided, kept to charge tokens.
	remote remoteResult

	resp  *fasthttp.Response // the backend's response; released by finish
	up    upBody
	ahead aheadBody     // a large body's first part, read before answering
	body  io.ReadCloser // &up, or the token watch around it
	// clientBody is the client's streamed request body, and clientFault
	// marks a call that failed by the client's fault (not the backend's).
	clientBody  clientBody
	clientFault bool
	// trailers is the client's response header when the backend announced
	// trailers, which are copied there when its body ends.
	trailers *fasthttp.ResponseHeader

	// conn and watching are the client's connection and the running
	// watchClient, for streamed responses.
	conn     net.Conn
	watching chan struct{}

	status int
	err    error
	// respondErr is the error backendCallResult reported (c.err then).
	respondErr error
	done       bool
	warnMu     sync.Mutex // the gzip token watch reports from its own goroutine
	warnings   []any
	// charged is the LLM tokens taken from the local token limits when
	// the body ended (chargedSet: a usage was read), under warnMu.
	charged    uint64
	chargedSet bool
	// usage is the response's usage as read (its prompt and completion
	// tokens), with charged.
	usage llm.Usage
}

// respond is the backend's status and headers arriving: trace them as they
// came (backend; nil when the proxy answers for a failed call), then add
// the proxy's own headers to the client's response (h).
func (c *call) respond(code int, backend, h *fasthttp.ResponseHeader) {
	c.status, c.respondErr = code, c.err
	fromBackend := backend != nil
	tr := c.tr
	if tr != nil {
		start := c.start
		tr.Record(statusSeverity(code, c.err), trace.BackendCallResult, &start,
			tracing.Capture{Render: renderCallResult, Code: code, Err: c.err, Flag: c.clientFault})
		// The backend's response as it came, before the proxy adds its own headers.
		if backend == nil {
			backend = h // the proxy's own answer to a failed call
		}
		tr.RecordNext(trace.SeverityInfo, trace.ResponseSnapshot,
			c.dp.captureResponse(tr, trace.StageBackendResponseReady, code, backend, true))
	}
	if c.d.Limited {
		d := c.d
		d.Families = c.rt.families
		if fromBackend {
			// The backend's own rate-limit headers, copied into h, stay
			// where they are stricter than the route's.
			d.WriteFamilies(time.Now(), func(name string) string { return peekResponseFold(h, name) },
				func(name string, value []byte) { setResponseFold(h, name, value) }, h.AddBytesV)
		} else {
			d.WriteFamilies(time.Now(), nil, h.SetBytesV, h.AddBytesV)
		}
	}
	c.rt.pol.applyResponse(c.cors, h)
	if tr != nil {
		c.dp.traceResponse(tr, trace.StageFinalResponse, code, h, false)
	}
}

// peekResponseFold is the first value of the response header named name,
// in any case ("" when there is none); it allocates only what it returns.
func peekResponseFold(h *fasthttp.ResponseHeader, name string) string {
	for k, v := range h.All() {
		if len(k) == len(name) && strings.EqualFold(b2s(k), name) {
			return string(v)
		}
	}
	return ""
}

// setResponseFold sets the response header name to value, replacing it in
// whatever case the backend wrote it (names are not normalised here, so
// h.Set alone would add a second field beside "X-Ratelimit-Limit-Requests").
// It is not delFold then a set: that costs a rate-limited request about
// 180 instructions more (callgrind, BenchmarkServePolicies/local-limit),
// for the three fields of a family.
func setResponseFold(h *fasthttp.ResponseHeader, name string, value []byte) {
	var other []string
	for k := range h.All() {
		if len(k) == len(name) && b2s(k) != name && strings.EqualFold(b2s(k), name) {
			other = append(other, string(k))
		}
	}
	for _, k := range other {
		h.Del(k)
	}
	h.SetBytesV(name, value)
}

// renderCallResult is backendCallResult's members: error, and status
// (none when the client's body failed: the backend never answered).
func renderCallResult(b []byte, _ *tracing.Tracer, c tracing.Capture) []byte {
	b = append(b, `"error":`...)
	if c.Err != nil {
		b = tracing.AppendString(b, c.Err.Error())
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"status":`...)
	if c.Flag {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, int64(c.Code), 10)
}

// renderBackendCallStart is backendCallStart's target.
func renderBackendCallStart(b []byte, _ *tracing.Tracer, c tracing.Capture) []byte {
	b = append(b, `"target":`...)
	return tracing.AppendString(b, c.Refs[0].(*backend).addr)
}

// callStart is backendCallStart to be.
func callStart(be *backend) tracing.Capture {
	c := tracing.Capture{Render: renderBackendCallStart}
	c.Refs[0] = be
	return c
}

// renderFinished is requestFinished's status, for a request that ended
// as its status says, without a cause or warnings.
func renderFinished(b []byte, _ *tracing.Tracer, c tracing.Capture) []byte {
	b = append(b, `"status":`...)
	return strconv.AppendInt(b, int64(c.Code), 10)
}

// retried traces an attempt that failed before anything was sent (err) and
// the new attempt that follows.
func (c *call) retried(err error) {
	if tr := c.tr; tr != nil {
		start := c.start
		tr.EmitTimed(trace.SeverityWarn, trace.BackendCallResult, &start, map[string]any{"status": nil, "error": err.Error(), "retry": true})
		tr.RecordNext(trace.SeverityInfo, trace.BackendCallStart, callStart(c.be))
	}
}

func (c *call) Read(p []byte) (int, error) {
	if c.body == nil {
		return 0, io.EOF
	}
	n, err := c.body.Read(p)
	if err == io.EOF && c.trailers != nil {
		for t := range c.resp.Header.Trailers() {
			if v, ok := firstFold(&c.resp.Header, b2s(t)); ok {
				c.trailers.SetBytesKV(t, v)
			}
		}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		c.dp.log.Debug("read error during body copy", "err", err)
		if !errors.Is(err, errClientGone) && c.err == nil {
			// The backend failed mid-body: the call failed, whatever the
			// status said; requestFinished and the endpoint's health show it.
			c.err = bodyError(err)
		}
	}
	return n, err
}

// Close ends the call: the server closes the body stream once the body is
// written, or when writing it failed (client gone).
func (c *call) Close() error {
	c.finish()
	return nil
}

// finish records the call and ends its trace, once.
func (c *call) finish() {
	if c.done {
		return
	}
	c.done = true
	c.stopWatch()
	if c.body != nil {
		_ = c.body.Close()
	}
	if c.resp != nil {
		fasthttp.ReleaseResponse(c.resp)
	}
	status := c.status
	if status == 0 {
		status = http.StatusBadGateway
	}
	if !c.clientFault {
		c.be.stats.record(time.Since(c.start), status < 500 && c.err == nil)
	}
	if tr := c.tr; tr != nil {
		sev := statusSeverity(status, c.err)
		c.warnMu.Lock()
		if c.chargedSet {
			traceTokenCharge(tr, c.rt, &c.held, c.charged, c.usage)
		}
		warnings := c.warnings
		c.warnMu.Unlock()
		if c.err == nil && len(warnings) == 0 {
			// The common end, captured without building its fields.
			tr.Record(sev, trace.RequestFinished, nil, tracing.Capture{Render: renderFinished, Code: status})
		} else {
			fields := backendCause(c).fields(status)
			if c.err != nil && c.status != 0 && c.err != c.respondErr {
				// An error found after backendCallResult went out (a body cut
				// short mid-stream) is told here.
				fields["error"] = c.err.Error()
			}
			if len(warnings) > 0 {
				fields["warnings"] = warnings
				if sev == trace.SeverityInfo {
					sev = trace.SeverityWarn
				}
			}
			tr.Emit(sev, trace.RequestFinished, fields)
		}
	}
	*c = call{}
	callPool.Put(c)
}

// statusSeverity is the severity of backendCallResult and requestFinished.
func statusSeverity(code int, err error) trace.Severity {
	switch {
	case err != nil || code >= 500:
		return trace.SeverityError
	case code >= 400:
		return trace.SeverityWarn
	}
	return trace.SeverityInfo
}
