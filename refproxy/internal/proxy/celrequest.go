package proxy

import (
	"reflect"
	"strings"
	"time"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/interpreter"
	"github.com/valyala/fasthttp"

	"github.com/gwdiag/gwdiag/refproxy/celexpr"
	"github.com/gwdiag/gwdiag/refproxy/internal/tracing"
)

// celRequest is `request` as CEL expressions see it: requestInfo's map,
// built field by field as the expression asks. A route's policies (a
// condition, authorization, a limit's key or descriptors) and the filter
// of a follow watcher run on every request they see, and most read a field
// or a header or two (the path, a method, request.headers["x-tier"]): such
// an expression costs those strings, not the request's map and every
// header. What else an expression does with `request` or its headers
// (iterating, comparing, converting, a key requestInfo lacks) the whole
// map does, built then. TestCELRequestMatchesMap holds it to the map.
//
// It reads the request when the expression does: it is for the
// expressions of one step of the request path, while fasthttp's request
// is the handler's and nothing rewrites it.
//
// For a trace filter, the headers a trace redacts (rd) are seen as a
// trace shows them ("Bearer <redacted:...>"): a filter cannot test a
// guess of a credential on every request (learning it from which requests
// it is given), and it can follow one client by the fingerprint its traces
// show. A policy's expressions (rd nil) see them as sent.
type celRequest struct {
	ctx     *fasthttp.RequestCtx
	rd      *tracing.Redaction
	whole   traits.Mapper
	headers celHeaders
}

var (
	_ traits.Mapper = (*celRequest)(nil)
	_ traits.Zeroer = (*celRequest)(nil)
	_ traits.Mapper = (*celHeaders)(nil)
)

// all is the whole map, built on first need.
func (r *celRequest) all() traits.Mapper {
	if r.whole == nil {
		r.whole = types.DefaultTypeAdapter.NativeToValue(celInfo(r.ctx, r.rd)).(traits.Mapper)
	}
	return r.whole
}

// celInfo is requestInfo as an expression of celRequest sees it: the
// values of the headers rd redacts (if any) redacted, as a snapshot shows
// them.
func celInfo(ctx *fasthttp.RequestCtx, rd *tracing.Redaction) map[string]any {
	info := requestInfo(ctx, time.Time{})
	if hs, ok := info["headers"].(map[string]any); ok && rd != nil {
		for k, v := range hs {
			if s, ok := v.(string); ok && rd.SensitiveLower(k) {
				hs[k] = rd.Redactor().Value(k, s)
			}
		}
	}
	return info
}

// field is one of requestInfo's string fields, as requestInfoOf makes it.
// The request's bytes are fasthttp's to reuse: what is returned is a copy.
func (r *celRequest) field(name string) (string, bool) {
	h := &r.ctx.Request.Header
	switch name {
	case "method":
		return string(h.Method()), true
	case "host":
		return string(h.Host()), true
	case "version":
		return string(h.Protocol()), true
	case "scheme":
		return schemeOf(r.ctx.IsTLS()), true
	case "path", "pathAndQuery", "uri":
	default:
		return "", false
	}
	path, query := splitRequestURI(b2s(h.RequestURI()))
	switch name {
	case "path":
		return strings.Clone(decodePath(path)), true
	case "pathAndQuery":
		return strings.Clone(joinQuery(path, query)), true
	}
	return schemeOf(r.ctx.IsTLS()) + "://" + b2s(h.Host()) + joinQuery(path, query), true
}

// Find is the value at key: a string field by itself, the headers as
// celHeaders, anything else from the whole map.
func (r *celRequest) Find(key ref.Val) (ref.Val, bool) {
	if k, ok := key.(types.String); ok {
		if k == "headers" {
			r.headers.r = r
			return &r.headers, true
		}
		if v, ok := r.field(string(k)); ok {
			return types.String(v), true
		}
	}
	return r.all().Find(key)
}

// Get is the value at key, or an error value (no such key).
func (r *celRequest) Get(key ref.Val) ref.Val {
	if v, ok := r.Find(key); ok {
		return v
	}
	return r.all().Get(key)
}

func (r *celRequest) Contains(key ref.Val) ref.Val { return r.all().Contains(key) }
func (r *celRequest) ConvertToNative(t reflect.Type) (any, error) {
	return r.all().ConvertToNative(t)
}
func (r *celRequest) ConvertToType(t ref.Type) ref.Val { return r.all().ConvertToType(t) }
func (r *celRequest) Equal(other ref.Val) ref.Val      { return r.all().Equal(other) }
func (r *celRequest) Iterator() traits.Iterator        { return r.all().Iterator() }
func (r *celRequest) Size() ref.Val                    { return r.all().Size() }
func (r *celRequest) Type() ref.Type                   { return types.MapType }
func (r *celRequest) Value() any                       { return r.all().Value() }
func (r *celRequest) IsZeroValue() bool                { return false } // requestInfo always has keys
func (r *celRequest) String() string                   { return r.all().(interface{ String() string }).String() }

// celHeaders is `request.headers` of a celRequest: a header found by its
// name as the map has it (lower case), its fields joined with "," as
// headerMap joins them; anything else from the whole map's headers.
type celHeaders struct{ r *celRequest }

// whole is the whole map's headers.
func (h *celHeaders) whole() traits.Mapper {
	v, _ := h.r.all().Find(types.String("headers"))
	return v.(traits.Mapper)
}

// field is the value of the header named name (lower case), as headerMap
// makes it, or false if the request has none.
func (h *celHeaders) field(name string) (string, bool) {
	var v string
	found := false
	var lower [64]byte
	for k, fv := range h.r.ctx.Request.Header.All() {
		if len(k) != len(name) || string(appendLower(lower[:0], k)) != name {
			continue
		}
		if found {
			v += "," + string(fv)
		} else {
			v, found = string(fv), true
		}
	}
	if found && h.r.rd != nil && h.r.rd.SensitiveLower(name) {
		v = h.r.rd.Redactor().Value(name, v)
	}
	return v, found
}

// Find is the header named key (a string) by itself; anything else from
// the whole map's headers.
func (h *celHeaders) Find(key ref.Val) (ref.Val, bool) {
	if k, ok := key.(types.String); ok {
		if v, ok := h.field(string(k)); ok {
			return types.String(v), true
		}
		return nil, false
	}
	return h.whole().Find(key)
}

// Get is the header named key, or an error value (no such key).
func (h *celHeaders) Get(key ref.Val) ref.Val {
	if v, ok := h.Find(key); ok {
		return v
	}
	return h.whole().Get(key)
}

func (h *celHeaders) Contains(key ref.Val) ref.Val { return h.whole().Contains(key) }
func (h *celHeaders) ConvertToNative(t reflect.Type) (any, error) {
	return h.whole().ConvertToNative(t)
}
func (h *celHeaders) ConvertToType(t ref.Type) ref.Val { return h.whole().ConvertToType(t) }
func (h *celHeaders) Equal(other ref.Val) ref.Val      { return h.whole().Equal(other) }
func (h *celHeaders) Iterator() traits.Iterator        { return h.whole().Iterator() }
func (h *celHeaders) Size() ref.Val                    { return h.whole().Size() }
func (h *celHeaders) Type() ref.Type                   { return types.MapType }
func (h *celHeaders) Value() any                       { return h.whole().Value() }
func (h *celHeaders) String() string                   { return h.whole().(interface{ String() string }).String() }

// celActivation is what a route's CEL expressions see of a request
// (celexpr's request environment), made once per request and only for
// routes whose policies have some, after the auth policies: request as
// the expressions read it (celRequest), source made when first read, and
// jwt, apiKey and basicAuth of who the auth policies found (id), else no
// claims.
type celActivation struct {
	request celRequest
	id      identity
	source  map[string]any
}

var _ interpreter.Activation = (*celActivation)(nil)

func newActivation(ctx *fasthttp.RequestCtx, id identity) *celActivation {
	return &celActivation{request: celRequest{ctx: ctx}, id: id}
}

// ResolveName is the value of a variable of the request environment.
func (a *celActivation) ResolveName(name string) (any, bool) {
	switch name {
	case "request":
		return &a.request, true
	case "source":
		if a.source == nil {
			a.source = sourceInfo(a.request.ctx.RemoteAddr())
		}
		return a.source, true
	case "jwt":
		if a.id.claims != nil {
			return a.id.claims, true
		}
	case "apiKey":
		if a.id.apiKey != nil {
			return a.id.apiKey, true
		}
	case "basicAuth":
		if a.id.user != "" {
			return map[string]any{"username": a.id.user}, true
		}
	default:
		return nil, false
	}
	return celexpr.NoClaims, true
}

// Parent is nil: the request environment is one level.
func (a *celActivation) Parent() interpreter.Activation { return nil }
