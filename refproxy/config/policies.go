package config

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gwdiag/gwdiag/refproxy/celexpr"
	"github.com/gwdiag/gwdiag/refproxy/ratelimit"
)

// ConditionalRateLimit is one entry of localRateLimit's conditional form:
// a limit that applies when its CEL condition (over request and source,
// as descriptors see them) holds. Of a policy's entries the first whose
// condition holds applies; the entry without a condition, which must be
// last, applies when none does.
type ConditionalRateLimit struct {
	Condition string `yaml:"condition" json:"condition,omitempty"`
	RateLimit `yaml:",inline"`
}

// HeaderModifier adds, sets and removes headers (requestHeaderModifier,
// responseHeaderModifier): set replaces every value of a header, add
// appends one, remove deletes a header; remove runs first, then set, then add.
type HeaderModifier struct {
	Add    map[string]string `yaml:"add" json:"add,omitempty"`
	Set    map[string]string `yaml:"set" json:"set,omitempty"`
	Remove []string          `yaml:"remove" json:"remove,omitempty"`
}

// DirectResponse answers the request with Status and Body instead of
// forwarding it. bodyExpression and headers (CEL) are refused.
type DirectResponse struct {
	Status uint16 `yaml:"status" json:"status"`
	Body   string `yaml:"body" json:"body,omitempty"`
}

// CORS is the cors policy: preflight requests (OPTIONS with Origin and
// Access-Control-Request-Method) are answered by the proxy, and responses
// to allowed origins carry Access-Control-Allow-Origin and the configured
// headers, as Envoy's CORS filter does (the reference follows it).
type CORS struct {
	AllowCredentials bool      `yaml:"allowCredentials" json:"allowCredentials,omitempty"`
	AllowHeaders     []string  `yaml:"allowHeaders" json:"allowHeaders,omitempty"`
	AllowMethods     []string  `yaml:"allowMethods" json:"allowMethods,omitempty"`
	AllowOrigins     []string  `yaml:"allowOrigins" json:"allowOrigins,omitempty"`
	ExposeHeaders    []string  `yaml:"exposeHeaders" json:"exposeHeaders,omitempty"`
	MaxAge           *Duration `yaml:"maxAge" json:"maxAge,omitempty"`
}

// Authorization is the authorization policy: CEL rules over the request.
// A request is denied (403) when a deny rule holds, when a require rule
// does not, or when there are allow rules and none holds.
type Authorization struct {
	Rules []AuthzRule `yaml:"rules" json:"rules"`
}

// AuthzRule is one rule: an expression and whether it allows (a plain
// string), denies or is required.
type AuthzRule struct {
	Mode string // allow, deny or require
	Expr string
}

// Authorization rule modes.
const (
	AuthzAllow   = "allow"
	AuthzDeny    = "deny"
	AuthzRequire = "require"
)

func (r *AuthzRule) decodeYAML(d *decoder, n *yaml.Node, path string, _ []string) error {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode {
		r.Mode, r.Expr = AuthzAllow, n.Value
		return nil
	}
	if n.Kind != yaml.MappingNode || len(n.Content) != 2 {
		return d.fail(n, path, "want an expression, or one of allow, deny or require")
	}
	r.Mode, r.Expr = n.Content[0].Value, n.Content[1].Value
	return nil
}

// MarshalJSON writes a rule as the config does.
func (r AuthzRule) MarshalJSON() ([]byte, error) {
	if r.Mode == AuthzAllow {
		return json.Marshal(r.Expr)
	}
	return json.Marshal(map[string]string{r.Mode: r.Expr})
}

// GatewayPolicies are the policies of a gateway or listener (the
// reference's LocalGatewayPolicy): of them refproxy implements cors,
// authorization, apiKey, basicAuth and jwtAuth, applied to every route of
// the listener.
type GatewayPolicies struct {
	CORS          *CORS          `yaml:"cors" json:"cors,omitempty"`
	Authorization *Authorization `yaml:"authorization" json:"authorization,omitempty"`
	APIKey        *APIKeyAuth    `yaml:"apiKey" json:"apiKey,omitempty"`
	BasicAuth     *BasicAuth     `yaml:"basicAuth" json:"basicAuth,omitempty"`
	JWTAuth       *JWTAuth       `yaml:"jwtAuth" json:"jwtAuth,omitempty"`
}

// fieldDecoder is implemented by structs that decode some of their fields
// themselves (handled true): fields of two forms, or a table of settings.
type fieldDecoder interface {
	decodeField(d *decoder, key *yaml.Node, val *yaml.Node, path string, segs []string) (handled bool, err error)
}

// decodeField reads localRateLimit in both forms, and refuses the
// conditional forms of the other policies.
func (p *Policies) decodeField(d *decoder, key, val *yaml.Node, path string, segs []string) (bool, error) {
	for val.Kind == yaml.AliasNode && val.Alias != nil {
		val = val.Alias
	}
	if val.Kind != yaml.MappingNode || len(val.Content) == 0 || val.Content[0].Value != "conditional" {
		return false, nil
	}
	switch key.Value {
	case "localRateLimit":
		var c struct {
			Conditional []ConditionalRateLimit `yaml:"conditional"`
		}
		if err := d.decode(val, refValue(&c), path, segs); err != nil {
			return true, err
		}
		p.LocalRateLimitConditional = c.Conditional
		if p.LocalRateLimitConditional == nil {
			p.LocalRateLimitConditional = []ConditionalRateLimit{}
		}
		return true, nil
	case "directResponse", "remoteRateLimit":
		d.refuse(path+".conditional", "the conditional form of "+key.Value)
		return true, nil
	}
	return false, nil
}

// MarshalJSON writes localRateLimit's conditional form as the config does.
func (p Policies) MarshalJSON() ([]byte, error) {
	type plain Policies
	b, err := json.Marshal(plain(p))
	if err != nil || p.LocalRateLimitConditional == nil {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	c, err := json.Marshal(map[string]any{"conditional": p.LocalRateLimitConditional})
	if err != nil {
		return nil, err
	}
	m["localRateLimit"] = c
	return json.Marshal(m)
}

// conditionEnv is what conditions and authorization rules see.
func compileBool(expr string) error {
	_, err := celexpr.CompileRequest(expr, celexpr.Bool)
	return err
}

// checkPolicies validates the policies refproxy implements beyond rate
// limits: CEL expressions compile, header names are valid, statuses are
// HTTP statuses.
func checkPolicies(p *Policies, path string, fail func(string, string, ...any) error) error {
	if p == nil {
		return nil
	}
	switch p.RateLimitError {
	case "", RateLimitErrorText, RateLimitErrorOpenAI, RateLimitErrorAnthropic:
	default:
		return fail(path+".rateLimitError", "want %q, %q or %q, got %q", RateLimitErrorText, RateLimitErrorOpenAI, RateLimitErrorAnthropic, p.RateLimitError)
	}
	if p.RateLimitHeaders != nil {
		if _, err := ratelimit.ParseFamilies(p.RateLimitHeaders); err != nil {
			return fail(path+".rateLimitHeaders", "%v", err)
		}
	}
	for i, c := range p.LocalRateLimitConditional {
		cp := fmt.Sprintf("%s.localRateLimit.conditional[%d]", path, i)
		if c.Condition == "" && i != len(p.LocalRateLimitConditional)-1 {
			return fail(cp, "an entry without a condition is the fallback and must be last")
		}
		if c.Condition != "" {
			if err := compileBool(c.Condition); err != nil {
				return fail(cp+".condition", "CEL: %v", err)
			}
		}
	}
	for _, hm := range []struct {
		name string
		m    *HeaderModifier
	}{{"requestHeaderModifier", p.RequestHeaderModifier}, {"responseHeaderModifier", p.ResponseHeaderModifier}} {
		if err := hm.m.check(); err != nil {
			return fail(path+"."+hm.name, "%v", err)
		}
	}
	if dr := p.DirectResponse; dr != nil && (dr.Status < 100 || dr.Status > 999) {
		return fail(path+".directResponse.status", "want an HTTP status from 100 to 999, got %d", dr.Status)
	}
	if err := p.CORS.check(); err != nil {
		return fail(path+".cors", "%v", err)
	}
	if err := checkAuthPolicies(p.APIKey, p.BasicAuth, p.JWTAuth, path, fail); err != nil {
		return err
	}
	if err := checkBackendAuth(p.BackendAuth, path+".backendAuth", fail); err != nil {
		return err
	}
	return checkAuthz(p.Authorization, path+".authorization", fail)
}

func checkAuthz(a *Authorization, path string, fail func(string, string, ...any) error) error {
	if a == nil {
		return nil
	}
	for i, r := range a.Rules {
		switch r.Mode {
		case AuthzAllow, AuthzDeny, AuthzRequire:
		default:
			return fail(fmt.Sprintf("%s.rules[%d]", path, i), "unknown rule %q (want allow, deny or require)", r.Mode)
		}
		if err := compileBool(r.Expr); err != nil {
			return fail(fmt.Sprintf("%s.rules[%d]", path, i), "CEL: %v", err)
		}
	}
	return nil
}

func (m *HeaderModifier) check() error {
	if m == nil {
		return nil
	}
	for _, names := range [][]string{keys(m.Add), keys(m.Set), m.Remove} {
		for _, n := range names {
			if !validHeaderName(n) {
				return fmt.Errorf("%q is not a header name", n)
			}
		}
	}
	for _, vals := range []map[string]string{m.Add, m.Set} {
		for k, v := range vals {
			if strings.ContainsAny(v, "\r\n\x00") {
				return fmt.Errorf("header %s: the value holds a line break or NUL", k)
			}
		}
	}
	return nil
}

func (c *CORS) check() error {
	if c == nil {
		return nil
	}
	for _, h := range append(append([]string(nil), c.AllowHeaders...), c.ExposeHeaders...) {
		if h != "*" && !validHeaderName(h) {
			return fmt.Errorf("%q is not a header name", h)
		}
	}
	for _, m := range c.AllowMethods {
		if m != "*" && !validHeaderName(m) {
			return fmt.Errorf("%q is not an HTTP method", m)
		}
	}
	if c.MaxAge != nil && *c.MaxAge < 0 {
		return fmt.Errorf("maxAge: want a positive duration")
	}
	return nil
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// validHeaderName: an HTTP token, as net/http accepts header names.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return http.CanonicalHeaderKey(s) != ""
}
