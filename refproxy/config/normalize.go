package config

import (
	"cmp"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
)

// DefaultLLMPort is the port of the llm shorthand's own bind.
const DefaultLLMPort = 4000

// LLMRouteName is the name of the route that serves an llm block, in
// namespace LLMNamespace; its key is the name (on the llm block's own
// bind) or the listener's key and the name (on a gateway), as the
// reference keys it.
const (
	LLMRouteName = "llm:request"
	LLMNamespace = "internal"
	llmListener  = "llm"
)

// openAIPresets are the reference's OpenAI-compatible provider presets.
// refproxy keeps no table of their endpoints: a model using one names it
// with params.baseUrl.
var openAIPresets = []string{"cohere", "ollama", "baseten", "cerebras", "deepinfra", "deepseek", "groq",
	"huggingface", "mistral", "openrouter", "togetherai", "xai", "fireworks"}

// listenerRef is one listener of the runtime binds.
type listenerRef struct{ bind, listener int }

// normalizer maps a File onto Config: binds first (the file's binds keep
// their indexes), then one bind per gateway, then the llm block's own. It
// remembers where each runtime path came from, so that errors found on
// the runtime model name the file's fields.
type normalizer struct {
	d    *decoder
	cfg  *Config
	errs []*Error
	// sources maps runtime path prefixes to file paths, longest first.
	sources [][2]string
}

func (f *File) normalize(name string, d *decoder) (*Config, error) {
	n := &normalizer{d: d, cfg: &Config{Config: f.Config, Policies: f.Policies, Source: name}}
	if s := f.Config; s != nil && s.Logging != nil && s.Logging.Format == "json" {
		d.ignore("config.logging.format", "refproxy logs text")
	}
	for bi, b := range f.Binds {
		n.refuseBind(b, fmt.Sprintf("binds[%d]", bi))
	}
	n.cfg.Binds = append(n.cfg.Binds, f.Binds...)
	refs := n.gateways(f.Gateways)
	for ri, r := range f.Routes {
		n.attach(r, ri, refs, f.Gateways)
	}
	if f.LLM != nil {
		n.llm(f.LLM, refs, f.Gateways)
	}
	if len(n.errs) > 0 {
		slices.SortStableFunc(n.errs, func(a, b *Error) int { return d.lineOf(a) - d.lineOf(b) })
		return nil, asError(n.errs)
	}
	n.cfg.Ignored = d.ignored
	// Longest prefixes first, so that a route's mapping wins over its bind's.
	slices.SortStableFunc(n.sources, func(a, b [2]string) int { return cmp.Compare(len(b[0]), len(a[0])) })
	d.sources = n.sources
	return n.cfg, nil
}

func (n *normalizer) fail(path, format string, args ...any) {
	pos, _ := n.d.at(path)
	n.errs = append(n.errs, &Error{Pos: pos, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// source records that the runtime path came from the file's path.
func (n *normalizer) source(runtime, file string) {
	n.sources = append(n.sources, [2]string{runtime, file})
}

// refuseProtocol refuses the protocols refproxy does not serve.
func (n *normalizer) refuseProtocol(path, protocol string) {
	switch protocol {
	case "", "HTTP":
	default:
		n.d.refuse(path, "protocol "+protocol+"; refproxy serves HTTP")
	}
}

func (n *normalizer) refuseBind(b Bind, path string) {
	if b.TunnelProtocol != "" && b.TunnelProtocol != "direct" {
		n.d.refuse(path+".tunnelProtocol", "tunnel protocol "+b.TunnelProtocol)
	}
	if b.Mode != "" && b.Mode != "standard" {
		n.d.refuse(path+".mode", b.Mode+" binds")
	}
	for li, l := range b.Listeners {
		lp := fmt.Sprintf("%s.listeners[%d]", path, li)
		n.refuseProtocol(lp+".protocol", l.Protocol)
		for ri, r := range l.Routes {
			n.refuseRoute(r, fmt.Sprintf("%s.routes[%d]", lp, ri))
		}
	}
}

func (n *normalizer) refuseRoute(r Route, path string) {
	for bi, b := range r.Backends {
		if b.AI != nil && b.AI.Tokenize {
			n.d.refuse(fmt.Sprintf("%s.backends[%d].ai.tokenize", path, bi), "counting input tokens before the request")
		}
	}
}

// gateways adds one bind per gateway and returns what each reference
// (<gateway>, <gateway>/<listener>) names.
func (n *normalizer) gateways(gws Gateways) map[string][]listenerRef {
	refs := map[string][]listenerRef{}
	for _, g := range gws {
		gp := "gateways." + g.Name
		if g.Port == nil {
			n.fail(gp, "missing required field port")
			continue
		}
		bi := len(n.cfg.Binds)
		b := Bind{Port: *g.Port}
		n.source(fmt.Sprintf("binds[%d]", bi), gp)
		if len(g.Listeners) == 0 {
			n.refuseProtocol(gp+".protocol", g.Protocol)
			b.Listeners = []Listener{{Protocol: "HTTP", Policies: g.GatewayPolicies.orNil()}}
			n.source(fmt.Sprintf("binds[%d].listeners[0].policies", bi), gp)
			refs[g.Name] = []listenerRef{{bi, 0}}
		} else {
			if g.Protocol != "" || g.GatewayPolicies.orNil() != nil {
				n.fail(gp, "a gateway with listeners sets protocol and policies on its listeners")
			}
			for li, l := range g.Listeners {
				lp := fmt.Sprintf("%s.listeners[%d]", gp, li)
				n.refuseProtocol(lp+".protocol", l.Protocol)
				n.source(fmt.Sprintf("binds[%d].listeners[%d]", bi, li), lp)
				n.source(fmt.Sprintf("binds[%d].listeners[%d].policies", bi, li), lp)
				b.Listeners = append(b.Listeners, Listener{Name: l.Name, Hostname: l.Hostname, Protocol: "HTTP", Policies: l.GatewayPolicies.orNil()})
				name := b.Listeners[li].ListenerName(li)
				refs[g.Name+"/"+name] = []listenerRef{{bi, li}}
				refs[g.Name] = append(refs[g.Name], listenerRef{bi, li})
			}
		}
		n.cfg.Binds = append(n.cfg.Binds, b)
	}
	return refs
}

func (p GatewayPolicies) orNil() *GatewayPolicies {
	if p.CORS == nil && p.Authorization == nil && p.APIKey == nil && p.BasicAuth == nil && p.JWTAuth == nil {
		return nil
	}
	return &p
}

// resolve returns the listeners of gateway references; with none, the
// gateway named default's.
func (n *normalizer) resolve(gwRefs GatewayRefs, refs map[string][]listenerRef, path string, gws Gateways) []listenerRef {
	if len(gwRefs) == 0 {
		if !slices.ContainsFunc(gws, func(g NamedGateway) bool { return g.Name == "default" }) {
			n.fail(path, "missing gateways: no gateway is named default")
			return nil
		}
		gwRefs = GatewayRefs{"default"}
	}
	var out []listenerRef
	for i, r := range gwRefs {
		ls, ok := refs[r]
		if !ok {
			p := path + ".gateways"
			if len(gwRefs) > 1 {
				p = fmt.Sprintf("%s[%d]", p, i)
			}
			n.fail(p, "unknown gateway %q (want <gateway> or <gateway>/<listener> of gateways)", r)
			continue
		}
		for _, l := range ls {
			if !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
	}
	return out
}

// attach adds a top-level route to the listeners it names.
func (n *normalizer) attach(r AttachedRoute, ri int, refs map[string][]listenerRef, gws Gateways) {
	path := fmt.Sprintf("routes[%d]", ri)
	n.refuseRoute(r.Route, path)
	for _, l := range n.resolve(r.Gateways, refs, path, gws) {
		lst := &n.cfg.Binds[l.bind].Listeners[l.listener]
		n.source(fmt.Sprintf("binds[%d].listeners[%d].routes[%d]", l.bind, l.listener, len(lst.Routes)), path)
		lst.Routes = append(lst.Routes, r.Route)
	}
}

// llm adds the llm block's route: on its own bind, or on the gateways it
// names (the default gateway when it sets neither gateways nor port).
func (n *normalizer) llm(l *LLM, refs map[string][]listenerRef, gws Gateways) {
	const path = "llm"
	router := n.llmRouter(l)
	rt := Route{Name: LLMRouteName, Namespace: LLMNamespace, LLM: router}
	if p := l.Policies; p != nil {
		pol := &Policies{LocalRateLimit: p.LocalRateLimit, RemoteRateLimit: p.RemoteRateLimit, CORS: p.CORS, Authorization: p.Authorization,
			APIKey: p.APIKey, BasicAuth: p.BasicAuth, JWTAuth: p.JWTAuth, RateLimitError: p.RateLimitError, RateLimitHeaders: p.RateLimitHeaders}
		if pol.LocalRateLimit != nil || pol.RemoteRateLimit != nil || pol.CORS != nil || pol.Authorization != nil ||
			pol.APIKey != nil || pol.BasicAuth != nil || pol.JWTAuth != nil || pol.RateLimitError != "" || pol.RateLimitHeaders != nil {
			rt.Policies = pol
		}
	}
	hasDefault := slices.ContainsFunc(gws, func(g NamedGateway) bool { return g.Name == "default" })
	if len(l.Gateways) > 0 || (l.Port == nil && hasDefault) {
		if l.Port != nil {
			n.fail(path+".port", "llm.gateways cannot be used with llm.port")
		}
		for _, ref := range n.resolve(l.Gateways, refs, path, gws) {
			b := n.cfg.Binds[ref.bind]
			lst := &n.cfg.Binds[ref.bind].Listeners[ref.listener]
			r := rt
			r.Key = ListenerKey(b, *lst, ref.listener) + "/" + LLMRouteName
			n.source(fmt.Sprintf("binds[%d].listeners[%d].routes[%d]", ref.bind, ref.listener, len(lst.Routes)), path)
			lst.Routes = append(lst.Routes, r)
		}
		return
	}
	port := uint16(DefaultLLMPort)
	if l.Port != nil {
		port = *l.Port
	}
	rt.Key = LLMRouteName
	bi := len(n.cfg.Binds)
	n.source(fmt.Sprintf("binds[%d]", bi), path)
	n.source(fmt.Sprintf("binds[%d].listeners[0].routes[0]", bi), path)
	n.cfg.Binds = append(n.cfg.Binds, Bind{Port: port, Listeners: []Listener{{Name: llmListener, Protocol: "HTTP", Routes: []Route{rt}}}})
}

// llmRouter builds the models of an llm block, most specific first.
func (n *normalizer) llmRouter(l *LLM) *LLMRouter {
	providers := map[string]LLMProvider{}
	for pi, p := range l.Providers {
		if _, dup := providers[p.Name]; dup {
			n.fail(fmt.Sprintf("llm.providers[%d].name", pi), "provider %q is named twice", p.Name)
		}
		providers[p.Name] = p
	}
	type indexed struct {
		i int
		m LLMModel
	}
	var models []indexed
	for mi, m := range l.Models {
		models = append(models, indexed{mi, m})
	}
	// Most specific first: the more characters besides *, the sooner.
	slices.SortStableFunc(models, func(a, b indexed) int {
		return cmp.Compare(len(strings.ReplaceAll(b.m.Name, "*", "")), len(strings.ReplaceAll(a.m.Name, "*", "")))
	})
	r := &LLMRouter{}
	for order, im := range models {
		m, mp := im.m, fmt.Sprintf("llm.models[%d]", im.i)
		if w := strings.Count(m.Name, "*"); w > 1 || w == 1 && m.Name != "*" && !strings.HasPrefix(m.Name, "*") && !strings.HasSuffix(m.Name, "*") {
			n.fail(mp+".name", "a model name has at most one *, at its start or end: %q", m.Name)
			continue
		}
		params, kind := m.Params, m.Provider
		if ref := m.Provider.Reference; ref != "" {
			p, ok := providers[ref]
			switch {
			case !ok:
				n.fail(mp+".provider.reference", "unknown provider %q (want a name of llm.providers)", ref)
				continue
			case p.Provider.Reference != "":
				n.fail(mp+".provider.reference", "provider %q refers to another provider", ref)
				continue
			case params != (LLMParams{Model: params.Model}):
				n.fail(mp+".params", "a model that refers to a provider sets only params.model")
				continue
			}
			params, kind = p.Params, p.Provider
			if m.Params.Model != "" {
				params.Model = m.Params.Model
			}
		}
		be, ok := n.llmBackend(m, order, params, kind, mp)
		if !ok {
			continue
		}
		rm := RouterModel{Pattern: m.Name, Internal: m.Visibility == "internal", Backend: be}
		for _, mt := range m.Matches {
			rm.Matches = append(rm.Matches, mt.Headers)
		}
		r.Models = append(r.Models, rm)
	}
	return r
}

// llmBackend is a model's AI backend.
func (n *normalizer) llmBackend(m LLMModel, order int, p LLMParams, kind LLMProviderKind, mp string) (Backend, bool) {
	switch k := kind.Name; {
	case k == "":
		return Backend{}, false // a custom provider, refused where it is set
	case strings.EqualFold(k, "openai"):
	case slices.Contains(openAIPresets, k):
		if p.BaseURL == "" && p.HostOverride == "" {
			n.d.refuse(mp+".provider", "the default endpoint of provider "+k+": set params.baseUrl")
			return Backend{}, false
		}
	default:
		n.d.refuse(mp+".provider", "provider "+k+"; refproxy implements OpenAI-compatible providers")
		return Backend{}, false
	}
	if p.Tokenize {
		n.d.refuse(mp+".params.tokenize", "counting input tokens before the request")
	}
	name := fmt.Sprintf("llm:model:%s:%d", m.Name, order)
	if m.ID != "" {
		name = "llm:model:" + m.ID
	}
	ai := &AIBackend{Name: name, HostOverride: p.HostOverride, PathOverride: p.PathOverride, PathPrefix: p.PathPrefix}
	if p.Model != "" {
		ai.Provider.OpenAI = &OpenAIProvider{Model: &p.Model}
	} else {
		ai.Provider.OpenAI = &OpenAIProvider{}
	}
	if p.BaseURL != "" {
		u, err := url.Parse(p.BaseURL)
		switch {
		case err != nil:
			n.fail(mp+".params.baseUrl", "%v", err)
			return Backend{}, false
		case u.Scheme != "http" && u.Scheme != "https":
			n.fail(mp+".params.baseUrl", "want an http or https URL, got %q", p.BaseURL)
			return Backend{}, false
		case u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Host == "":
			n.fail(mp+".params.baseUrl", "want scheme://host[:port][/path], without user, query or fragment")
			return Backend{}, false
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		if ai.HostOverride == "" {
			ai.HostOverride = net.JoinHostPort(u.Hostname(), port)
			ai.TLS = u.Scheme == "https"
		}
		if ai.PathOverride == "" && ai.PathPrefix == "" {
			ai.PathPrefix = cmp.Or(strings.TrimSuffix(u.Path, "/"), "/")
		}
	}
	if ai.HostOverride != "" {
		if err := checkAddr(ai.HostOverride, 1, true); err != nil {
			n.fail(mp+".params", "%v", err)
			return Backend{}, false
		}
	}
	if p.APIKey != "" {
		var missing []string
		key := os.Expand(string(p.APIKey), func(v string) string {
			s, ok := os.LookupEnv(v)
			if !ok {
				missing = append(missing, "$"+v)
			}
			return s
		})
		if len(missing) > 0 {
			n.d.ignore(mp+".params.apiKey", strings.Join(missing, ", ")+" not set: no Authorization is sent")
		} else {
			ai.APIKey = Secret(key)
		}
	}
	return Backend{AI: ai}, true
}

// sourcePath maps a runtime path to the file's path it came from.
func (d *decoder) sourcePath(path string) string {
	for _, s := range d.sources {
		if rest, ok := strings.CutPrefix(path, s[0]); ok && (rest == "" || rest[0] == '.' || rest[0] == '[') {
			return s[1] + rest
		}
	}
	return path
}
