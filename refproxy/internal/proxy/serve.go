// The request path, top-down: accept a request and take a trace watcher
// (serve), select a route and apply its policies (applyPolicies), answer
// locally (answerLocally) or forward to the backend (forward), answer with
// the backend's status and headers (respondHeaders) or the failure
// (backendError, clientBodyError), and charge LLM tokens as the body
// passes (watchTokens). The call that carries a forwarded request to its
// end is in call.go; the rules for forwarded headers in headers.go; trace
// snapshots in snapshots.go; backend connections and bodies in upstream.go
// and bodies.go.
package proxy

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gwdiag/gwdiag/golden/routing"
	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/refproxy/config"
	"github.com/gwdiag/gwdiag/refproxy/internal/llm"
	"github.com/gwdiag/gwdiag/refproxy/internal/tracing"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit"
)

type bindHandler struct {
	dp  *Dataplane
	key int
}

func (t *table) bind(key int) *bindTable {
	for _, b := range t.binds {
		if b.key == key {
			return b
		}
	}
	return nil
}

// serve handles one data-plane request. Everything tracing does is behind
// `tr != nil`, so untraced requests build no events and no reasons.
func (h *bindHandler) serve(ctx *fasthttp.RequestCtx) {
	dp := h.dp
	t := dp.table.Load()
	var tr *tracing.Tracer
	if !dp.tracingOff {
		tr = dp.reg.Take(func() any { return newCELRequest(ctx, dp.redactionOf(t)) })
		if t != nil && t.otel != nil {
			tr = t.otel.begin(ctx, tr, dp.redactionOf(t))
		}
	}
	if tr.Followed() {
		followRequest(ctx, tr)
	}
	var bt *bindTable
	if t != nil {
		bt = t.bind(h.key)
	}
	var initial tracing.Capture
	if tr != nil {
		// Before the request is captured, which registers its
		// credentials (refproxy/internal/tracing/redaction.go).
		tr.SetRedaction(dp.redactionOf(t))
		// Taken now: requestStarted is at 0.
		tr.RecordNext(trace.SeverityInfo, trace.RequestStarted, tracing.Capture{})
		initial = dp.captureRequest(ctx, tr, trace.StageInitialRequest, nil)
		tr.Record(trace.SeverityInfo, trace.RequestSnapshot, nil, initial)
		// The gateway has no policies of its own: the same state.
		tr.RecordNext(trace.SeverityInfo, trace.RequestSnapshot,
			tracing.Capture{Render: renderSameState, Str: trace.StageGatewayPolicies})
	}
	var v reqView
	if bt != nil {
		v = newView(&ctx.Request)
	}
	var st admitted
	var a localAnswer
	rt, why := routeFor(&v, tr, bt, &initial)
	if rt == nil {
		a = localAnswer{status: http.StatusNotFound, body: "route not found\n", why: why}
		dp.answerLocally(ctx, tr, nil, &st, &a)
		return
	}
	if tr != nil {
		ps := tracing.Capture{Render: renderPolicySelection}
		ps.Refs[0] = rt
		tr.RecordNext(trace.SeverityInfo, trace.PolicySelection, ps)
		traceSkippedPolicies(tr, rt)
	}
	if !dp.applyPolicies(ctx, tr, rt, &v, &st, &a) {
		dp.answerLocally(ctx, tr, rt, &st, &a)
		return
	}
	// An admitted request goes to its backend: the route's request header
	// modifiers and backend auth applied, the request traced as the backend
	// gets it, then forwarded (or tunnelled, for an upgrade).
	pol, be := rt.pol, st.be
	if be.model != "" || rt.tokens {
		rewriteLLMBody(&ctx.Request, be.model, rt.tokens)
	}
	if pol != nil {
		for _, m := range pol.reqMod {
			m.apply(&ctx.Request.Header)
		}
	}
	// backendAuth: the backend's own, else its route's.
	ba := be.auth
	if ba == nil && pol != nil {
		ba = pol.backendAuth
	}
	setTraceparent(&ctx.Request, tr)
	if tr != nil {
		// The request after the route's policies is the final one (but for
		// what backendAuth adds): one capture for both, and the call starts
		// as soon as it is sent.
		rc := dp.captureRequest(ctx, tr, trace.StageRoutePolicies, nil)
		tr.Record(trace.SeverityInfo, trace.RequestSnapshot, nil, rc)
		if ba != nil {
			ba.apply(&ctx.Request, tr, &st.id, be)
			rc = dp.captureRequest(ctx, tr, trace.StageFinalRequest, be)
		}
		rc.Str, rc.Refs[3] = trace.StageFinalRequest, be
		tr.RecordNext(trace.SeverityInfo, trace.RequestSnapshot, rc)
		if be.ai {
			traceLLMRequest(tr, &ctx.Request)
		}
		tr.RecordNext(trace.SeverityInfo, trace.BackendCallStart, callStart(be))
		// The API key rewriteRequest sends an AI backend is a credential
		// the request did not carry: registered before the call, so that
		// nothing after it (the backend's answer, an error) shows it.
		if be.apiKey != "" {
			tr.AddSecret(be.apiKey)
		}
	} else if ba != nil {
		ba.apply(&ctx.Request, nil, &st.id, be)
	}

	c := callPool.Get().(*call)
	*c = call{dp: dp, tr: tr, rt: rt, be: be, held: st.held, cors: st.cors, d: st.d, start: time.Now(), remote: st.global, warnings: st.global.warnings}
	// One pass over the headers finds whether any must be dropped; an
	// upgrade has one (Upgrade is hop-by-hop), so most requests stop here.
	dropped := hasDroppedHeader(&ctx.Request.Header)
	if dropped && isUpgrade(&ctx.Request.Header) {
		dp.tunnel(ctx, c)
		return
	}
	dp.forward(ctx, c, dropped)
}

// admitted is what the route's policies decided of a request they let
// through: its CORS result, who the client is, what its CEL expressions
// saw, the limits' decision (local and global) and tokens held, and the
// backend it goes to.
type admitted struct {
	cors   corsResult
	id     identity
	act    *celActivation
	d      ratelimit.Decision
	held   ratelimit.Held
	global remoteResult
	be     *backend
}

// localAnswer is a request the proxy answers itself, without a backend:
// no route took it, or one of its route's policies stopped it.
// answerLocally writes it; nothing else writes a local answer.
type localAnswer struct {
	// own: the route's own response (directResponse, the LLM model list
	// and its errors, a CORS preflight): its response header modifiers
	// and CORS headers apply. Otherwise the proxy's answer, with the
	// route's CORS headers only.
	own bool
	// preflight: a CORS preflight, whose CORS headers are set already.
	preflight bool
	// refused: a 429 of the route's limits, in the route's error format
	// (status, ctype and body are the format's); global: of the global
	// rate-limit service (headerRateLimited).
	refused, global bool
	// wwwAuthenticate is the challenge of an auth policy's 401.
	wwwAuthenticate string
	status          int
	// ctype is the body's Content-Type; "" is text/plain; charset=utf-8
	// for the proxy's answer, and none set for the route's own.
	ctype    string
	body     string
	warnings []any
	why      cause
}

// applyPolicies applies the route's policies in order: CORS (a preflight is
// answered), the auth policies, authorization, the local limits, the
// global limits, directResponse, then the backend (an LLM route's by
// model). It reports whether the request goes to a backend (st says
// how); if not, a says how the proxy answers it.
func (dp *Dataplane) applyPolicies(ctx *fasthttp.RequestCtx, tr *tracing.Tracer, rt *route, v *reqView, st *admitted, a *localAnswer) bool {
	pol := rt.pol
	if pol != nil && pol.cors != nil {
		st.cors = pol.cors.evaluate(&ctx.Request)
		if st.cors.preflight {
			// The proxy answers a CORS preflight itself; an origin the
			// policy does not allow gets no CORS headers.
			pol.cors.addHeaders(st.cors, &ctx.Response.Header)
			*a = localAnswer{own: true, preflight: true, status: http.StatusOK,
				why: cause{kind: causeDirect, policy: "cors", reason: "a CORS preflight, answered by the proxy"}}
			return false
		}
	}
	// The auth policies (auth.go): who the client is, or a 401.
	if pol != nil && pol.auth != nil {
		if r := pol.authenticate(&ctx.Request, tr, &st.id); r != nil {
			*a = localAnswer{status: http.StatusUnauthorized, body: r.body, wwwAuthenticate: r.wwwAuthenticate,
				why: cause{kind: causeAuthn, policy: r.kind, reason: r.reason}}
			return false
		}
	}
	// What CEL expressions see of the request (after the auth policies took
	// their credentials, with who they found), only for routes that have some.
	if rt.cond != nil || rt.remote != nil || rt.keyed || pol != nil && pol.authz != nil {
		st.act = newActivation(ctx, st.id)
	}
	if pol != nil && pol.authz != nil && !authorize(pol.authz, st.act) {
		var refused string
		if tr != nil {
			refused = traceAuthzRefusal(tr, pol.authz, st.act)
		}
		*a = localAnswer{status: http.StatusForbidden, body: authzDeniedBody,
			why: cause{kind: causeAuthz, policy: "authorization", reason: refused}}
		return false
	}
	set := rt.set
	if rt.cond != nil {
		set = rt.cond.pick(st.act)
	}
	if set != nil {
		var refused string
		st.held = set.Hold(st.act)
		st.d, refused = admit(&st.held, rt, tr)
		if !st.d.Allowed {
			*a = localAnswer{refused: true, why: cause{kind: causeRateLimit, policy: "localRateLimit", reason: refused}}
			return false
		}
	}
	if rt.remote != nil {
		st.global = dp.checkRemote(rt, st.act)
		st.d = ratelimit.Tighter(st.d, st.global.d)
		var decided string
		if tr != nil {
			decided = traceRemoteLimits(tr, rt, st.global)
		}
		switch {
		case st.global.refused:
			*a = localAnswer{refused: true, global: true, warnings: st.global.warnings,
				why: cause{kind: causeRateLimit, policy: "remoteRateLimit", reason: decided}}
			return false
		case st.global.failed:
			*a = localAnswer{status: statusRateLimitServiceDown, body: "rate limit service unavailable\n", warnings: st.global.warnings,
				why: cause{kind: causeLimitDown, policy: "remoteRateLimit", reason: decided}}
			return false
		}
	}
	if pol != nil && pol.direct != nil {
		*a = localAnswer{own: true, status: int(pol.direct.Status), body: pol.direct.Body,
			why: cause{kind: causeDirect, policy: "directResponse"}}
		if tr != nil {
			a.why.reason = "the route's directResponse policy answers " + strconv.Itoa(a.status)
		}
		return false
	}
	if rt.llm == nil {
		st.be = rt.pick()
	} else if !dp.pickModel(ctx, tr, rt, v, st, a) {
		return false
	}
	if st.be == nil {
		*a = localAnswer{status: http.StatusServiceUnavailable, body: "no backend for route\n", why: cause{kind: causeNoBackend}}
		if tr != nil {
			a.why.reason = "route " + rt.key + " has no backend"
		}
		return false
	}
	return true
}

// answerLocally answers a request the proxy answers itself (a says how;
// rt is nil when no route took it), the one way such an answer leaves the
// data plane: the request after the route's policies traced, then the
// limits' headers, the route's response header modifiers and CORS headers
// (its own response) or its CORS headers only (the proxy's), what the
// answer adds (a 429's Retry-After, a 401's challenge), the status and
// body, and requestFinished with a's cause and warnings.
func (dp *Dataplane) answerLocally(ctx *fasthttp.RequestCtx, tr *tracing.Tracer, rt *route, st *admitted, a *localAnswer) {
	var pol *routePolicies
	if rt != nil {
		if tr != nil {
			dp.traceRequest(ctx, tr, trace.StageRoutePolicies, nil)
		}
		st.d.Families, pol = rt.families, rt.pol
	}
	if a.refused {
		a.status = http.StatusTooManyRequests
		a.ctype, a.body = refusal(rt.errorShape)
	}
	resp := &ctx.Response
	h := &resp.Header
	st.d.WriteFamilies(time.Now(), nil, h.SetBytesV, h.AddBytesV)
	switch {
	case a.preflight:
		pol.applyResponse(corsResult{}, h)
	case a.own:
		pol.applyResponse(st.cors, h)
	default:
		pol.corsHeaders(st.cors, h)
	}
	if a.global {
		h.Set(headerRateLimited, "true")
	}
	if a.wwwAuthenticate != "" {
		h.Set("WWW-Authenticate", a.wwwAuthenticate)
	}
	if a.refused {
		st.d.RetryAfter(h.SetBytesV)
	}
	if a.ctype == "" && !a.own {
		a.ctype = "text/plain; charset=utf-8"
	}
	if a.ctype != "" {
		h.SetContentType(a.ctype)
	}
	resp.SetStatusCode(a.status)
	resp.SetBodyString(a.body)
	if a.refused {
		h.SetContentLength(len(a.body))
	}
	if tr != nil {
		dp.traceResponse(tr, trace.StageFinalResponse, a.status, h, false)
		fields := a.why.fields(a.status)
		if len(a.warnings) > 0 {
			fields["warnings"] = a.warnings
		}
		tr.Emit(statusSeverity(a.status, nil), trace.RequestFinished, fields)
	}
}

// refusal is the Content-Type and body of a 429 of the route's limits:
// the spec's text, or with the route's rateLimitError openai or anthropic,
// the JSON error those clients parse.
func refusal(shape string) (ctype, body string) {
	switch shape {
	case config.RateLimitErrorOpenAI:
		return "application/json", openAIRateLimitBody
	case config.RateLimitErrorAnthropic:
		return "application/json", anthropicRateLimitBody
	}
	return ratelimit.RefusedContentType, ratelimit.RefusedBody
}

// openAIRateLimitBody is a 429's body in OpenAI's error shape.
const openAIRateLimitBody = `{"error":{"message":"rate limit exceeded","type":"rate_limit_error","code":"rate_limit_exceeded"}}`

// anthropicRateLimitBody is a 429's body in Anthropic's error shape.
const anthropicRateLimitBody = `{"type":"error","error":{"type":"rate_limit_error","message":"rate limit exceeded"}}`

// routeFor picks the route of the request (v is nil-valued without a
// bind); a traced request also traces routeSelection with every route's
// reason, and gets why no route took it. The reasons are rendered from
// the request as captured for its initial snapshot (initial), which route
// selection sees unchanged.
func routeFor(v *reqView, tr *tracing.Tracer, bt *bindTable, initial *tracing.Capture) (*route, cause) {
	if bt == nil {
		if tr != nil {
			tr.Emit(trace.SeverityError, trace.RouteSelection, map[string]any{"selectedRoute": nil, "evaluatedRoutes": []any{}, "reasons": []any{}})
		}
		return nil, cause{kind: causeNoRoute, reason: "the port has no configuration"}
	}
	rt := bt.selectRoute(v)
	if tr == nil {
		return rt, cause{}
	}
	if rt == nil {
		// No route: the reasons tell why, now.
		_, sel := bt.explainRoute(v)
		redactSelection(&sel, tr.Redaction())
		traceRouteSelection(tr, sel)
		return nil, noRouteCause(sel, v.host, v.path)
	}
	c := *initial
	c.Render, c.Refs = renderRouteSelection, [4]any{bt}
	tr.Record(trace.SeverityInfo, trace.RouteSelection, nil, c)
	return rt, cause{}
}

// renderRouteSelection is routeSelection's members for a request a route
// took, explained again from the captured request: route selection is a
// function of the bind's table (immutable) and of the request.
func renderRouteSelection(b []byte, tr *tracing.Tracer, c tracing.Capture) []byte {
	bt := c.Refs[0].(*bindTable)
	path, query := splitRequestURI(tr.String(c.Spans[1]))
	r := routing.Request{Method: tr.String(c.Spans[0]), Path: decodePath(path), Host: hostOnly(tr.String(c.Spans[2])), Query: query}
	header := func(name string) (string, bool) {
		val, found := "", false
		tr.EachPair(c.Pairs, func(k, v []byte) {
			if !found && len(k) == len(name) && strings.EqualFold(b2s(k), name) {
				val, found = string(v), true
			}
		})
		return val, found
	}
	sel := bt.routing.Explain(&r, header)
	redactSelection(&sel, tr.Redaction())
	return appendRouteSelection(b, sel)
}

// renderPolicySelection is policySelection's effectivePolicy, encoded
// once for the route (route.effectiveJSON).
func renderPolicySelection(b []byte, _ *tracing.Tracer, c tracing.Capture) []byte {
	b = append(b, `"effectivePolicy":`...)
	return append(b, c.Refs[0].(*route).effectiveJSON...)
}

// admit applies the request's local limits (set: the route's, with the
// conditional entry that holds); a traced request also traces their
// decision, and gets which entries refused it.
func admit(held *ratelimit.Held, rt *route, tr *tracing.Tracer) (ratelimit.Decision, string) {
	if tr == nil {
		return held.Admit(time.Now()), ""
	}
	d, states := held.AdmitExplained(time.Now())
	return d, traceLocalLimit(tr, rt, d, states)
}

// headerRequestID carries a followed request's id to the backend and the
// client when the client sent none.
const headerRequestID = "x-request-id"

// followRequest names a request follow watchers trace: by the client's
// x-request-id, or a new id sent on to the backend and, set on the
// response before anything else (the backend's headers are added to it),
// back to the client.
func followRequest(ctx *fasthttp.RequestCtx, tr *tracing.Tracer) {
	if v, ok := peekFold(&ctx.Request.Header, headerRequestID); ok && len(v) > 0 {
		tr.SetRequestID(string(v))
		return
	}
	id := tr.NewRequestID()
	ctx.Request.Header.SetBytesV(headerRequestID, id)
	ctx.Response.Header.SetBytesV(headerRequestID, id)
}

// forward sends the request to c.be and streams the answer back: the
// request is rewritten in place (hop-by-hop headers out, X-Forwarded-*
// in) and sent on a pooled keep-alive connection; the response's status
// and headers are copied, and its body becomes the body stream of the
// client's response, written (and, when it has no length, flushed chunk by
// chunk, so SSE passes through as it comes) after the handler returns.
// What the client and the backend see is what httputil.ReverseProxy would
// show them, header for header (TestForwardMatchesReverseProxy).
func (dp *Dataplane) forward(ctx *fasthttp.RequestCtx, c *call, dropped bool) {
	req := &ctx.Request
	clientClose := req.Header.ConnectionClose()
	rewriteRequest(ctx, c.be, dropped)
	if n := req.Header.ContentLength(); req.IsBodyStream() && n >= 0 && n <= maxBufferedBody {
		// The server read this body whole before calling the handler:
		// take it as bytes, so that the request can be sent again.
		req.Body()
	}
	if req.IsBodyStream() {
		// A body streamed from the client (large, or chunked) is read while
		// it is sent; a request of its own reads it through clientBody, to
		// tell a failure of the client's (a malformed chunked body) from the
		// backend's. The client's request keeps its stream, which the
		// server releases.
		c.clientBody = clientBody{r: req.BodyStream()}
		up := fasthttp.AcquireRequest()
		defer fasthttp.ReleaseRequest(up)
		req.Header.CopyTo(&up.Header)
		up.SetBodyStream(&c.clientBody, req.Header.ContentLength())
		req = up
	}
	resp := fasthttp.AcquireResponse()
	resp.StreamBody = true
	err := c.be.do(req, resp)
	// A pooled connection the backend had closed carried nothing: send the
	// request again on another (the pool may hold several such), unless its
	// body was a stream already partly read.
	for try := 0; errors.Is(err, errIdleClosed) && !req.IsBodyStream() && try < maxIdleRetries; try++ {
		c.retried(err)
		err = c.be.do(req, resp)
	}
	if clientClose {
		ctx.Response.SetConnectionClose()
	}
	if err != nil {
		fasthttp.ReleaseResponse(resp)
		if cerr := c.clientBody.err; cerr != nil {
			dp.clientBodyError(ctx, c, cerr)
			return
		}
		dp.backendError(ctx, c, err)
		return
	}
	status := resp.StatusCode()
	n := resp.Header.ContentLength()
	stream := resp.BodyStream()
	if stream != nil && n >= 0 && !isEventStream(resp.Header.ContentType()) {
		// A body of known length is read ahead before anything goes to the
		// client: whole when small (the backend connection goes back to the
		// pool before the client is answered, and the response leaves in
		// one write), else its first part. A body cut short there gets a
		// 502, and the trace's backendCallResult says why. On a
		// token-limited route a small body is read through the usage watch,
		// which charges at its end.
		small := n <= maxBufferedResponse
		var watch io.ReadCloser
		body := io.Reader(stream)
		if small && c.rt.tokens {
			watch = dp.watchTokens(c, resp, io.NopCloser(stream))
			body = watch
		}
		buf, k, err := readAhead(body, n, small)
		if watch != nil {
			_ = watch.Close() // the watch reports before the call ends
		}
		if err != nil {
			fasthttp.ReleaseResponse(resp)
			dp.backendError(ctx, c, bodyError(err))
			return
		}
		if watch != nil && c.held.Set().HasTokens() {
			// The whole body, and so its usage, was read before the
			// headers go out: they show this response's charge.
			c.d = ratelimit.Tighter(c.held.Now(time.Now()), c.remote.d)
		}
		c.resp = resp
		dp.respondHeaders(ctx, c, status, n)
		if small {
			ctx.Response.SetBody(buf[:k])
			readBufs.Put(buf)
			c.finish()
			return
		}
		c.up = upBody{resp: resp}
		c.ahead = aheadBody{buf: buf, n: k, rest: &c.up}
		c.body = &c.ahead
		c.watchClient(ctx.Conn(), stream)
		if c.rt.tokens {
			c.body = dp.watchTokens(c, resp, c.body)
		}
		ctx.Response.SetBodyStream(c, n)
		return
	}
	c.resp = resp
	dp.respondHeaders(ctx, c, status, n)
	if stream != nil {
		c.up = upBody{resp: resp}
		c.body = &c.up
		c.watchClient(ctx.Conn(), stream)
	}
	if c.rt.tokens {
		c.body = dp.watchTokens(c, resp, c.body)
	}
	if n < 0 {
		n = -1 // chunked to the client, flushed after every chunk
	}
	// An event stream's headers go out at once, before its first event.
	ctx.Response.ImmediateHeaderFlush = isEventStream(resp.Header.ContentType())
	ctx.Response.SetBodyStream(c, n)
}

// maxIdleRetries bounds the new attempts after pooled connections found
// closed by the backend.
const maxIdleRetries = 8

// respondHeaders copies the backend's status and headers to the client's
// response, announces the trailers the backend announced, and traces the
// answer (call.respond).
func (dp *Dataplane) respondHeaders(ctx *fasthttp.RequestCtx, c *call, status, n int) {
	resp := c.resp
	out := &ctx.Response.Header
	copyResponseHeader(out, &resp.Header)
	for t := range resp.Header.Trailers() {
		// Announced to the client as the backend announced them; the values
		// follow the body (call.Read). Trailers the backend sends without
		// announcing them are not passed on.
		if out.AddTrailerBytes(t) == nil {
			c.trailers = out
		}
	}
	out.SetStatusCode(status)
	if n >= 0 {
		out.SetContentLength(n)
	}
	c.respond(status, &resp.Header, out)
}

// backendError answers a failed upstream call: 503 when the backend could
// not be reached, 502 when it answered wrongly (a malformed response, a
// body cut short). The trace shows the transport error in
// backendCallResult.error; the client is told what failed, never the bytes
// the backend sent.
func (dp *Dataplane) backendError(ctx *fasthttp.RequestCtx, c *call, err error) {
	c.err = err
	dp.log.Debug("backend call failed", "host", c.be.addr, "err", err)
	code := fasthttp.StatusBadGateway
	if unreachable(err) {
		code = fasthttp.StatusServiceUnavailable
	}
	resp := &ctx.Response
	resp.Header.SetContentType("text/plain; charset=utf-8")
	resp.SetStatusCode(code)
	c.respond(code, nil, &resp.Header)
	resp.SetBodyString("upstream call failed: " + clientMessage(err) + "\n")
	c.finish()
}

// clientBodyError answers a request whose body the client sent malformed:
// 400, and the backend's health does not count the call.
func (dp *Dataplane) clientBodyError(ctx *fasthttp.RequestCtx, c *call, err error) {
	c.err, c.clientFault = fmt.Errorf("the client's request body: %w", err), true
	resp := &ctx.Response
	resp.Header.SetContentType("text/plain; charset=utf-8")
	resp.SetStatusCode(fasthttp.StatusBadRequest)
	resp.SetConnectionClose()
	c.respond(fasthttp.StatusBadRequest, nil, &resp.Header)
	resp.SetBodyString("malformed request body: " + clientMessage(err) + "\n")
	c.finish()
}

// watchTokens charges LLM token usage once the body has passed through.
func (dp *Dataplane) watchTokens(c *call, resp *fasthttp.Response, body io.ReadCloser) io.ReadCloser {
	held, route := &c.held, c.rt.key
	// Error answers from LLM providers carry no usage: counting them as 0 is
	// expected, not worth a warning.
	success := resp.StatusCode() < 300
	return llm.Watch(body, b2s(resp.Header.ContentType()), b2s(resp.Header.ContentEncoding()), func(u llm.Usage, err error) {
		held.Charge(time.Now(), u.Total())
		if c.tr != nil && held.Set().HasTokens() {
			c.warnMu.Lock()
			c.charged, c.chargedSet, c.usage = u.Total(), true, u
			c.warnMu.Unlock()
		}
		if c.rt.remote != nil {
			c.chargeRemote(u.Total())
		}
		if err != nil && success {
			msg := "token usage not counted: " + err.Error()
			dp.log.Warn(msg, "route", route)
			c.warnMu.Lock()
			c.warnings = append(c.warnings, msg)
			c.warnMu.Unlock()
		}
	})
}
