package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gwdiag/gwdiag/refproxy/llm"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit"
	"github.com/gwdiag/gwdiag/refproxy/trace"
)

type bindHandler struct {
	dp  *Dataplane
	key int
}

func (t *Table) bind(key int) *bindTable {
	for _, b := range t.binds {
		if b.key == key {
			return b
		}
	}
	return nil
}

// ServeHTTP handles one data-plane request. Everything tracing does is
// behind `tr != nil`, so untraced requests build no events.
func (h *bindHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	dp := h.dp
	var tr *trace.Tracer
	if !dp.tracingOff {
		tr = dp.reg.Take(r)
	}
	var bt *bindTable
	if t := dp.table.Load(); t != nil {
		bt = t.bind(h.key)
	}
	if tr != nil {
		tr.Emit(trace.SeverityInfo, trace.RequestStarted, nil)
		st := dp.requestState(r, tr.Start(), nil)
		tr.Emit(trace.SeverityInfo, trace.RequestSnapshot, map[string]any{"stage": trace.StageInitialRequest, "requestState": st})
		tr.Emit(trace.SeverityInfo, trace.RequestSnapshot, map[string]any{"stage": trace.StageGatewayPolicies, "requestState": st})
	}
	var rt *route
	var evaluated []any
	if bt != nil {
		rt, evaluated = bt.selectRoute(r, tr != nil)
	}
	if rt == nil {
		if tr != nil {
			if evaluated == nil {
				evaluated = []any{}
			}
			tr.Emit(trace.SeverityError, trace.RouteSelection, map[string]any{"selectedRoute": nil, "evaluatedRoutes": evaluated})
		}
		dp.local(w, tr, http.StatusNotFound, "route not found\n", ratelimit.Decision{})
		return
	}
	if tr != nil {
		tr.Emit(trace.SeverityInfo, trace.RouteSelection, map[string]any{"selectedRoute": rt.key, "evaluatedRoutes": evaluated})
		tr.Emit(trace.SeverityInfo, trace.PolicySelection, map[string]any{"effectivePolicy": rt.effective})
	}
	var d ratelimit.Decision
	if rt.set != nil {
		d = rt.set.Admit(time.Now())
		if !d.Allowed {
			if tr != nil {
				tr.Emit(trace.SeverityInfo, trace.RequestSnapshot, map[string]any{"stage": trace.StageRoutePolicies, "requestState": dp.requestState(r, tr.Start(), nil)})
			}
			dp.local(w, tr, http.StatusTooManyRequests, "", d)
			return
		}
	}
	be := rt.pick()
	if be == nil {
		if tr != nil {
			tr.Emit(trace.SeverityInfo, trace.RequestSnapshot, map[string]any{"stage": trace.StageRoutePolicies, "requestState": dp.requestState(r, tr.Start(), nil)})
		}
		dp.local(w, tr, http.StatusServiceUnavailable, "no backend for route\n", d)
		return
	}
	inBody := r.Body
	if rt.tokens {
		llm.PrepareRequest(r)
	}
	if tr != nil {
		tr.Emit(trace.SeverityInfo, trace.RequestSnapshot, map[string]any{"stage": trace.StageRoutePolicies, "requestState": dp.requestState(r, tr.Start(), nil)})
		tr.Emit(trace.SeverityInfo, trace.RequestSnapshot, map[string]any{"stage": trace.StageFinalRequest, "requestState": dp.requestState(r, tr.Start(), be)})
		tr.Emit(trace.SeverityInfo, trace.BackendCallStart, map[string]any{"target": be.addr})
	}

	rw := writerPool.Get().(*respWriter)
	*rw = respWriter{w: w, dp: dp, tr: tr, rt: rt, d: d, limited: rt.set != nil, start: time.Now()}
	defer rw.finish(be)
	if be.direct != nil && r.Header["Upgrade"] == nil && r.Header["Expect"] == nil {
		dp.forward(rw, r, be, inBody)
		return
	}
	if rt.tokens {
		// Only token-limited routes need their state in ModifyResponse.
		r = r.WithContext(context.WithValue(r.Context(), writerKey{}, rw))
	}
	be.rp.ServeHTTP(rw, r)
}

// local answers without calling a backend (404, 429, 503) and traces it.
func (dp *Dataplane) local(w http.ResponseWriter, tr *trace.Tracer, code int, body string, d ratelimit.Decision) {
	if code == http.StatusTooManyRequests {
		d.Refuse(w)
	} else {
		if d.Limited {
			d.WriteHeaders(w.Header())
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}
	if tr != nil {
		tr.Emit(trace.SeverityInfo, trace.ResponseSnapshot, map[string]any{"stage": trace.StageFinalResponse, "requestState": dp.responseState(code, w.Header())})
		tr.Emit(statusSeverity(code, nil), trace.RequestFinished, nil)
	}
}

type writerKey struct{}

var writerPool = sync.Pool{New: func() any { return new(respWriter) }}

// respWriter sits between the reverse proxy and the client: it sees the
// status and headers as they are written, which is where rate-limit headers
// are added, the backend call is recorded and the response is traced.
type respWriter struct {
	w       http.ResponseWriter
	dp      *Dataplane
	tr      *trace.Tracer
	rt      *route
	d       ratelimit.Decision
	limited bool
	start   time.Time

	status   int
	wrote    bool
	err      error
	warnMu   sync.Mutex
	warnings []any
}

func (rw *respWriter) Header() http.Header { return rw.w.Header() }

func (rw *respWriter) WriteHeader(code int) {
	if code < 200 && code != http.StatusSwitchingProtocols {
		rw.w.WriteHeader(code) // 1xx informational: passed on, not final
		return
	}
	if rw.wrote {
		return
	}
	rw.wrote = true
	rw.status = code
	tr := rw.tr
	if tr != nil {
		var errv any
		if rw.err != nil {
			errv = rw.err.Error()
		}
		start := rw.start
		tr.EmitTimed(statusSeverity(code, rw.err), trace.BackendCallResult, &start, map[string]any{"status": code, "error": errv})
		// The backend's response as it came, before the proxy adds its own headers.
		tr.Emit(trace.SeverityInfo, trace.ResponseSnapshot, map[string]any{"stage": trace.StageBackendResponseReady, "requestState": rw.dp.responseState(code, rw.w.Header())})
	}
	if rw.limited {
		rw.d.WriteHeaders(rw.w.Header())
	}
	if tr != nil {
		tr.Emit(trace.SeverityInfo, trace.ResponseSnapshot, map[string]any{"stage": trace.StageFinalResponse, "requestState": rw.dp.responseState(code, rw.w.Header())})
	}
	rw.w.WriteHeader(code)
}

func (rw *respWriter) Write(b []byte) (int, error) {
	if !rw.wrote {
		rw.WriteHeader(http.StatusOK)
	}
	return rw.w.Write(b)
}

// FlushError lets http.ResponseController flush through the wrapper, which
// the reverse proxy does after every write of a streaming response.
func (rw *respWriter) FlushError() error {
	if !rw.wrote {
		rw.WriteHeader(http.StatusOK)
	}
	switch f := rw.w.(type) {
	case interface{ FlushError() error }:
		return f.FlushError()
	case http.Flusher:
		f.Flush()
		return nil
	}
	return http.ErrNotSupported
}

// Unwrap gives http.ResponseController the connection, for upgrades.
func (rw *respWriter) Unwrap() http.ResponseWriter { return rw.w }

func (rw *respWriter) finish(be *backend) {
	status := rw.status
	if !rw.wrote {
		// The handler panicked (client gone mid-body) before a status.
		status = http.StatusBadGateway
	}
	be.stats.record(time.Since(rw.start), status < 500 && rw.err == nil)
	if tr := rw.tr; tr != nil {
		sev := statusSeverity(status, rw.err)
		var fields map[string]any
		rw.warnMu.Lock()
		if len(rw.warnings) > 0 {
			fields = map[string]any{"warnings": rw.warnings}
			if sev == trace.SeverityInfo {
				sev = trace.SeverityWarn
			}
		}
		rw.warnMu.Unlock()
		tr.Emit(sev, trace.RequestFinished, fields)
	}
	*rw = respWriter{}
	writerPool.Put(rw)
}

// backendError answers a failed upstream call: 503 with the transport error,
// which the trace shows in backendCallResult.error.
func (dp *Dataplane) backendError(w http.ResponseWriter, r *http.Request, err error) {
	if rw, ok := w.(*respWriter); ok {
		rw.err = err
	}
	dp.log.Debug("backend call failed", "host", r.URL.Host, "err", err)
	if errors.Is(err, context.Canceled) {
		// The client went away; nobody reads a body.
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte("upstream call failed: " + err.Error() + "\n"))
}

// modifyResponse charges LLM token usage on token-limited routes, once the
// body has passed through.
func (dp *Dataplane) modifyResponse(resp *http.Response) error {
	rw, ok := resp.Request.Context().Value(writerKey{}).(*respWriter)
	if !ok || !rw.rt.tokens {
		return nil
	}
	dp.watchTokens(rw, resp)
	return nil
}

// watchTokens charges LLM token usage once the body has passed through.
func (dp *Dataplane) watchTokens(rw *respWriter, resp *http.Response) {
	set, route := rw.rt.set, rw.rt.key
	// Error answers from LLM providers carry no usage: counting them as 0 is
	// expected, not worth a warning.
	success := resp.StatusCode < 300
	llm.WatchResponse(resp, func(u llm.Usage, err error) {
		set.Charge(time.Now(), u.Total())
		if err != nil && success {
			msg := "token usage not counted: " + err.Error()
			dp.log.Warn(msg, "route", route)
			rw.warnMu.Lock()
			rw.warnings = append(rw.warnings, msg)
			rw.warnMu.Unlock()
		}
	})
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

// requestState is requestSnapshot.requestState; be is set at the final request.
func (dp *Dataplane) requestState(r *http.Request, start time.Time, be *backend) map[string]any {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host, port := splitAddr(r.RemoteAddr)
	st := map[string]any{
		"request": map[string]any{
			"method":       r.Method,
			"uri":          scheme + "://" + r.Host + r.URL.RequestURI(),
			"path":         r.URL.Path,
			"pathAndQuery": r.URL.RequestURI(),
			"host":         r.Host,
			"scheme":       scheme,
			"version":      r.Proto,
			"headers":      requestHeaders(r),
			"startTime":    start.UTC().Format(time.RFC3339Nano),
		},
		"source": map[string]any{"address": host, "port": port, "rawAddress": host, "rawPort": port},
	}
	if be != nil {
		st["backend"] = map[string]any{"name": be.name, "type": be.traceType, "protocol": "http"}
	}
	if dp.opts.Env != nil {
		st["env"] = dp.opts.Env
	}
	return st
}

func (dp *Dataplane) responseState(code int, h http.Header) map[string]any {
	st := map[string]any{"response": map[string]any{"code": code, "headers": headerMap(h)}}
	if dp.opts.Env != nil {
		st["env"] = dp.opts.Env
	}
	return st
}

// requestHeaders is the request's headers with host, which Go keeps apart
// from the header map but HTTP/1.1 sends as a header.
func requestHeaders(r *http.Request) map[string]any {
	m := headerMap(r.Header)
	if r.Host != "" {
		m["host"] = r.Host
	}
	return m
}

// headerMap renders headers as lower-case name to value, joining repeats.
func headerMap(h http.Header) map[string]any {
	m := make(map[string]any, len(h))
	for k, v := range h {
		m[strings.ToLower(k)] = strings.Join(v, ",")
	}
	return m
}

func splitAddr(addr string) (string, int) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	n, _ := strconv.Atoi(p)
	return h, n
}
