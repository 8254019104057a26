package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/gwdiag/gwdiag/golden/routing"
	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/refproxy/config"
	"github.com/gwdiag/gwdiag/refproxy/internal/llm"
	"github.com/gwdiag/gwdiag/refproxy/internal/tracing"
)

// llmRouter is the backend choice of an llm: route: the request's model
// (the "model" of its JSON body) picks the first model entry whose name
// matches it and whose header conditions hold, most specific name first.
// GET /v1/models (and /models) lists the models that can be requested.
type llmRouter struct {
	models []llmModel
	// list is the answer to GET /v1/models, made at load.
	list []byte
}

type llmModel struct {
	pattern  string
	internal bool
	// matches are the entry's header conditions (any one set must hold),
	// through the one matcher of routes.
	matches []routing.Match
	be      *backend
}

func (dp *Dataplane) llmRouter(r *config.LLMRouter) (*llmRouter, error) {
	lr := &llmRouter{}
	type entry struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []entry `json:"data"`
	}{Object: "list", Data: []entry{}}
	for _, m := range r.Models {
		lm := llmModel{pattern: m.Pattern, internal: m.Internal, be: dp.backend(m.Backend)}
		for _, hs := range m.Matches {
			hm, err := routing.Compile(routing.MatchSpec{Headers: hs})
			if err != nil {
				return nil, err
			}
			lm.matches = append(lm.matches, hm)
		}
		lr.models = append(lr.models, lm)
		if !m.Internal {
			list.Data = append(list.Data, entry{ID: m.Pattern, Object: "model", OwnedBy: "refproxy"})
		}
	}
	b, err := json.Marshal(list)
	if err != nil {
		return nil, err
	}
	lr.list = b
	return lr, nil
}

// pick returns the backend of a model; nil when no entry takes it.
func (r *llmRouter) pick(model string, v *reqView) *backend {
	for i := range r.models {
		m := &r.models[i]
		if m.internal || !modelMatches(m.pattern, model) {
			continue
		}
		if len(m.matches) > 0 && !anyHeadersHold(m.matches, v) {
			continue
		}
		return m.be
	}
	return nil
}

func anyHeadersHold(sets []routing.Match, v *reqView) bool {
	r := routing.Request{Method: v.method, Path: v.path, Host: v.host, Query: v.query}
	for i := range sets {
		if sets[i].Matches(&r, v.header) {
			return true
		}
	}
	return false
}

// modelMatches matches a model name against "*", "prefix*", "*suffix" or
// an exact name.
func modelMatches(pattern, model string) bool {
	switch {
	case pattern == "*":
		return true
	case strings.HasSuffix(pattern, "*"):
		return strings.HasPrefix(model, pattern[:len(pattern)-1])
	case strings.HasPrefix(pattern, "*"):
		return strings.HasSuffix(model, pattern[1:])
	}
	return pattern == model
}

// pickModel picks an LLM route's backend by the request's model, or
// answers the model list, or that no model of the route takes it (why,
// only for a traced request: tr).
func (dp *Dataplane) pickModel(ctx *fasthttp.RequestCtx, tr *tracing.Tracer, rt *route, v *reqView, st *admitted, a *localAnswer) bool {
	if isModelList(v) {
		*a = localAnswer{own: true, status: http.StatusOK, ctype: "application/json", body: b2s(rt.llm.list),
			why: cause{kind: causeDirect, reason: "the model list of the route's llm models, answered by the proxy"}}
		return false
	}
	model, ok := "", false
	if body, read := requestBody(&ctx.Request); read {
		model, ok = llm.ModelOf(body)
	}
	if ok {
		st.be = rt.llm.pick(model, v)
	}
	if st.be != nil {
		return true
	}
	*a = localAnswer{own: true, status: http.StatusNotFound, ctype: "application/json", body: modelNotFound(model, ok), why: cause{kind: causeNoModel}}
	switch {
	case tr == nil:
	case ok:
		a.why.reason = fmt.Sprintf("no model of the route takes %q (or its header conditions do not hold)", model)
	default:
		a.why.reason = "the request names no model"
	}
	return false
}

// isModelList reports whether the request asks for the model list.
func isModelList(v *reqView) bool {
	return v.method == http.MethodGet && (v.path == "/v1/models" || v.path == "/models")
}

// modelNotFound is the provider-style error of a request no model takes.
func modelNotFound(model string, ok bool) string {
	msg := "No model set"
	if ok {
		msg = "Model " + model + " not found"
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": "model_not_found"}})
	return string(b)
}

// requestBody returns the request's JSON body, read into memory (bounded
// by llm.MaxRequestSize), and whether it is there; a body too large, or
// not JSON, is not read and goes on untouched.
func requestBody(req *fasthttp.Request) ([]byte, bool) {
	if ct := req.Header.ContentType(); len(ct) > 0 && !llm.IsJSON(b2s(ct)) {
		return nil, false
	}
	n := req.Header.ContentLength()
	if n == 0 || n > llm.MaxRequestSize {
		return nil, false
	}
	if stream := req.BodyStream(); stream != nil {
		body, rest, ok := llm.ReadBody(stream, int64(n))
		if !ok {
			req.SetBodyStream(rest, -1) // too large, or broken: goes on untouched
			return nil, false
		}
		req.SetBodyRaw(body)
		req.Header.SetContentLength(len(body))
	}
	return req.Body(), true
}

// rewriteLLMBody rewrites the JSON body of a request going to its backend,
// read once: the backend's model put in place of the request's (model: an
// AI backend's provider.openAI.model, an llm model's params.model), and,
// on a route that counts tokens, llm.PrepareBody's stream options.
func rewriteLLMBody(req *fasthttp.Request, model string, tokens bool) {
	body, ok := requestBody(req)
	if !ok {
		return
	}
	out, changed := body, false
	if model != "" {
		if b, ok := llm.SetModel(out, model); ok {
			out, changed = b, true
		}
	}
	if tokens {
		if b, ok := llm.PrepareBody(out); ok {
			out, changed = b, true
		}
	}
	if changed {
		req.SetBodyRaw(out)
		req.Header.SetContentLength(len(out))
	}
}

// traceLLMRequest traces what a request to an AI backend asks, as the
// reference's llmRequestDetected does: the provider, the model the body
// names (after a backend's own replaced it) and whether it streams. Only a
// traced request's body is read for it (when in memory or small enough to
// be: requestBody); a body that is not JSON gives an empty model.
func traceLLMRequest(tr *tracing.Tracer, req *fasthttp.Request) {
	var asked struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if body, ok := requestBody(req); ok {
		_ = json.Unmarshal(body, &asked)
	}
	tr.Emit(trace.SeverityInfo, trace.LLMRequestDetected, map[string]any{
		"provider": "openai", "inputFormat": "completions", "requestModel": asked.Model, "streaming": asked.Stream})
}
