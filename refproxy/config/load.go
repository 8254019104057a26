package config

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agnivade/levenshtein"
	"gopkg.in/yaml.v3"
)

// Error is a config error at one place in one file.
type Error struct {
	// Pos is "file:line" (or "file" when the line is unknown).
	Pos string
	// Path is the field path, such as binds[0].listeners[0].routes[1].matches.
	Path string
	Msg  string
	// NotImplemented marks a field or value the reference implementation
	// accepts and refproxy does not implement (the feature is Path's last
	// field); Msg is then "not implemented by refproxy", with a hint.
	NotImplemented bool
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Pos + ": " + e.Msg
	}
	return e.Pos + ": " + e.Path + ": " + e.Msg
}

// Errors are several config errors, one per line in Error(), in the
// order of the file. errors.As finds each *Error in it.
type Errors []*Error

func (es Errors) Error() string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap gives the errors to errors.Is and errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// asError is one *Error as itself, several as Errors.
func asError(es []*Error) error {
	if len(es) == 1 {
		return es[0]
	}
	return Errors(es)
}

// NotImplemented is the message of a refused feature.
const NotImplemented = "not implemented by refproxy"

// IsNotImplemented reports whether err refuses a config only for features
// refproxy does not implement (every error in it is NotImplemented): the
// config is valid for the reference implementation.
func IsNotImplemented(err error) bool {
	var es Errors
	if errors.As(err, &es) {
		for _, e := range es {
			if !e.NotImplemented {
				return false
			}
		}
		return len(es) > 0
	}
	var e *Error
	return errors.As(err, &e) && e.NotImplemented
}

// Load reads and parses a config file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse decodes config YAML in any style of the reference implementation
// (binds:, gateways: with routes:, llm:) into the one runtime model, binds;
// name is used in errors. In order:
//  1. the document is checked against the published schema (SchemaJSON):
//     every error it finds, each naming name:line and the field path;
//  2. it is decoded; every field and value the reference accepts and
//     refproxy does not implement is refused, all of them at once
//     (IsNotImplemented), and settings that do not change traffic are kept
//     in Config.Ignored;
//  3. gateways, routes and llm become binds (normalize.go) and the result
//     is validated (CEL expressions, addresses, limits).
func Parse(name string, data []byte) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line, msg := yamlLine(err)
		return nil, &Error{Pos: name + line, Msg: msg}
	}
	d := &decoder{name: name, lines: map[string]int{}}
	var root *yaml.Node
	if len(doc.Content) > 0 {
		root = doc.Content[0]
	}
	if root != nil && root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		root = nil // an empty document is an empty config
	}
	sch, err := loadSchema()
	if err != nil {
		return nil, &Error{Pos: name, Msg: err.Error()}
	}
	d.schema = sch
	f := &File{}
	if root != nil {
		if err := expandMerges(root, 0); err != nil {
			return nil, &Error{Pos: name + ":" + strconv.Itoa(root.Line), Msg: err.Error()}
		}
		budget := maxValues
		val, err := d.value(root, "", &budget, 0)
		if err != nil {
			return nil, err
		}
		if errs := sch.validate(val, d.at); len(errs) > 0 {
			return nil, asError(errs)
		}
		if err := d.decode(root, reflect.ValueOf(f).Elem(), "", nil); err != nil {
			return nil, err
		}
	}
	cfg, err := f.normalize(name, d)
	if err != nil {
		return nil, err
	}
	if len(d.refused) > 0 {
		slices.SortStableFunc(d.refused, func(a, b *Error) int { return d.lineOf(a) - d.lineOf(b) })
		return nil, asError(d.refused)
	}
	if err := cfg.validate(func(path string) (string, string) {
		file := d.sourcePath(path)
		pos, _ := d.at(file)
		return pos, file
	}); err != nil {
		return nil, err
	}
	cfg.SourceSum = sha256.Sum256(data)
	return cfg, nil
}

// yamlLine splits a yaml.v3 syntax error ("yaml: line 3: msg") into ":3" and "msg".
func yamlLine(err error) (line, msg string) {
	msg = strings.TrimPrefix(err.Error(), "yaml: ")
	rest, ok := strings.CutPrefix(msg, "line ")
	if !ok {
		return "", msg
	}
	n, m, ok := strings.Cut(rest, ": ")
	if _, e := strconv.Atoi(n); !ok || e != nil {
		return "", msg
	}
	return ":" + n, m
}

// decoder walks yaml nodes into Go values by their yaml tags, remembers
// the line of every field path, and collects the fields it refuses.
type decoder struct {
	name   string
	lines  map[string]int
	schema *schemaDoc
	// refused are the fields and values the reference accepts and
	// refproxy does not implement; ignored the settings it accepts and
	// does not act on.
	refused []*Error
	ignored []Ignored
	// sources maps runtime paths to the file's (normalize.go).
	sources [][2]string
}

// at returns the position of a field path, "file:line" from the nearest
// place with a known line, and that line.
func (d *decoder) at(path string) (string, int) {
	for p := path; ; {
		if l, ok := d.lines[p]; ok {
			return d.name + ":" + strconv.Itoa(l), l
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			return d.name, 0
		}
		p = p[:i]
	}
}

func (d *decoder) lineOf(e *Error) int {
	_, l := d.at(e.Path)
	return l
}

// refuse records a field or value refproxy does not implement; why, when
// set, says more than the path does.
func (d *decoder) refuse(path, why string) {
	msg := NotImplemented
	if why != "" {
		msg += " (" + why + ")"
	}
	pos, _ := d.at(path)
	d.refused = append(d.refused, &Error{Pos: pos, Path: path, Msg: msg, NotImplemented: true})
}

// ignore records a setting refproxy accepts and does not act on.
func (d *decoder) ignore(path, why string) {
	pos, _ := d.at(path)
	d.ignored = append(d.ignored, Ignored{Pos: pos, Path: path, Why: why})
}

var durationType = reflect.TypeFor[Duration]()

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) error {
	return &Error{Pos: d.name + ":" + strconv.Itoa(n.Line), Path: path, Msg: fmt.Sprintf(format, args...)}
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	if n.Tag == "!!null" {
		return "null"
	}
	return fmt.Sprintf("%q", n.Value)
}

// maxValues bounds the values of one document once its aliases are
// expanded: a few aliases can otherwise stand for billions of values.
const maxValues = 1 << 17

// maxDepth bounds the nesting of a document.
const maxDepth = 256

// value converts a yaml node into the JSON value the schema checks
// (numbers as json.Number, mappings with string keys), recording the line
// of every field path on the way.
func (d *decoder) value(n *yaml.Node, path string, budget *int, depth int) (any, error) {
	if *budget--; *budget < 0 {
		return nil, d.fail(n, path, "the document holds more than %d values once its aliases are expanded", maxValues)
	}
	if depth > maxDepth {
		return nil, d.fail(n, path, "nested more than %d levels deep", maxDepth)
	}
	if _, ok := d.lines[path]; !ok {
		d.lines[path] = n.Line
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, d.fail(n, path, "unresolved alias")
		}
		return d.value(n.Alias, path, budget, depth+1)
	case yaml.DocumentNode:
		if len(n.Content) == 1 {
			return d.value(n.Content[0], path, budget, depth+1)
		}
		return nil, nil
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return nil, d.fail(k, path, "mapping key must be a string")
			}
			fp := join(path, k.Value)
			d.lines[fp] = k.Line
			if _, dup := m[k.Value]; dup {
				return nil, d.fail(k, fp, "field set twice")
			}
			val, err := d.value(v, fp, budget, depth+1)
			if err != nil {
				return nil, err
			}
			m[k.Value] = val
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, item := range n.Content {
			var err error
			if s[i], err = d.value(item, fmt.Sprintf("%s[%d]", path, i), budget, depth+1); err != nil {
				return nil, err
			}
		}
		return s, nil
	}
	switch n.Tag {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return n.Value, nil
		}
		return b, nil
	case "!!int":
		v := strings.ReplaceAll(n.Value, "_", "")
		var z big.Int
		sign := ""
		if s, ok := strings.CutPrefix(v, "-"); ok {
			v, sign = s, "-"
		} else {
			v = strings.TrimPrefix(v, "+")
		}
		if strings.HasPrefix(v, "0") && len(v) > 1 && !strings.ContainsAny(v[1:2], "xXoObB") {
			v = "0o" + v[1:] // YAML 1.1 octal, as yaml.v3 reads it
		}
		if _, ok := z.SetString(sign+v, 0); !ok {
			return n.Value, nil
		}
		return json.Number(z.String()), nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return n.Value, nil
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
	}
	return n.Value, nil
}

// expandMerges replaces YAML merge keys ("<<: *base") by the fields they
// bring, so that every later step sees a plain mapping. Fields of the
// mapping itself win over merged ones, as YAML says.
func expandMerges(n *yaml.Node, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested more than %d levels deep", maxDepth)
	}
	if n.Kind == yaml.MappingNode {
		var out, merged []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
				srcs := []*yaml.Node{v}
				if v.Kind == yaml.SequenceNode {
					srcs = v.Content
				}
				for _, src := range srcs {
					for src.Kind == yaml.AliasNode && src.Alias != nil {
						src = src.Alias
					}
					if src.Kind != yaml.MappingNode {
						return fmt.Errorf("line %d: a merge key (<<) takes a mapping or a list of mappings", k.Line)
					}
					if err := expandMerges(src, depth+1); err != nil {
						return err
					}
					merged = append(merged, src.Content...)
				}
				continue
			}
			out = append(out, k, v)
		}
		if merged != nil {
			have := map[string]bool{}
			for i := 0; i < len(out); i += 2 {
				have[out[i].Value] = true
			}
			for i := 0; i+1 < len(merged); i += 2 {
				if !have[merged[i].Value] {
					have[merged[i].Value] = true
					out = append(out, merged[i], merged[i+1])
				}
			}
			n.Content = out
		}
	}
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		for _, c := range n.Content {
			if err := expandMerges(c, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// nodeDecoder is implemented by types whose YAML form is not one Go shape
// (a list or a conditional block, a mapping kept in order).
type nodeDecoder interface {
	decodeYAML(d *decoder, n *yaml.Node, path string, segs []string) error
}

var nodeDecoderType = reflect.TypeFor[nodeDecoder]()

// unset reports whether a node configures nothing: null or an empty list.
// A refused field set so is no use of the feature.
func unset(n *yaml.Node) bool {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null" || n.Kind == yaml.SequenceNode && len(n.Content) == 0
}

// decode decodes n into v; segs are path's field names (the schema's view
// of the place, where list indexes do not matter).
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string, segs []string) error {
	if n.Kind == yaml.AliasNode {
		// Aliases are followed; value() has bounded what they expand to.
		if n.Alias == nil {
			return d.fail(n, path, "unresolved alias")
		}
		return d.decode(n.Alias, v, path, segs)
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		return d.decode(n.Content[0], v, path, segs)
	}
	isNull := n.Kind == yaml.ScalarNode && n.Tag == "!!null"
	if v.Kind() == reflect.Pointer {
		if isNull {
			v.SetZero()
			return nil
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return d.decode(n, v.Elem(), path, segs)
	}
	if v.CanAddr() && v.Addr().Type().Implements(nodeDecoderType) {
		return v.Addr().Interface().(nodeDecoder).decodeYAML(d, n, path, segs)
	}
	if v.Type() == durationType {
		if n.Kind != yaml.ScalarNode || isNull {
			return d.fail(n, path, "want a duration such as 1s, got %s", kindName(n))
		}
		dur, err := time.ParseDuration(n.Value)
		if err != nil {
			return d.fail(n, path, "want a duration such as 1s or 500ms, got %q", n.Value)
		}
		v.SetInt(int64(dur))
		return nil
	}
	switch v.Kind() {
	case reflect.Struct:
		if isNull {
			return nil
		}
		if n.Kind != yaml.MappingNode {
			return d.fail(n, path, "want a mapping, got %s", kindName(n))
		}
		return d.decodeStruct(n, v, path, segs)
	case reflect.Slice:
		if isNull {
			v.SetZero()
			return nil
		}
		if n.Kind != yaml.SequenceNode {
			return d.fail(n, path, "want a list, got %s", kindName(n))
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		isegs := append(segs[:len(segs):len(segs)], "[]")
		for i, item := range n.Content {
			if err := d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i), isegs); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	case reflect.Map:
		if isNull {
			v.SetZero()
			return nil
		}
		if n.Kind != yaml.MappingNode || v.Type().Key().Kind() != reflect.String {
			return d.fail(n, path, "want a mapping, got %s", kindName(n))
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			fp := join(path, k.Value)
			e := reflect.New(v.Type().Elem()).Elem()
			if err := d.decode(val, e, fp, append(segs[:len(segs):len(segs)], k.Value)); err != nil {
				return err
			}
			m.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), e)
		}
		v.Set(m)
		return nil
	case reflect.String:
		if n.Kind != yaml.ScalarNode || isNull {
			return d.fail(n, path, "want a string, got %s", kindName(n))
		}
		v.SetString(n.Value)
		return nil
	case reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
			return d.fail(n, path, "want true or false, got %s", kindName(n))
		}
		v.SetBool(b)
		return nil
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			return d.fail(n, path, "want a non-negative integer, got %s", kindName(n))
		}
		u, err := strconv.ParseUint(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
		max := uint64(math.MaxUint64) >> (64 - v.Type().Bits())
		if err != nil || u > max {
			return d.fail(n, path, "want an integer from 0 to %d, got %s", max, n.Value)
		}
		v.SetUint(u)
		return nil
	case reflect.Float64:
		var f float64
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!float" && n.Tag != "!!int") || n.Decode(&f) != nil {
			return d.fail(n, path, "want a number, got %s", kindName(n))
		}
		v.SetFloat(f)
		return nil
	}
	return d.fail(n, path, "internal error: cannot decode into %s", v.Type())
}

// decodeStruct decodes a mapping into a struct by its yaml tags: each key
// once, a field's own decoder first (fieldDecoder), a key the reference's
// schema knows and refproxy does not refused (or ignored when unset), any
// other unknown key an error naming the closest field.
func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string, segs []string) error {
	fields := structFields(v.Type())
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return d.fail(k, path, "mapping key must be a string")
		}
		fp := join(path, k.Value)
		fsegs := append(segs[:len(segs):len(segs)], k.Value)
		if seen[k.Value] {
			return d.fail(k, fp, "field set twice")
		}
		seen[k.Value] = true
		if fd, ok := v.Addr().Interface().(fieldDecoder); ok {
			handled, err := fd.decodeField(d, k, val, fp, fsegs)
			if err != nil {
				return err
			}
			if handled {
				continue
			}
		}
		idx, ok := fields[k.Value]
		if !ok {
			if d.schema != nil && d.schema.known(segs, k.Value) {
				if !unset(val) {
					d.refuse(fp, "")
				}
				continue
			}
			names := make(map[string]int, len(fields))
			for f := range fields {
				names[f] = 0
			}
			return d.fail(k, fp, "unknown field %q%s", k.Value, suggest(k.Value, names))
		}
		if err := d.decode(val, v.FieldByIndex(idx), fp, fsegs); err != nil {
			return err
		}
	}
	return nil
}

// structFields maps yaml keys to field indexes; the fields of a struct
// tagged ",inline" are the outer struct's own.
func structFields(t reflect.Type) map[string][]int {
	m := make(map[string][]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if opts == "inline" && f.Type.Kind() == reflect.Struct {
			for k, idx := range structFields(f.Type) {
				m[k] = append([]int{i}, idx...)
			}
			continue
		}
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		m[name] = []int{i}
	}
	return m
}

// suggest names the closest known field, for typos like pathPrefx.
func suggest(key string, fields map[string]int) string {
	best, bestD := "", 3
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if dd := levenshtein.ComputeDistance(strings.ToLower(key), strings.ToLower(k)); dd < bestD {
			best, bestD = k, dd
		}
	}
	if best == "" {
		known := slices.Sorted(maps.Keys(fields))
		return " (known fields: " + strings.Join(known, ", ") + ")"
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}
