package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Error is a config error at one place in one file.
type Error struct {
	// Pos is "file:line" (or "file" when the line is unknown).
	Pos string
	// Path is the field path, such as binds[0].listeners[0].routes[1].matches.
	Path string
	Msg  string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Pos + ": " + e.Msg
	}
	return e.Pos + ": " + e.Path + ": " + e.Msg
}

// Load reads and parses a config file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse decodes config YAML; name is used in errors. Unknown fields, wrong
// types and invalid values are errors naming name:line and the field path.
func Parse(name string, data []byte) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line, msg := yamlLine(err)
		return nil, &Error{Pos: name + line, Msg: msg}
	}
	cfg := &Config{Source: name}
	d := decoder{name: name, lines: map[string]int{}}
	if len(doc.Content) > 0 {
		root := doc.Content[0]
		if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
			// An empty document is an empty config.
		} else if err := d.decode(root, reflect.ValueOf(cfg).Elem(), ""); err != nil {
			return nil, err
		}
	}
	at := func(path string) string {
		for p := path; ; {
			if l, ok := d.lines[p]; ok {
				return name + ":" + strconv.Itoa(l)
			}
			i := strings.LastIndexAny(p, ".[")
			if i < 0 {
				return name
			}
			p = p[:i]
		}
	}
	if err := cfg.validate(at); err != nil {
		return nil, err
	}
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

// decoder walks yaml nodes into Go values by their yaml tags, rejecting what
// the types do not name, and remembers the line of every field path.
type decoder struct {
	name  string
	lines map[string]int
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

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) error {
	d.lines[path] = n.Line
	if n.Kind == yaml.AliasNode {
		// Aliases are resolved by following them once; yaml.v3 rejects cycles.
		if n.Alias == nil {
			return d.fail(n, path, "unresolved alias")
		}
		return d.decode(n.Alias, v, path)
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		return d.decode(n.Content[0], v, path)
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
		return d.decode(n, v.Elem(), path)
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
		fields := structFields(v.Type())
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return d.fail(k, path, "mapping key must be a string")
			}
			fp := join(path, k.Value)
			idx, ok := fields[k.Value]
			if !ok {
				return d.fail(k, fp, "unknown field %q%s", k.Value, suggest(k.Value, fields))
			}
			if seen[k.Value] {
				return d.fail(k, fp, "field set twice")
			}
			seen[k.Value] = true
			if err := d.decode(val, v.Field(idx), fp); err != nil {
				return err
			}
		}
		return nil
	case reflect.Slice:
		if isNull {
			v.SetZero()
			return nil
		}
		if n.Kind != yaml.SequenceNode {
			return d.fail(n, path, "want a list, got %s", kindName(n))
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			if err := d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		v.Set(s)
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
	}
	return d.fail(n, path, "internal error: cannot decode into %s", v.Type())
}

// structFields maps yaml keys to field indexes.
func structFields(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" || !f.IsExported() {
			continue
		}
		m[tag] = i
	}
	return m
}

// suggest names the closest known field, for typos like pathPrefx.
func suggest(key string, fields map[string]int) string {
	best, bestD := "", 3
	for k := range fields {
		if dd := distance(strings.ToLower(key), strings.ToLower(k)); dd < bestD {
			best, bestD = k, dd
		}
	}
	if best == "" {
		known := make([]string, 0, len(fields))
		for k := range fields {
			known = append(known, k)
		}
		slices.Sort(known)
		return " (known fields: " + strings.Join(known, ", ") + ")"
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// IsConfigError reports whether err is a *Error.
func IsConfigError(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
