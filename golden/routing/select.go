package routing

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Route is one route of a listener: its key (the identifier traces and
// the dump use), hostnames and matches.
type Route struct {
	Key string
	// Hostnames restrict the Host headers the route serves, exactly or as
	// "*.example.com"; none serves every host.
	Hostnames []string
	Matches   []Match
	// ID is the owner's index of the route (the data plane's route), not
	// used here.
	ID int
}

// NewRoute compiles a route's matches; no match is a "/" prefix.
func NewRoute(key string, id int, hostnames []string, specs []MatchSpec) (*Route, error) {
	r := &Route{Key: key, ID: id}
	for _, h := range hostnames {
		r.Hostnames = append(r.Hostnames, strings.ToLower(h))
	}
	if len(specs) == 0 {
		specs = []MatchSpec{{}}
	}
	for i, s := range specs {
		m, err := Compile(s)
		if err != nil {
			return nil, fmt.Errorf("route %s: matches[%d]: %w", key, i, err)
		}
		r.Matches = append(r.Matches, m)
	}
	return r, nil
}

// ShowHeaderValues makes the reasons of r show the value a header
// condition wants as shown(name, value) says (name lower case; value the
// exact value, or the pattern of a regex): a data plane shows the values
// of credential headers redacted, as its traces show requests'. Matching
// is unchanged. Call it before r serves.
func (r *Route) ShowHeaderValues(shown func(name, value string) string) {
	for i := range r.Matches {
		for j := range r.Matches[i].headers {
			vm := &r.Matches[i].headers[j]
			switch spec := r.Matches[i].spec.Headers[j].Value; {
			case vm.invalid:
			case spec.Regex != nil:
				vm.want = fmt.Sprintf("regex %q", shown(vm.name, *spec.Regex))
			case spec.Exact != nil:
				vm.want = fmt.Sprintf("exact %q", shown(vm.name, *spec.Exact))
			}
		}
	}
}

// entry is one match of one route in a listener's precedence order.
type entry struct {
	route *Route
	match int
}

// Listener is one listener of a bind: the Host headers it serves and its
// routes, indexed by hostname as the reference indexes them.
type Listener struct {
	Key string
	// Hostname is "" (every host), an exact host or "*.example.com".
	Hostname string
	Routes   []*Route
	// exact and wildcard index the route matches by the hostnames their
	// routes name (a wildcard by its suffix without "*."), none those of
	// routes without hostnames; each list in precedence order.
	exact, wildcard map[string][]entry
	none            []entry
}

// NewListener indexes routes for selection.
func NewListener(key, hostname string, routes []*Route) *Listener {
	l := &Listener{Key: key, Hostname: strings.ToLower(hostname), Routes: routes,
		exact: map[string][]entry{}, wildcard: map[string][]entry{}}
	for _, r := range routes {
		for i := range r.Matches {
			e := entry{route: r, match: i}
			if len(r.Hostnames) == 0 {
				l.none = append(l.none, e)
				continue
			}
			for _, h := range r.Hostnames {
				if suffix, ok := strings.CutPrefix(h, "*."); ok {
					l.wildcard[suffix] = append(l.wildcard[suffix], e)
				} else {
					l.exact[h] = append(l.exact[h], e)
				}
			}
		}
	}
	order := func(es []entry) {
		slices.SortStableFunc(es, func(a, b entry) int {
			return cmp.Or(rank(&a.route.Matches[a.match], &b.route.Matches[b.match]), cmp.Compare(a.route.Key, b.route.Key))
		})
	}
	for _, es := range l.exact {
		order(es)
	}
	for _, es := range l.wildcard {
		order(es)
	}
	order(l.none)
	return l
}

// candidates calls fn with the route lists registered for host, in the
// reference's order: the exact host, then wildcards from the longest
// suffix to the shortest, then routes without hostnames. fn returns true
// to stop.
func (l *Listener) candidates(host string, fn func([]entry) bool) {
	if !strings.HasPrefix(host, "*.") {
		if es, ok := l.exact[host]; ok && fn(es) {
			return
		}
	}
	for rest := host; ; {
		i := strings.IndexByte(rest, '.')
		if i < 0 {
			break
		}
		rest = rest[i+1:]
		if es, ok := l.wildcard[rest]; ok && fn(es) {
			return
		}
	}
	fn(l.none)
}

// Bind is the listeners of one port.
type Bind struct {
	Listeners []*Listener
}

// listenerFor is the listener serving host: one with that exact hostname,
// else the longest wildcard that covers it, else one without hostname.
func (b *Bind) listenerFor(host string) *Listener {
	var best *Listener
	for _, l := range b.Listeners {
		switch {
		case l.Hostname == host:
			return l
		case strings.HasPrefix(l.Hostname, "*") && strings.HasSuffix(host, l.Hostname[1:]) && len(host) > len(l.Hostname)-1:
			if best == nil || best.Hostname == "" || len(l.Hostname) > len(best.Hostname) {
				best = l
			}
		case l.Hostname == "" && best == nil:
			best = l
		}
	}
	return best
}

// Select returns the route that takes r and the index of its match, or nil.
// It allocates nothing: it runs on every request.
func (b *Bind) Select(r *Request, h Headers) (*Route, int) {
	l := b.listenerFor(r.Host)
	if l == nil {
		return nil, -1
	}
	var found *Route
	match := -1
	l.candidates(r.Host, func(es []entry) bool {
		for _, e := range es {
			if e.route.Matches[e.match].check(r, h).Kind == "" {
				found, match = e.route, e.match
				return true
			}
		}
		return false
	})
	return found, match
}

// Result is what became of one route for a request.
type Result string

// Results of Verdict.
const (
	// Selected: the route takes the request.
	Selected Result = "selected"
	// Shadowed: the route matches too, but the selected one goes first.
	Shadowed Result = "shadowed"
	// NoMatch: a condition of every match failed (Verdict.Failed is the
	// closest match's first failed condition).
	NoMatch Result = "noMatch"
)

// Verdict is why one route did or did not take a request.
type Verdict struct {
	Route  *Route
	Result Result
	// Match is the index of the match that matched or came closest.
	Match int
	// Failed is the condition the closest match failed on (NoMatch).
	Failed Condition
	// Before is the selected route's key (Shadowed).
	Before string
}

// Reason says in one sentence why the route did or did not take the request.
func (v Verdict) Reason() string {
	switch v.Result {
	case Selected:
		return "matched " + v.Route.Matches[v.Match].describe()
	case Shadowed:
		return fmt.Sprintf("matches too (%s), but %s goes first", v.Route.Matches[v.Match].describe(), v.Before)
	}
	s := v.Failed.String()
	if len(v.Route.Matches) > 1 {
		s = fmt.Sprintf("matches[%d]: %s", v.Match, s)
	}
	return s
}

// describe is the match's conditions, for reasons.
func (m *Match) describe() string {
	parts := []string{"path " + m.want}
	if m.method != "" {
		parts = append(parts, "method "+m.method)
	}
	for _, h := range m.headers {
		parts = append(parts, "header "+h.name+" "+h.want)
	}
	for _, q := range m.query {
		parts = append(parts, "query "+q.name+" "+q.want)
	}
	return strings.Join(parts, ", ")
}

// Selection is a request's route selection with its reasons.
type Selection struct {
	// Listener serves the request's host; nil when no listener does.
	Listener *Listener
	// Route took the request (nil: none); Match is its matching match.
	Route *Route
	Match int
	// Evaluated are the keys of the routes registered for the request's
	// host on the listener, sorted: the reference's evaluatedRoutes.
	Evaluated []string
	// Verdicts are every route of the bind: the listener's routes in the
	// order they were tried, then those of its other listeners.
	Verdicts []Verdict
}

// Explain selects a route as Select does and says why each route of the
// bind did or did not take the request. It allocates; it runs only for
// traced requests and what-ifs.
func (b *Bind) Explain(r *Request, h Headers) Selection {
	s := Selection{Listener: b.listenerFor(r.Host), Match: -1}
	seen := map[*Route]bool{}
	if l := s.Listener; l != nil {
		l.candidates(r.Host, func(es []entry) bool {
			for _, e := range es {
				if !seen[e.route] {
					s.Evaluated = append(s.Evaluated, e.route.Key)
				}
				seen[e.route] = true
			}
			return false
		})
		slices.Sort(s.Evaluated)
		s.Evaluated = slices.Compact(s.Evaluated)
		var order []*Route
		verdicts := map[*Route]*Verdict{}
		l.candidates(r.Host, func(es []entry) bool {
			for _, e := range es {
				v := verdicts[e.route]
				if v == nil {
					v = &Verdict{Route: e.route, Result: NoMatch, Match: -1}
					verdicts[e.route] = v
					order = append(order, e.route)
				}
				if v.Result != NoMatch {
					continue
				}
				c := e.route.Matches[e.match].check(r, h)
				switch {
				case c.Kind == "" && s.Route == nil:
					v.Result, v.Match = Selected, e.match
					s.Route, s.Match = e.route, e.match
				case c.Kind == "":
					v.Result, v.Match, v.Before = Shadowed, e.match, s.Route.Key
				case v.Match < 0 || c.depth() > v.Failed.depth():
					v.Failed, v.Match = c, e.match
				}
			}
			return false
		})
		for _, rt := range order {
			s.Verdicts = append(s.Verdicts, *verdicts[rt])
		}
		// The listener's routes for other hosts.
		for _, rt := range l.Routes {
			if verdicts[rt] == nil {
				s.Verdicts = append(s.Verdicts, Verdict{Route: rt, Result: NoMatch, Match: 0,
					Failed: Condition{Kind: KindHostname, Want: strings.Join(rt.Hostnames, ", "), Got: r.Host}})
			}
		}
	}
	for _, l := range b.Listeners {
		if l == s.Listener {
			continue
		}
		for _, rt := range l.Routes {
			s.Verdicts = append(s.Verdicts, Verdict{Route: rt, Result: NoMatch, Match: 0,
				Failed: Condition{Kind: KindListener, Want: listenerHosts(l.Hostname), Got: r.Host}})
		}
	}
	return s
}

// Closest returns the verdict of the route of the request's listener
// that came closest to taking the request (its match failed latest:
// hostname, then path, method, header, query; the first on a tie), and
// how many routes of the listener did not match; nil when none was tried.
func (s Selection) Closest() (*Verdict, int) {
	var best *Verdict
	n := 0
	for i := range s.Verdicts {
		v := &s.Verdicts[i]
		if v.Result != NoMatch || v.Failed.Kind == KindListener {
			continue
		}
		n++
		if best == nil || v.Failed.depth() > best.Failed.depth() {
			best = v
		}
	}
	return best, n
}

func listenerHosts(h string) string {
	if h == "" {
		return "every host"
	}
	return h
}
