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
// built field by field and header by header as the expression asks. A
// route's policies (a condition, authorization, a limit's key or
// descriptors) and the filter of a follow watcher run on every request
// they see, and most read a field or a header or two (the path, a method,
// request.headers["x-tier"]): such an expression costs those strings, not
// the request's map and every header. What else an expression does with
// `request` or its headers (iterating, comparing, converting, a key
// requestInfo lacks) the whole map does, built then.
// TestCELRequestMatchesMap holds it to the map.
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
	ctx   *fasthttp.RequestCtx
	rd    *tracing.Redaction
	whole traits.Mapper
	// maps are `request` and `request.headers`, as CEL values.
	maps [2]celMap
	// lookups counts the headers looked up one by one; past
	// maxHeaderLookups the whole map answers (built once, where each
	// look-up would read every header again).
	lookups int
}

// maxHeaderLookups is how many headers one request's expressions look
// up by reading the request's headers before the whole map answers.
const maxHeaderLookups = 16

// newCELRequest is `request` of ctx as a CEL value, the headers rd
// redacts (if any) redacted.
func newCELRequest(ctx *fasthttp.RequestCtx, rd *tracing.Redaction) *celMap {
	r := &celRequest{ctx: ctx, rd: rd}
	return r.value()
}

// value is the request as a CEL value.
func (r *celRequest) value() *celMap {
	r.maps[0] = celMap{r: r}
	return &r.maps[0]
}

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

// header is the value of the header named name (lower case), as
// headerMap makes it, or false if the request has none.
func (r *celRequest) header(name string) (string, bool) {
	var v string
	found := false
	var lower [64]byte
	for k, fv := range r.ctx.Request.Header.All() {
		if len(k) != len(name) || string(appendLower(lower[:0], k)) != name {
			continue
		}
		if found {
			v += "," + string(fv)
		} else {
			v, found = string(fv), true
		}
	}
	if found && r.rd != nil && r.rd.SensitiveLower(name) {
		v = r.rd.Redactor().Value(name, v)
	}
	return v, found
}

// celMap is `request` of a celRequest, or its `headers`: a CEL map that
// answers a look-up by a string key itself (a field, a header, the
// headers), and leaves anything else to the whole map's.
type celMap struct {
	r       *celRequest
	headers bool
}

var (
	_ traits.Mapper = (*celMap)(nil)
	_ traits.Zeroer = (*celMap)(nil)
)

// all is the whole map this one stands for.
func (m *celMap) all() traits.Mapper {
	w := m.r.all()
	if m.headers {
		v, _ := w.Find(types.String("headers"))
		return v.(traits.Mapper)
	}
	return w
}

// Find is the value at key: of the request, a string field by itself and
// the headers as a celMap; of the headers, a header by itself (the first
// maxHeaderLookups); anything else from the whole map.
func (m *celMap) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	switch {
	case !ok:
	case m.headers && m.r.lookups < maxHeaderLookups:
		m.r.lookups++
		if v, ok := m.r.header(string(k)); ok {
			return types.String(v), true
		}
		return nil, false
	case m.headers:
	case k == "headers":
		m.r.maps[1] = celMap{r: m.r, headers: true}
		return &m.r.maps[1], true
	default:
		if v, ok := m.r.field(string(k)); ok {
			return types.String(v), true
		}
	}
	return m.all().Find(key)
}

// Get is the value at key, or an error value (no such key).
func (m *celMap) Get(key ref.Val) ref.Val {
	if v, ok := m.Find(key); ok {
		return v
	}
	return m.all().Get(key)
}

// IsZeroValue: requestInfo always has keys; the headers ask the whole map.
func (m *celMap) IsZeroValue() bool {
	if !m.headers {
		return false
	}
	z, ok := m.all().(traits.Zeroer)
	return ok && z.IsZeroValue()
}

func (m *celMap) Contains(key ref.Val) ref.Val { return m.all().Contains(key) }
func (m *celMap) ConvertToNative(t reflect.Type) (any, error) {
	return m.all().ConvertToNative(t)
}
func (m *celMap) ConvertToType(t ref.Type) ref.Val { return m.all().ConvertToType(t) }
func (m *celMap) Equal(other ref.Val) ref.Val      { return m.all().Equal(other) }
func (m *celMap) Iterator() traits.Iterator        { return m.all().Iterator() }
func (m *celMap) Size() ref.Val                    { return m.all().Size() }
func (m *celMap) Type() ref.Type                   { return types.MapType }
func (m *celMap) Value() any                       { return m.all().Value() }
func (m *celMap) String() string                   { return m.all().(interface{ String() string }).String() }

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
		return a.request.value(), true
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
