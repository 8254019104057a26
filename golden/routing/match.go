// Package routing is route selection as the reference implementation does
// it, in one place for refproxy's data plane and for `gwdiag config
// explain`, which evaluates a request against a saved /config_dump: the
// route matches in the shape the config and the dump share (MatchSpec),
// compiled once (Compile), the listener of a bind chosen by hostname, the
// routes of that listener tried in Gateway API precedence (Bind.Select),
// and, for a traced request or a what-if, why each route did or did not
// take the request (Bind.Explain).
//
// It is a leaf under golden/, the contracts the proxy shares with its
// clients: it imports nothing of the project, so the CLI takes nothing of
// the reference proxy to explain a dump.
package routing

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// MatchSpec is one route match as the standalone config writes it and
// /config_dump shows it (the reference's RouteMatch): every set condition
// must hold. A nil Path is a "/" prefix. It is the one type of a match:
// refproxy's config (config.Match), its data plane and dump, the reference
// controller's translation of an HTTPRoute and gwdiag's what-if all hold
// this one.
type MatchSpec struct {
	Path    *PathSpec   `yaml:"path" json:"path,omitempty"`
	Method  string      `yaml:"method" json:"method,omitempty"`
	Headers []ValueSpec `yaml:"headers" json:"headers,omitempty"`
	// Query matches query parameters by name (the first value).
	Query []ValueSpec `yaml:"query" json:"query,omitempty"`
}

// PathSpec holds one of Exact, PathPrefix or Regex; Invalid is the dump's
// "invalid", a path the proxy could not compile, which never matches.
type PathSpec struct {
	Exact      *string `yaml:"exact" json:"exact,omitempty"`
	PathPrefix *string `yaml:"pathPrefix" json:"pathPrefix,omitempty"`
	Regex      *string `yaml:"regex" json:"regex,omitempty"`
	Invalid    bool    `yaml:"-" json:"-"`
}

// ValueSpec matches a header or query parameter by name and value.
type ValueSpec struct {
	Name  string     `yaml:"name" json:"name"`
	Value StringSpec `yaml:"value" json:"value"`
}

// StringSpec holds one of Exact or Regex; Invalid is the dump's "invalid".
type StringSpec struct {
	Exact   *string `yaml:"exact" json:"exact,omitempty"`
	Regex   *string `yaml:"regex" json:"regex,omitempty"`
	Invalid bool    `yaml:"-" json:"-"`
}

// Check says what is wrong with a path match a config wrote: not exactly
// one of exact, pathPrefix or regex, or a regex that does not compile.
func (p *PathSpec) Check() error {
	n := 0
	for _, s := range []*string{p.Exact, p.PathPrefix, p.Regex} {
		if s != nil {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("set exactly one of exact, pathPrefix or regex")
	}
	if p.Regex != nil {
		if _, err := regexp.Compile(*p.Regex); err != nil {
			return fmt.Errorf("bad regex: %v", err)
		}
	}
	return nil
}

// Check says what is wrong with a value match a config wrote: not exactly
// one of exact or regex, or a regex that does not compile.
func (s *StringSpec) Check() error {
	if (s.Exact == nil) == (s.Regex == nil) {
		return fmt.Errorf("set exactly one of exact or regex")
	}
	if s.Regex != nil {
		if _, err := regexp.Compile(*s.Regex); err != nil {
			return fmt.Errorf("bad regex: %v", err)
		}
	}
	return nil
}

// invalidJSON is how the reference's dump writes a match it could not
// compile.
const invalidJSON = `"invalid"`

// UnmarshalJSON reads a path match, or the dump's "invalid".
func (p *PathSpec) UnmarshalJSON(b []byte) error {
	if string(b) == invalidJSON {
		*p = PathSpec{Invalid: true}
		return nil
	}
	type plain PathSpec
	return json.Unmarshal(b, (*plain)(p))
}

// MarshalJSON writes the path match, or "invalid".
func (p PathSpec) MarshalJSON() ([]byte, error) {
	if p.Invalid {
		return []byte(invalidJSON), nil
	}
	type plain PathSpec
	return json.Marshal(plain(p))
}

// UnmarshalJSON reads a value match, or the dump's "invalid".
func (s *StringSpec) UnmarshalJSON(b []byte) error {
	if string(b) == invalidJSON {
		*s = StringSpec{Invalid: true}
		return nil
	}
	type plain StringSpec
	return json.Unmarshal(b, (*plain)(s))
}

// MarshalJSON writes the value match, or "invalid".
func (s StringSpec) MarshalJSON() ([]byte, error) {
	if s.Invalid {
		return []byte(invalidJSON), nil
	}
	type plain StringSpec
	return json.Marshal(plain(s))
}

type pathKind uint8

// Path kinds.
const (
	pathInvalid pathKind = iota
	pathRegex
	pathPrefix
	pathExact
)

// rank is where the reference's RouteSet puts a path kind: an exact path
// first, then a prefix or a regex alike, by length.
func (k pathKind) rank() int {
	switch k {
	case pathExact:
		return 3
	case pathPrefix, pathRegex:
		return 2
	}
	return 0
}

// Match is a compiled MatchSpec.
type Match struct {
	spec    MatchSpec
	kind    pathKind
	path    string // exact path or prefix without its trailing "/"
	re      *regexp.Regexp
	want    string // the path condition, for reasons: `prefix "/api"`
	method  string
	headers []valueMatch
	query   []valueMatch
}

type valueMatch struct {
	name    string // headers: lower case; pseudo-headers keep their colon
	exact   *string
	re      *regexp.Regexp
	invalid bool
	want    string // `exact "blue"`
}

// Compile checks and compiles a match. Regexes are anchored: they match the
// whole path or value, as in the reference.
func Compile(s MatchSpec) (Match, error) {
	m := Match{spec: s, method: s.Method}
	switch p := s.Path; {
	case p == nil:
		m.kind, m.path, m.want = pathPrefix, "", `prefix "/"`
	case p.Invalid:
		m.kind, m.want = pathInvalid, "a path the proxy could not compile"
	case p.Exact != nil:
		m.kind, m.path, m.want = pathExact, *p.Exact, fmt.Sprintf("exact %q", *p.Exact)
	case p.PathPrefix != nil:
		m.kind, m.path, m.want = pathPrefix, strings.TrimRight(*p.PathPrefix, "/"), fmt.Sprintf("prefix %q", *p.PathPrefix)
	case p.Regex != nil:
		re, err := anchored(*p.Regex)
		if err != nil {
			return Match{}, fmt.Errorf("path regex: %w", err)
		}
		m.kind, m.re, m.want = pathRegex, re, fmt.Sprintf("regex %q", *p.Regex)
	default:
		m.kind, m.path, m.want = pathPrefix, "", `prefix "/"`
	}
	var err error
	if m.headers, err = compileValues(s.Headers, "header", true); err != nil {
		return Match{}, err
	}
	if m.query, err = compileValues(s.Query, "query", false); err != nil {
		return Match{}, err
	}
	return m, nil
}

func compileValues(specs []ValueSpec, what string, fold bool) ([]valueMatch, error) {
	var out []valueMatch
	for i, v := range specs {
		if v.Name == "" {
			return nil, fmt.Errorf("%s[%d]: name is empty", what, i)
		}
		vm := valueMatch{name: v.Name, exact: v.Value.Exact, invalid: v.Value.Invalid}
		if fold {
			vm.name = strings.ToLower(v.Name)
		}
		switch {
		case v.Value.Invalid:
			vm.want = "a value the proxy could not compile"
		case v.Value.Regex != nil:
			re, err := anchored(*v.Value.Regex)
			if err != nil {
				return nil, fmt.Errorf("%s %s: regex: %w", what, v.Name, err)
			}
			vm.re, vm.want = re, fmt.Sprintf("regex %q", *v.Value.Regex)
		case v.Value.Exact != nil:
			vm.want = fmt.Sprintf("exact %q", *v.Value.Exact)
		default:
			vm.want = "present"
		}
		out = append(out, vm)
	}
	return out, nil
}

func anchored(expr string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + expr + ")$")
}

// Spec returns the match as written.
func (m *Match) Spec() MatchSpec { return m.spec }

// Request is what matching reads of a request, besides its headers.
type Request struct {
	Method string
	// Path is the percent-decoded path (not normalised).
	Path string
	// Host is the Host header in lower case, without its port.
	Host string
	// Query is the raw query, without "?".
	Query string
}

// Headers returns the first value of a request header, by a lower-case
// name, and whether the request has it; nil is a request without headers.
// It is passed beside the Request, not in it, so that the data plane's
// lookup (a closure over its request) stays on the stack.
type Headers func(name string) (string, bool)

// Kind names the condition a route failed on.
type Kind string

// Conditions, in the order a match checks them.
const (
	KindListener Kind = "listener"
	KindHostname Kind = "hostname"
	KindPath     Kind = "path"
	KindMethod   Kind = "method"
	KindHeader   Kind = "header"
	KindQuery    Kind = "query"
)

// Condition is the first condition a route failed on: what the route
// wants and what the request has.
type Condition struct {
	Kind Kind
	// Name is the header or query parameter.
	Name string
	Want string
	Got  string
	// Missing: the request has no such header or parameter.
	Missing bool
}

// String says why the condition failed, in one sentence.
func (c Condition) String() string {
	switch c.Kind {
	case KindListener:
		return fmt.Sprintf("host %q is not for the route's listener, which serves %s", c.Got, c.Want)
	case KindHostname:
		return fmt.Sprintf("host %q is not among the route's hostnames (%s)", c.Got, c.Want)
	case KindPath:
		return fmt.Sprintf("path %q does not match %s", c.Got, c.Want)
	case KindMethod:
		return fmt.Sprintf("method is %s, the route wants %s", c.Got, c.Want)
	case KindHeader, KindQuery:
		what := "header"
		if c.Kind == KindQuery {
			what = "query parameter"
		}
		if c.Missing {
			return fmt.Sprintf("%s %s is missing, the route wants %s", what, c.Name, c.Want)
		}
		return fmt.Sprintf("%s %s is %q, the route wants %s", what, c.Name, c.Got, c.Want)
	}
	return ""
}

// depth orders failed conditions: a match that fails later got further.
func (c Condition) depth() int {
	switch c.Kind {
	case KindHostname:
		return 1
	case KindPath:
		return 2
	case KindMethod:
		return 3
	case KindHeader:
		return 4
	case KindQuery:
		return 5
	}
	return 0
}

// check tests the match against r and returns the first failed condition
// (Kind "" when it matches). It builds no strings: the condition holds the
// request's own strings and those compiled with the match, so a request
// nobody traces allocates nothing here.
func (m *Match) check(r *Request, h Headers) Condition {
	if !m.pathMatches(r.Path) {
		return Condition{Kind: KindPath, Want: m.want, Got: r.Path}
	}
	if m.method != "" && m.method != r.Method {
		return Condition{Kind: KindMethod, Want: m.method, Got: r.Method}
	}
	for i := range m.headers {
		hm := &m.headers[i]
		v, ok := r.header(h, hm.name)
		if !ok || !hm.matches(v) {
			return Condition{Kind: KindHeader, Name: hm.name, Want: hm.want, Got: v, Missing: !ok}
		}
	}
	for i := range m.query {
		q := &m.query[i]
		v, ok := queryValue(r.Query, q.name)
		if !ok || !q.matches(v) {
			return Condition{Kind: KindQuery, Name: q.name, Want: q.want, Got: v, Missing: !ok}
		}
	}
	return Condition{}
}

// Matches reports whether r (with headers h) satisfies every condition.
func (m *Match) Matches(r *Request, h Headers) bool { return m.check(r, h).Kind == "" }

// pathMatches is the reference's path test. A prefix matches whole
// segments (/foo matches /foo and /foo/bar, not /foobar), with trailing
// slashes of the prefix and the path ignored.
func (m *Match) pathMatches(p string) bool {
	switch m.kind {
	case pathExact:
		return p == m.path
	case pathPrefix:
		rest, ok := strings.CutPrefix(strings.TrimRight(p, "/"), m.path)
		return ok && (rest == "" || rest[0] == '/')
	case pathRegex:
		return m.re.MatchString(p)
	}
	return false
}

func (v *valueMatch) matches(s string) bool {
	switch {
	case v.invalid:
		return false
	case v.re != nil:
		return v.re.MatchString(s)
	case v.exact != nil:
		return s == *v.exact
	}
	return true
}

// header looks a header up; the pseudo-headers of HTTP/2 (:method,
// :path, :authority, :scheme), which the reference also matches on, come
// from the request line.
func (r *Request) header(h Headers, name string) (string, bool) {
	if len(name) > 0 && name[0] == ':' {
		switch name {
		case ":method":
			return r.Method, true
		case ":path":
			return r.Path, true
		case ":authority":
			return r.Host, true
		}
		return "", false
	}
	if h == nil {
		return "", false
	}
	return h(name)
}

// queryValue returns the first value of the query parameter name in the
// raw query q. It decodes only a pair that needs it, so a plain query
// costs no allocation.
func queryValue(q, name string) (string, bool) {
	for q != "" {
		var pair string
		pair, q, _ = strings.Cut(q, "&")
		k, v, _ := strings.Cut(pair, "=")
		if strings.ContainsAny(k, "%+") {
			dk, err := url.QueryUnescape(k)
			if err != nil {
				continue
			}
			k = dk
		}
		if k != name {
			continue
		}
		if strings.ContainsAny(v, "%+") {
			dv, err := url.QueryUnescape(v)
			if err != nil {
				return v, true
			}
			v = dv
		}
		return v, true
	}
	return "", false
}

// rank orders matches by the reference's precedence (Gateway API's): an
// exact path, then the longest prefix or regex, then a method, then the
// most headers, then the most query parameters. It returns <0 when a goes
// first.
func rank(a, b *Match) int {
	switch {
	case a.kind.rank() != b.kind.rank():
		return b.kind.rank() - a.kind.rank()
	case a.pathLen() != b.pathLen():
		return b.pathLen() - a.pathLen()
	case (a.method != "") != (b.method != ""):
		if a.method != "" {
			return -1
		}
		return 1
	case len(a.headers) != len(b.headers):
		return len(b.headers) - len(a.headers)
	}
	return len(b.query) - len(a.query)
}

// pathLen is the length the reference ranks a path by: the exact path or
// prefix as written, or the regex's source.
func (m *Match) pathLen() int {
	p := m.spec.Path
	switch {
	case p == nil || p.Invalid:
		return 1 // "/"
	case p.Exact != nil:
		return len(*p.Exact)
	case p.PathPrefix != nil:
		return len(*p.PathPrefix)
	case p.Regex != nil:
		return len(*p.Regex)
	}
	return 1
}
