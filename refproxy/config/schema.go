package config

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// SchemaJSON is the reference implementation's published JSON schema of the
// standalone config file (agentgateway's config.schema.json, unchanged; see
// schema/README.md). Parse validates every file against it, with refproxy's
// two extensions added (extendSchema).
//
//go:embed schema/config.schema.json
var SchemaJSON []byte

// schemaDoc is the parsed schema: the compiled validator, and the raw JSON
// that tells which fields a place of the document may hold (known).
type schemaDoc struct {
	validator *jsonschema.Schema
	raw       map[string]any
	defs      map[string]any

	mu    sync.Mutex
	props map[string]map[string]bool // by location, see known
}

var loadSchema = sync.OnceValues(func() (*schemaDoc, error) { return compileSchema(schemaURL) })

// The URLs the schema is compiled under. The library checks each schema it
// compiles against its draft's metaschema, except those it hosts under
// json-schema.org (jsonschema/v6's roots.addRoot): for the embedded schema,
// which never changes at run time, that check is 40% of the compile (35 of
// 85 ms, BenchmarkCompileSchema, 2026-12-05), and the compile is most of a
// refproxy start's CPU; make test starts about 1,100 of them (docs/ci.md).
// So refproxy compiles it under schemaURL, and TestSchemaMatchesItsMetaschema
// makes the check once, under checkedSchemaURL. Nothing shown to a user
// carries either URL: errors name the config's own file, line and field.
const (
	schemaURL        = "https://json-schema.org/gwdiag/refproxy/config.schema.json"
	checkedSchemaURL = "config.schema.json"
)

// compileSchema compiles SchemaJSON, with refproxy's extensions, under url.
func compileSchema(url string) (*schemaDoc, error) {
	var raw map[string]any
	if err := json.Unmarshal(SchemaJSON, &raw); err != nil {
		return nil, fmt.Errorf("config schema: %w", err)
	}
	extendSchema(raw)
	return compileRaw(url, raw)
}

// compileRaw compiles the schema document raw under url.
func compileRaw(url string, raw map[string]any) (*schemaDoc, error) {
	c := jsonschema.NewCompiler()
	if err := c.AddResource(url, raw); err != nil {
		return nil, fmt.Errorf("config schema: %w", err)
	}
	v, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("config schema: %w", err)
	}
	defs, _ := raw["$defs"].(map[string]any)
	return &schemaDoc{validator: v, raw: raw, defs: defs, props: map[string]map[string]bool{}}, nil
}

// extendSchema adds the fields only configs written by the reference
// controller carry (a route's key, a backend's serviceOf; see Route.Key and
// Backend.ServiceOf): without them the controller's configs would not
// validate. Users never need them.
func extendSchema(raw map[string]any) {
	defs, _ := raw["$defs"].(map[string]any)
	add := func(def, field string, s map[string]any) {
		d, _ := defs[def].(map[string]any)
		if d == nil {
			return
		}
		props, _ := d["properties"].(map[string]any)
		if props == nil {
			props = map[string]any{}
			d["properties"] = props
		}
		props[field] = s
	}
	add("LocalRoute", "key", map[string]any{"type": "string"})
	// localRateLimit[].key (the reference's PR 3351, newer than this
	// schema): a CEL expression giving each key its own bucket.
	add("RateLimitSpec", "key", map[string]any{"type": "string"})
	add("LocalConditionalPolicy_RateLimitSpec", "key", map[string]any{"type": "string"})
	// shadow and shadowHeaders: a limit counted that never refuses (a
	// refproxy extension).
	for _, def := range []string{"RateLimitSpec", "LocalConditionalPolicy_RateLimitSpec"} {
		add(def, "shadow", map[string]any{"type": "boolean"})
		add(def, "shadowHeaders", map[string]any{"type": "boolean"})
	}
	// rateLimitError: the body of a 429 (a refproxy extension).
	for _, def := range []string{"FilterOrPolicy", "LocalLLMPolicy"} {
		add(def, "rateLimitError", map[string]any{"type": "string", "enum": []any{"text", "openai", "anthropic"}})
		add(def, "rateLimitHeaders", map[string]any{"type": "array", "minItems": 1, "uniqueItems": true,
			"items": map[string]any{"type": "string", "enum": []any{"xRateLimit", "ietf", "openai", "anthropic"}}})
	}
	add("LocalRouteBackend", "serviceOf", map[string]any{
		"type": "object", "additionalProperties": false, "required": []any{"name", "namespace"},
		"properties": map[string]any{
			"name": map[string]any{"type": "string"}, "namespace": map[string]any{"type": "string"},
			"port": map[string]any{"type": "integer", "minimum": 0, "maximum": 65535},
		},
	})
}

// resolve follows $ref, and expands allOf, anyOf and oneOf, into the
// schemas a value at this place may be checked against.
func (s *schemaDoc) resolve(v any, out []map[string]any, depth int) []map[string]any {
	m, ok := v.(map[string]any)
	if !ok || depth > 32 {
		return out
	}
	out = append(out, m)
	if ref, ok := m["$ref"].(string); ok {
		if name, ok := strings.CutPrefix(ref, "#/$defs/"); ok {
			out = s.resolve(s.defs[name], out, depth+1)
		}
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		if alts, ok := m[k].([]any); ok {
			for _, a := range alts {
				out = s.resolve(a, out, depth+1)
			}
		}
	}
	return out
}

// at returns the schemas of the value at path (a sequence of property
// names, "[]" standing for any list index).
func (s *schemaDoc) at(path []string) []map[string]any {
	cur := s.resolve(s.raw, nil, 0)
	for _, seg := range path {
		var next []map[string]any
		for _, sch := range cur {
			if seg == "[]" {
				if it, ok := sch["items"]; ok {
					next = s.resolve(it, next, 0)
				}
				continue
			}
			if props, ok := sch["properties"].(map[string]any); ok {
				if p, ok := props[seg]; ok {
					next = s.resolve(p, next, 0)
					continue
				}
			}
			if ap, ok := sch["additionalProperties"].(map[string]any); ok {
				next = s.resolve(ap, next, 0)
			}
		}
		cur = next
	}
	return cur
}

// known reports whether the schema defines the field key for the mapping
// at segs (the field names leading there, "[]" for a list item): a field
// refproxy does not implement is then refused as such, and any other is an
// unknown field.
func (s *schemaDoc) known(segs []string, key string) bool {
	return s.propsAt(segs)[key]
}

// fields lists the fields the schema defines at segs, sorted.
func (s *schemaDoc) fields(segs []string) []string {
	return slices.Sorted(maps.Keys(s.propsAt(segs)))
}

func (s *schemaDoc) propsAt(segs []string) map[string]bool {
	key := strings.Join(segs, "\x00")
	s.mu.Lock()
	defer s.mu.Unlock()
	props, ok := s.props[key]
	if !ok {
		props = map[string]bool{}
		for _, sch := range s.at(segs) {
			if ps, ok := sch["properties"].(map[string]any); ok {
				for k := range ps {
					props[k] = true
				}
			}
		}
		s.props[key] = props
	}
	return props
}

// locSegs turns an instance location into the segments known takes.
func locSegs(loc []string) []string {
	out := make([]string, len(loc))
	for i, seg := range loc {
		if _, err := strconv.Atoi(seg); err == nil {
			seg = "[]"
		}
		out[i] = seg
	}
	return out
}

// validate checks a document (YAML decoded to JSON values) against the
// schema and returns its errors, one per place, in the order of the file.
func (s *schemaDoc) validate(doc any, at func(path string) (string, int)) []*Error {
	err := s.validator.Validate(doc)
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		pos, _ := at("")
		return []*Error{{Pos: pos, Msg: err.Error()}}
	}
	seen := map[string]bool{}
	var out []*Error
	lines := map[*Error]int{}
	for _, l := range suppressMissing(s.collect(ve)) {
		path := fieldPath(l.loc)
		if key := path + "\x00" + l.msg; !seen[key] {
			seen[key] = true
			e := &Error{Path: path, Msg: l.msg}
			e.Pos, lines[e] = at(path)
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b *Error) int { return lines[a] - lines[b] })
	return out
}

// leaf is one error the user is told of: where (an unknown field's own
// place), what failed there and the message saying so.
type leaf struct {
	loc  []string
	kind jsonschema.ErrorKind
	msg  string
	// missing: a field the mapping lacks (required, or one of several).
	missing bool
}

// collect walks the error tree down to what failed. Where a value had to
// match one of several forms (anyOf, oneOf), it keeps the form the user
// meant: the one whose errors reach furthest into the value, then the one
// that knows most of its fields. When several forms fail alike at the
// value itself (a missing field of several, a value none of them takes),
// one error says so.
func (s *schemaDoc) collect(e *jsonschema.ValidationError) []leaf {
	switch e.ErrorKind.(type) {
	case *kind.AnyOf, *kind.OneOf:
		if len(e.Causes) == 0 {
			return s.leaves(e.InstanceLocation, e.ErrorKind)
		}
		base := len(e.InstanceLocation)
		type branch struct {
			leaves         []leaf
			required       []string
			depth, unknown int
		}
		var bs []branch
		for _, c := range e.Causes {
			ls := s.collect(c)
			b := branch{leaves: suppressMissing(ls), depth: -1}
			for _, l := range ls {
				if r, ok := l.kind.(*kind.Required); ok && len(l.loc) == base {
					b.required = append(b.required, r.Missing...)
				}
			}
			for _, l := range b.leaves {
				d := 2 * len(l.loc)
				if _, ok := l.kind.(*kind.Type); ok && len(l.loc) == base {
					d-- // this form does not describe such a value at all
				}
				if unknownKind(l.kind) {
					// An unknown field is a failure of its mapping, whose
					// place it ranks at; fewer of them is better.
					b.unknown++
					d -= 2
				}
				b.depth = max(b.depth, d)
			}
			bs = append(bs, b)
		}
		better := func(a, b branch) bool { // a better than b
			if a.depth != b.depth {
				return a.depth > b.depth
			}
			return a.unknown < b.unknown
		}
		best := 0
		for i := range bs {
			if better(bs[i], bs[best]) {
				best = i
			}
		}
		var tied []branch
		for _, b := range bs {
			if !better(bs[best], b) {
				tied = append(tied, b)
			}
		}
		if len(tied) == 1 || bs[best].depth > 2*base {
			return bs[best].leaves
		}
		// Several forms fail alike at the value itself: one error for all.
		var all []leaf
		var names, conflicting []string
		onlyUnknown := true
		for _, b := range tied {
			all = append(all, b.leaves...)
			for _, r := range b.required {
				if !slices.Contains(names, r) {
					names = append(names, r)
				}
			}
			for _, l := range b.leaves {
				if !unknownKind(l.kind) || len(l.loc) != base+1 {
					onlyUnknown = false
				} else if k := l.loc[base]; !slices.Contains(conflicting, k) {
					conflicting = append(conflicting, k)
				}
			}
		}
		mk := func(msg string) []leaf { return []leaf{{loc: e.InstanceLocation, kind: e.ErrorKind, msg: msg}} }
		switch {
		case sameMessages(all):
			return all[:1]
		case onlyUnknown && len(conflicting) > 1:
			// Each form takes one of the fields set, and no more.
			slices.Sort(conflicting)
			return mk("set only one of " + orList(conflicting))
		case len(names) > 1:
			l := mk("missing required field: one of " + orList(names))
			l[0].missing = true
			return l
		}
		if msg, ok := s.alike(all); ok {
			return mk(msg)
		}
		return bs[best].leaves
	case *kind.Group, *kind.Schema, *kind.Reference, *kind.AllOf:
	default:
		if len(e.Causes) == 0 {
			return s.leaves(e.InstanceLocation, e.ErrorKind)
		}
	}
	if len(e.Causes) == 0 {
		return s.leaves(e.InstanceLocation, e.ErrorKind)
	}
	var out []leaf
	for _, c := range e.Causes {
		out = append(out, s.collect(c)...)
	}
	return out
}

// leaves makes the leaves of an error: one per unknown field, placed at
// the field.
func (s *schemaDoc) leaves(loc []string, k jsonschema.ErrorKind) []leaf {
	if ap, ok := k.(*kind.AdditionalProperties); ok {
		var out []leaf
		for _, p := range ap.Properties {
			l := leaf{loc: append(loc[:len(loc):len(loc)], p), kind: k}
			l.msg = s.message(l)
			out = append(out, l)
		}
		return out
	}
	l := leaf{loc: loc, kind: k}
	_, l.missing = k.(*kind.Required)
	l.msg = s.message(l)
	return []leaf{l}
}

func unknownKind(k jsonschema.ErrorKind) bool {
	switch k.(type) {
	case *kind.AdditionalProperties, *kind.FalseSchema:
		return true
	}
	return false
}

// suppressMissing drops "missing field" errors of a mapping that also has
// an unknown field: the unknown one is most likely the missing one, typed
// wrong, and the user is told of it alone.
func suppressMissing(ls []leaf) []leaf {
	unknownAt := map[string]bool{}
	for _, l := range ls {
		if unknownKind(l.kind) && len(l.loc) > 0 {
			unknownAt[strings.Join(l.loc[:len(l.loc)-1], "/")] = true
		}
	}
	if len(unknownAt) == 0 {
		return ls
	}
	var out []leaf
	for _, l := range ls {
		if l.missing && unknownAt[strings.Join(l.loc, "/")] {
			continue
		}
		out = append(out, l)
	}
	return out
}

func sameMessages(ls []leaf) bool {
	for _, l := range ls[1:] {
		if l.msg != ls[0].msg || !slices.Equal(l.loc, ls[0].loc) {
			return false
		}
	}
	return true
}

// alike summarises forms that each refuse the value itself for one reason
// of the same kind: the values or the types they would take.
func (s *schemaDoc) alike(ls []leaf) (string, bool) {
	var want []string
	var got string
	add := func(w string) {
		if !slices.Contains(want, w) {
			want = append(want, w)
		}
	}
	for _, l := range ls {
		switch k := l.kind.(type) {
		case *kind.Const:
			add(display(k.Want))
			got = display(k.Got)
		case *kind.Enum:
			for _, w := range k.Want {
				add(display(w))
			}
			got = display(k.Got)
		default:
			want = nil
		}
		if want == nil {
			break
		}
	}
	if want != nil {
		return "want " + orList(want) + ", got " + got, true
	}
	for _, l := range ls {
		k, ok := l.kind.(*kind.Type)
		if !ok {
			return "", false
		}
		for _, w := range typeWords(k.Want) {
			add(w)
		}
		got = typeWord(k.Got)
	}
	return "want " + orList(want) + ", got " + got, true
}

// fieldPath renders an instance location as Error.Path does:
// binds[0].listeners[1].routes.
func fieldPath(loc []string) string {
	var b strings.Builder
	for _, seg := range loc {
		if _, err := strconv.Atoi(seg); err == nil {
			b.WriteString("[" + seg + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}

// message says in the config's words what failed.
func (s *schemaDoc) message(l leaf) string {
	switch k := l.kind.(type) {
	case *kind.AdditionalProperties, *kind.FalseSchema:
		// reported at the field itself
		if n := len(l.loc); n > 0 {
			return unknownField(l.loc[n-1], s.fields(locSegs(l.loc[:n-1])))
		}
	case *kind.Required:
		if len(k.Missing) == 1 {
			return "missing required field " + k.Missing[0]
		}
		return "missing required fields " + strings.Join(k.Missing, ", ")
	case *kind.Type:
		return "want " + orList(typeWords(k.Want)) + ", got " + typeWord(k.Got)
	case *kind.Enum:
		var want []string
		for _, w := range k.Want {
			want = append(want, display(w))
		}
		return "want " + orList(want) + ", got " + display(k.Got)
	case *kind.Const:
		return "want " + display(k.Want) + ", got " + display(k.Got)
	case *kind.Minimum:
		return "want at least " + ratString(k.Want) + ", got " + ratString(k.Got)
	case *kind.Maximum:
		return "want at most " + ratString(k.Want) + ", got " + ratString(k.Got)
	case *kind.OneOf:
		if len(k.Subschemas) > 1 {
			return "matches more than one of the forms this field may take"
		}
	}
	return l.kind.LocalizedString(printer)
}

var printer = message.NewPrinter(language.English)

func unknownField(key string, known []string) string {
	if slices.Contains(known, key) {
		return fmt.Sprintf("field %q cannot be set here", key)
	}
	fields := map[string]int{}
	for i, k := range known {
		fields[k] = i
	}
	return fmt.Sprintf("unknown field %q%s", key, suggest(key, fields))
}

func ratString(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func display(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case nil:
		return "null"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	return fmt.Sprint(v)
}

// typeWords names the wanted types; null, which every optional field
// takes, is left out when there is another.
func typeWords(ts []string) []string {
	var out []string
	for _, t := range ts {
		w := typeWord(t)
		if (t != "null" || len(ts) == 1) && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

func typeWord(t string) string {
	switch t {
	case "object":
		return "a mapping"
	case "array":
		return "a list"
	case "string":
		return "a string"
	case "integer":
		return "an integer"
	case "number":
		return "a number"
	case "boolean":
		return "true or false"
	case "null":
		return "null"
	}
	return t
}

// orList joins "a", "b" and "c" as `a, b or c`.
func orList(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
