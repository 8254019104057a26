package proxy

import (
	"reflect"
	"strings"
	"time"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"github.com/valyala/fasthttp"

	"github.com/gwdiag/gwdiag/refproxy/internal/tracing"
)

// filterRequest is `request` as a trace filter (a watcher's CEL
// expression) sees it: requestInfo's map, built field by field as the
// filter asks. The filter of a follow watcher runs on every request while
// the watcher waits, and most filters read a field or two (the path, a
// method): such a filter costs those strings, not the request's map and
// every header. What else a filter does with it (a header, a key
// requestInfo lacks, iterating, comparing, converting) the whole map does,
// built then. TestFilterRequestMatchesMap holds it to the map.
//
// The headers a trace redacts (rd) are seen as a trace shows them
// ("Bearer <redacted:...>"): a filter cannot test a guess of a credential
// on every request (learning it from which requests it is given), and it
// can follow one client by the fingerprint its traces show.
type filterRequest struct {
	ctx   *fasthttp.RequestCtx
	rd    *tracing.Redaction
	whole traits.Mapper
}

var (
	_ traits.Mapper = (*filterRequest)(nil)
	_ traits.Zeroer = (*filterRequest)(nil)
)

// all is the whole map, built on first need.
func (r *filterRequest) all() traits.Mapper {
	if r.whole == nil {
		r.whole = types.DefaultTypeAdapter.NativeToValue(filterInfo(r.ctx, r.rd)).(traits.Mapper)
	}
	return r.whole
}

// filterInfo is requestInfo as a trace filter sees it: the values of the
// headers rd redacts redacted, as a snapshot shows them.
func filterInfo(ctx *fasthttp.RequestCtx, rd *tracing.Redaction) map[string]any {
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
func (r *filterRequest) field(name string) (string, bool) {
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

// Find is the value at key: a string field by itself, anything else from
// the whole map.
func (r *filterRequest) Find(key ref.Val) (ref.Val, bool) {
	if k, ok := key.(types.String); ok {
		if v, ok := r.field(string(k)); ok {
			return types.String(v), true
		}
	}
	return r.all().Find(key)
}

// Get is the value at key, or an error value (no such key).
func (r *filterRequest) Get(key ref.Val) ref.Val {
	if v, ok := r.Find(key); ok {
		return v
	}
	return r.all().Get(key)
}

func (r *filterRequest) Contains(key ref.Val) ref.Val { return r.all().Contains(key) }
func (r *filterRequest) ConvertToNative(t reflect.Type) (any, error) {
	return r.all().ConvertToNative(t)
}
func (r *filterRequest) ConvertToType(t ref.Type) ref.Val { return r.all().ConvertToType(t) }
func (r *filterRequest) Equal(other ref.Val) ref.Val      { return r.all().Equal(other) }
func (r *filterRequest) Iterator() traits.Iterator        { return r.all().Iterator() }
func (r *filterRequest) Size() ref.Val                    { return r.all().Size() }
func (r *filterRequest) Type() ref.Type                   { return types.MapType }
func (r *filterRequest) Value() any                       { return r.all().Value() }
func (r *filterRequest) IsZeroValue() bool                { return false } // requestInfo always has keys
func (r *filterRequest) String() string                   { return r.all().(interface{ String() string }).String() }
