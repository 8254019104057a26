package refproxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/refproxy/internal/authn/authntest"
)

// seen is what an echo backend received: the headers and the raw query.
type seen struct {
	Header http.Header
	Query  string
	Path   string // as sent
}

// echoBackend answers every request with what it received, as JSON.
func echoBackend(t *testing.T) string {
	return backendServer(t, "echo", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(seen{Header: r.Header, Query: r.URL.RawQuery, Path: r.URL.EscapedPath()})
	})
}

// send is one request through the proxy: status, the backend's view (on a
// 200), the answer's WWW-Authenticate and body.
type answer struct {
	status int
	got    seen
	www    string
	body   string
}

func send(t *testing.T, url string, hdr ...string) answer {
	t.Helper()
	resp, body := get(t, url, hdr...)
	a := answer{status: resp.StatusCode, www: resp.Header.Get("WWW-Authenticate"), body: body}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal([]byte(body), &a.got); err != nil {
			t.Fatalf("backend answer %q: %v", body, err)
		}
	}
	return a
}

// policyResults are the results of the trace's policy events of kind.
func policyResults(evs []trace.Event, kind string) []map[string]any {
	var out []map[string]any
	for _, e := range evs {
		if e.Type() == trace.PolicyResultType && e.Message["kind"] == kind {
			r, _ := e.Message["result"].(map[string]any)
			out = append(out, r)
		}
	}
	return out
}

// traced sends one request while a watcher waits and returns the answer
// and the request's events.
func traced(t *testing.T, p *Proxy, url string, hdr ...string) (answer, []trace.Event) {
	t.Helper()
	s := watch(t, p, http.MethodPost, "")
	a := send(t, url, hdr...)
	return a, s.collect(t)
}

// plainJSON is v as compact JSON, <, > and & as they are.
func plainJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSpace(b.String())
}

func bearer(v string) []string { return []string{"Authorization", "Bearer " + v} }

func basic(user, password string) []string {
	return []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))}
}

// TestAPIKeyModes: strict refuses a request without a valid key, optional
// one with an invalid key, permissive none; a valid key is taken off the
// request (the backend never sees it), its metadata is CEL's apiKey, and
// the trace names the key by index and name, never by value.
func TestAPIKeyModes(t *testing.T) {
	be := echoBackend(t)
	sum := sha256.Sum256([]byte("hashed-key-0002"))
	keys := `[{key: plain-key-0001, metadata: {name: ci, team: blue}}, {keyHash: "sha256:` + hex.EncodeToString(sum[:]) + `"}]`
	p := startProxy(t, `
gateways:
  default: {port: 0}
routes:
- name: strict
  matches: [{path: {pathPrefix: /strict}}]
  policies:
    apiKey: {keys: `+keys+`, mode: strict}
    authorization: {rules: ['apiKey.team == "blue"']}
  backends: [{host: `+be+`}]
- name: optional
  matches: [{path: {pathPrefix: /optional}}]
  policies:
    apiKey: {keys: `+keys+`}
  backends: [{host: `+be+`}]
- name: permissive
  matches: [{path: {pathPrefix: /permissive}}]
  policies:
    apiKey: {keys: `+keys+`, mode: permissive, location: {queryParameter: {name: api_key}}}
  backends: [{host: `+be+`}]
`)
	base := "http://" + p.BindAddrs()[0]
	for _, tc := range []struct {
		name, path string
		hdr        []string
		status     int
		body       string
	}{
		{"strict, none", "/strict", nil, 401, "api key authentication failure: no API Key found\n"},
		{"strict, wrong", "/strict", bearer("nope"), 401, "api key authentication failure: invalid credentials\n"},
		{"strict, other scheme", "/strict", basic("a", "b"), 401, "api key authentication failure: no API Key found\n"},
		{"strict, good", "/strict", bearer("plain-key-0001"), 200, ""},
		// The hashed key has no team: authorization refuses it.
		{"strict, hashed key without team", "/strict", bearer("hashed-key-0002"), 403, "authorization failed\n"},
		{"optional, none", "/optional", nil, 200, ""},
		{"optional, wrong", "/optional", bearer("nope"), 401, "api key authentication failure: invalid credentials\n"},
		{"optional, hashed", "/optional", bearer("hashed-key-0002"), 200, ""},
		{"permissive, none", "/permissive", nil, 200, ""},
		{"permissive, wrong", "/permissive?api_key=nope&x=1", nil, 200, ""},
		{"permissive, good", "/permissive?a=%2F&api_key=plain-key-0001&b=2", nil, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := send(t, base+tc.path, tc.hdr...)
			if a.status != tc.status || tc.body != "" && a.body != tc.body {
				t.Fatalf("got %d %q, want %d %q", a.status, a.body, tc.status, tc.body)
			}
			if a.status == 200 && strings.Contains(tc.name, "good") {
				if v := a.got.Header.Get("Authorization"); v != "" {
					t.Errorf("the backend got the client's key: Authorization %q", v)
				}
				if strings.Contains(a.got.Query, "api_key") {
					t.Errorf("the backend got the client's key in its query %q", a.got.Query)
				}
			}
		})
	}
	// The path and the other query parameters pass as they were sent.
	if a := send(t, base+"/permissive/a%2Fb?a=%2F&api_key=plain-key-0001&b=2"); a.got.Query != "a=%2F&b=2" || a.got.Path != "/permissive/a%2Fb" {
		t.Errorf("path %q, query %q; want /permissive/a%%2Fb, a=%%2F&b=2", a.got.Path, a.got.Query)
	}

	// The trace: the key by index and name; a refusal says why.
	a, evs := traced(t, p, base+"/strict", bearer("plain-key-0001")...)
	res := policyResults(evs, "apiKey")
	if a.status != 200 || len(res) != 1 || res[0]["type"] != "apply" || res[0]["details"] != `authenticated with API key keys[0] (name "ci")` ||
		res[0]["key"] != float64(0) || res[0]["decision"] != "allowed" {
		t.Errorf("status %d, apiKey results %v", a.status, res)
	}
	_, evs = traced(t, p, base+"/strict", bearer("nope")...)
	res = policyResults(evs, "apiKey")
	fin := evs[len(evs)-1].Message
	cause, _ := fin["cause"].(map[string]any)
	if len(res) != 1 || res[0]["details"] != "refused: the API key (header authorization (after \"Bearer \")) is none of the 2 keys of the route phase's apiKey policy" ||
		cause["kind"] != "authentication" || cause["policy"] != "apiKey" || fin["status"] != float64(401) {
		t.Errorf("refusal: results %v, requestFinished %v", res, fin)
	}
	_, evs = traced(t, p, base+"/optional")
	const noKey = "the request has no API key (header authorization (after \"Bearer \")) and the route phase's apiKey mode is "
	if res := policyResults(evs, "apiKey"); len(res) != 1 || res[0]["type"] != "skip" || res[0]["reason"] != noKey+"optional" {
		t.Errorf("optional without a key: results %v, want a skip: %s", res, noKey+"optional")
	}
	_, strictEvs := traced(t, p, base+"/strict")
	fin = strictEvs[len(strictEvs)-1].Message
	cause, _ = fin["cause"].(map[string]any)
	if res := policyResults(strictEvs, "apiKey"); len(res) != 1 || res[0]["details"] != "refused: "+noKey+"strict" || res[0]["decision"] != "refused" ||
		res[0]["phase"] != "route" || cause["reason"] != noKey+"strict" {
		t.Errorf("strict without a key: results %v, cause %v; want refused: %s", res, cause, noKey+"strict")
	}
	for _, e := range evs {
		if e.Type() == trace.PolicySelection {
			eff, _ := e.Message["effectivePolicy"].(map[string]any)
			want := `{"location":{"header":{"name":"authorization","prefix":"Bearer "}},"mode":"optional","users":"<redacted>"}`
			if got := plainJSON(eff["apiKey"]); got != want {
				t.Errorf("effectivePolicy.apiKey %s, want %s", got, want)
			}
		}
	}
}

// TestBasicAuth: strict refuses without credentials and with wrong ones,
// 401 with the realm; optional lets a request without credentials through;
// the user is CEL's basicAuth.username and the trace's user; the
// credentials never reach the backend.
func TestBasicAuth(t *testing.T) {
	be := echoBackend(t)
	htp := filepath.Join(t.TempDir(), "htpasswd")
	data, err := os.ReadFile("internal/authn/testdata/htpasswd")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(htp, append(data, authntest.Bcrypt(t, "dave", "s3cret")+"\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, `
gateways:
  default: {port: 0}
routes:
- name: strict
  matches: [{path: {pathPrefix: /strict}}]
  policies:
    basicAuth: {htpasswd: {file: `+htp+`}, realm: staff, mode: strict}
    requestHeaderModifier: {set: {x-user-seen: "yes"}}
    authorization: {rules: [{deny: 'basicAuth.username == "bob"'}]}
  backends: [{host: `+be+`}]
- name: optional
  matches: [{path: {pathPrefix: /optional}}]
  policies:
    basicAuth: {htpasswd: "alice:$apr1$abcdefgh$hbAboF.tMUnn0szRg6OHz."}
  backends: [{host: `+be+`}]
`)
	base := "http://" + p.BindAddrs()[0]
	const realm = `Basic realm="staff"`
	for _, tc := range []struct {
		name, path string
		hdr        []string
		status     int
		body, www  string
	}{
		{"none", "/strict", nil, 401, "basic authentication failure: no basic authentication credentials found\n", realm},
		{"wrong password", "/strict", basic("alice", "nope"), 401, "basic authentication failure: invalid credentials\n", realm},
		{"unknown user", "/strict", basic("mallory", "pa55word"), 401, "basic authentication failure: invalid credentials\n", realm},
		{"not base64", "/strict", []string{"Authorization", "Basic %%%"}, 401, "basic authentication failure: invalid credentials\n", realm},
		{"apr1", "/strict", basic("alice", "pa55word"), 200, "", ""},
		{"sha", "/strict", basic("bob", "password"), 403, "authorization failed\n", ""},
		{"sha-crypt", "/strict", basic("carol", "pa55word"), 200, "", ""},
		{"bcrypt", "/strict", basic("dave", "s3cret"), 200, "", ""},
		{"optional, none", "/optional", nil, 200, "", ""},
		{"optional, wrong", "/optional", basic("alice", "x"), 401, "basic authentication failure: invalid credentials\n", `Basic realm="Restricted"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := send(t, base+tc.path, tc.hdr...)
			if a.status != tc.status || tc.body != "" && a.body != tc.body || a.www != tc.www {
				t.Fatalf("got %d %q (WWW-Authenticate %q), want %d %q (%q)", a.status, a.body, a.www, tc.status, tc.body, tc.www)
			}
			if a.status == 200 && a.got.Header.Get("Authorization") != "" {
				t.Errorf("the backend got the client's credentials")
			}
		})
	}
	_, evs := traced(t, p, base+"/strict", basic("alice", "pa55word")...)
	if res := policyResults(evs, "basicAuth"); len(res) != 1 || res[0]["details"] != `authenticated as user "alice"` || res[0]["user"] != "alice" {
		t.Errorf("basicAuth results %v", res)
	}
	_, evs = traced(t, p, base+"/strict", basic("alice", "nope")...)
	if res := policyResults(evs, "basicAuth"); len(res) != 1 || res[0]["details"] != `refused: wrong password for user "alice"` {
		t.Errorf("basicAuth results %v", res)
	}
	// The default mode is optional; without credentials the trace says
	// which mode let the request through, or refused it.
	const noCredentials = "the request has no Basic credentials (header authorization (after \"Basic \")) and the route phase's basicAuth mode is "
	_, evs = traced(t, p, base+"/optional")
	if res := policyResults(evs, "basicAuth"); len(res) != 1 || res[0]["type"] != "skip" || res[0]["reason"] != noCredentials+"optional" {
		t.Errorf("optional without credentials: basicAuth results %v, want a skip: %s", res, noCredentials+"optional")
	}
	_, evs = traced(t, p, base+"/strict")
	if res := policyResults(evs, "basicAuth"); len(res) != 1 || res[0]["details"] != "refused: "+noCredentials+"strict" {
		t.Errorf("strict without credentials: basicAuth results %v, want refused: %s", res, noCredentials+"strict")
	}
	_, evs = traced(t, p, base+"/strict", basic("mallory", "pa55word")...)
	if res := policyResults(evs, "basicAuth"); len(res) != 1 || res[0]["details"] != "refused: no such user in the route phase's htpasswd (4 users)" {
		t.Errorf("basicAuth results %v", res)
	}
}

// jwtRoutes is a config of routes guarded by jwtAuth in each mode and
// location, for issuer is.
func jwtRoutes(is *authntest.Issuer, be string) string {
	jwks := strings.ReplaceAll(is.JWKS(), `"`, `\"`)
	provider := `issuer: https://idp.example, audiences: [api], jwks: "` + jwks + `"`
	return `
gateways:
  default: {port: 0}
routes:
- name: strict
  matches: [{path: {pathPrefix: /strict}}]
  policies:
    jwtAuth: {mode: strict, ` + provider + `}
    authorization: {rules: [{require: 'jwt.team == "blue"'}]}
    localRateLimit:
    - {maxTokens: 2, tokensPerFill: 2, fillInterval: 1h, key: 'jwt.sub'}
  backends: [{host: ` + be + `}]
- name: optional
  matches: [{path: {pathPrefix: /optional}}]
  policies:
    jwtAuth: {providers: [{` + provider + `}]}
  backends: [{host: ` + be + `}]
- name: permissive
  matches: [{path: {pathPrefix: /permissive}}]
  policies:
    jwtAuth: {mode: permissive, location: {cookie: {name: session}}, ` + provider + `}
  backends: [{host: ` + be + `}]
`
}

// TestJWTAuth: tokens are checked against the JWKS, issuer, audience, exp
// and nbf; the claims are CEL's jwt (an authorization rule and a
// rate-limit key read them); the token is taken off the request; a
// refusal is the reference's 401 and says why in the trace.
func TestJWTAuth(t *testing.T) {
	is := authntest.NewIssuer(t, "k1")
	be := echoBackend(t)
	p := startProxy(t, jwtRoutes(is, be))
	base := "http://" + p.BindAddrs()[0]
	exp := time.Now().Add(time.Hour).Unix()
	tok := func(sub, team string, exp int64) string {
		return is.Token(map[string]any{"iss": "https://idp.example", "aud": "api", "sub": sub, "team": team, "exp": exp})
	}
	good := tok("alice", "blue", exp)
	for _, tc := range []struct {
		name, path string
		hdr        []string
		status     int
		body       string
	}{
		{"strict, none", "/strict", nil, 401, "authentication failure: no bearer token found\n"},
		{"strict, expired", "/strict", bearer(tok("alice", "blue", time.Now().Add(-time.Hour).Unix())), 401,
			"authentication failure: the token is invalid or malformed: the token has expired\n"},
		{"strict, other audience", "/strict", bearer(is.Token(map[string]any{"iss": "https://idp.example", "aud": "web", "exp": exp})), 401,
			"authentication failure: the token is invalid or malformed: no audience of the token is accepted\n"},
		{"strict, unknown key", "/strict", bearer(is.TokenWithKid("k9", map[string]any{"iss": "https://idp.example"})), 401,
			"authentication failure: token uses the unknown key \"k9\"\n"},
		{"strict, good", "/strict", bearer(good), 200, ""},
		{"strict, claim refused", "/strict", bearer(tok("bob", "red", exp)), 403, "authorization failed\n"},
		{"optional, none", "/optional", nil, 200, ""},
		{"optional, garbage", "/optional", bearer("garbage"), 401, ""},
		{"permissive, garbage cookie", "/permissive", []string{"Cookie", "session=garbage; theme=dark"}, 200, ""},
		{"permissive, good cookie", "/permissive", []string{"Cookie", "a=1; session=" + good + "; theme=dark"}, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := send(t, base+tc.path, tc.hdr...)
			if a.status != tc.status || tc.body != "" && a.body != tc.body {
				t.Fatalf("got %d %q, want %d %q", a.status, a.body, tc.status, tc.body)
			}
			if a.status == 200 && strings.Contains(tc.name, "good") {
				if a.got.Header.Get("Authorization") != "" || strings.Contains(a.got.Header.Get("Cookie"), "session") {
					t.Errorf("the backend got the token: %v", a.got.Header)
				}
				if strings.Contains(tc.name, "cookie") && a.got.Header.Get("Cookie") != "a=1; theme=dark" {
					t.Errorf("Cookie %q, want the other cookies as they were", a.got.Header.Get("Cookie"))
				}
			}
		})
	}
	// jwt.sub keys the limit: alice has one request left of two, bob his own.
	if a := send(t, base+"/strict", bearer(good)...); a.status != 200 {
		t.Fatalf("alice's second request: %d", a.status)
	}
	if a := send(t, base+"/strict", bearer(good)...); a.status != http.StatusTooManyRequests {
		t.Fatalf("alice's third request: %d, want 429 (her bucket of 2 spent)", a.status)
	}
	if a := send(t, base+"/strict", bearer(tok("carol", "blue", exp))...); a.status != 200 {
		t.Fatalf("carol's request: %d, want 200 (her own bucket)", a.status)
	}

	_, evs := traced(t, p, base+"/strict", bearer(tok("dan", "blue", exp))...)
	res := policyResults(evs, "jwt")
	if len(res) != 1 || res[0]["details"] != `authenticated with a JWT of issuer "https://idp.example", subject "dan" (key "k1")` ||
		res[0]["subject"] != "dan" || res[0]["issuer"] != "https://idp.example" {
		t.Errorf("jwt results %v", res)
	}
	_, evs = traced(t, p, base+"/permissive", "Cookie", "session=garbage")
	if res := policyResults(evs, "jwt"); len(res) != 1 || res[0]["type"] != "skip" || !strings.Contains(res[0]["reason"].(string), "let through (mode permissive)") {
		t.Errorf("permissive jwt results %v", res)
	}
}

// TestBackendAuth: a route's backendAuth key goes to its backends at its
// location, a backend's own replaces it, credentials add more, and
// passthrough sends the validated JWT on; the trace says where each went.
func TestBackendAuth(t *testing.T) {
	is := authntest.NewIssuer(t, "k1")
	jwks := strings.ReplaceAll(is.JWKS(), `"`, `\"`)
	be := echoBackend(t)
	p := startProxy(t, `
gateways:
  default: {port: 0}
routes:
- name: key
  matches: [{path: {pathPrefix: /key}}]
  policies:
    backendAuth: {key: {value: upstream-key-1, location: {header: {name: X-Upstream, prefix: "Token "}}}}
  backends: [{host: `+be+`}]
- name: own
  matches: [{path: {pathPrefix: /own}}]
  policies:
    backendAuth: {key: route-key}
  backends:
  - host: `+be+`
    policies:
      backendAuth:
        key: backend-key-2
        credentials:
        - {location: {header: {name: dd-api-key}}, key: dd-key-3}
        - {location: {queryParameter: {name: sig}}, key: "a b&c"}
- name: pass
  matches: [{path: {pathPrefix: /pass}}]
  policies:
    jwtAuth: {issuer: https://idp.example, jwks: "`+jwks+`"}
    backendAuth: {passthrough: {location: {header: {name: X-Jwt}}}}
  backends: [{host: `+be+`}]
`)
	base := "http://" + p.BindAddrs()[0]
	if a := send(t, base+"/key", bearer("client-token")...); a.got.Header.Get("X-Upstream") != "Token upstream-key-1" || a.got.Header.Get("Authorization") != "Bearer client-token" {
		t.Errorf("/key: the backend got %v", a.got.Header)
	}
	a := send(t, base+"/own?x=1")
	if a.got.Header.Get("Authorization") != "Bearer backend-key-2" || a.got.Header.Get("Dd-Api-Key") != "dd-key-3" || a.got.Query != "x=1&sig=a+b%26c" {
		t.Errorf("/own: the backend got %v, query %q", a.got.Header, a.got.Query)
	}
	token := is.Token(map[string]any{"iss": "https://idp.example", "exp": time.Now().Add(time.Hour).Unix()})
	if a := send(t, base+"/pass", bearer(token)...); a.got.Header.Get("X-Jwt") != token || a.got.Header.Get("Authorization") != "" {
		t.Errorf("/pass: the backend got %v", a.got.Header)
	}
	if a := send(t, base+"/pass"); a.status != 200 || a.got.Header.Get("X-Jwt") != "" {
		t.Errorf("/pass without a token: %d, X-Jwt %q", a.status, a.got.Header.Get("X-Jwt"))
	}
	_, evs := traced(t, p, base+"/own")
	res := policyResults(evs, "backendAuth")
	if len(res) != 1 || res[0]["details"] != "sent the configured key to backend "+be+" in header authorization (after \"Bearer \"), header dd-api-key, query parameter sig" {
		t.Errorf("backendAuth results %v", res)
	}
	_, evs = traced(t, p, base+"/pass")
	if res := policyResults(evs, "backendAuth"); len(res) != 1 || res[0]["type"] != "skip" {
		t.Errorf("passthrough without a token: results %v, want a skip", res)
	}
}

// TestAuthPhases: a gateway's policy runs before the route's, both must
// pass, and effectivePolicy shows each.
func TestAuthPhases(t *testing.T) {
	be := echoBackend(t)
	p := startProxy(t, `
gateways:
  default:
    port: 0
    apiKey: {keys: [{key: gateway-key-1}], mode: strict, location: {header: {name: x-api-key}}}
routes:
- name: r
  policies:
    apiKey: {keys: [{key: route-key-2}], mode: strict}
  backends: [{host: `+be+`}]
`)
	base := "http://" + p.BindAddrs()[0]
	if a := send(t, base+"/", bearer("route-key-2")...); a.status != 401 {
		t.Errorf("without the gateway's key: %d, want 401", a.status)
	}
	if a := send(t, base+"/", "x-api-key", "gateway-key-1"); a.status != 401 {
		t.Errorf("without the route's key: %d, want 401", a.status)
	}
	a, evs := traced(t, p, base+"/", "x-api-key", "gateway-key-1", "Authorization", "Bearer route-key-2")
	if a.status != 200 || a.got.Header.Get("X-Api-Key") != "" || a.got.Header.Get("Authorization") != "" {
		t.Errorf("with both: %d, backend saw %v", a.status, a.got.Header)
	}
	res := policyResults(evs, "apiKey")
	if len(res) != 2 || res[0]["phase"] != "gateway" || res[1]["phase"] != "route" {
		t.Errorf("apiKey results %v, want the gateway's then the route's", res)
	}
	for _, e := range evs {
		if e.Type() == trace.PolicySelection {
			if l, ok := e.Message["effectivePolicy"].(map[string]any)["apiKey"].([]any); !ok || len(l) != 2 {
				t.Errorf("effectivePolicy.apiKey %v, want both phases'", e.Message["effectivePolicy"].(map[string]any)["apiKey"])
			}
		}
	}
}

// lockedBuffer is a log sink a test reads while the proxy writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestAuthSecretsNeverShown plants a unique secret in every secret field
// of every auth policy, and sends requests carrying credentials: no byte
// of /config_dump, of the debug logs, of a policy event, of
// effectivePolicy or of requestFinished holds one. (Request snapshots,
// which show headers, are redacted by the tracer: TestTraceHidesCredentials.)
func TestAuthSecretsNeverShown(t *testing.T) {
	be := echoBackend(t)
	htp := filepath.Join(t.TempDir(), "htpasswd")
	if err := os.WriteFile(htp, []byte(authntest.Bcrypt(t, "alice", "planted-password-1")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	htpasswd := authntest.Bcrypt(t, "bob", "planted-password-2")
	hash := sha256.Sum256([]byte("planted-hashed-key-3"))
	planted := []string{"planted-api-key-0", "planted-password-1", "planted-password-2", "planted-hashed-key-3", hex.EncodeToString(hash[:]),
		"planted-backend-key-4", "planted-credential-5", "planted-policy-key-6", strings.SplitN(htpasswd, ":", 2)[1]}
	logs := &lockedBuffer{}
	p := startProxy(t, fmt.Sprintf(`
gateways:
  default:
    port: 0
    basicAuth: {htpasswd: {file: %[1]s}}
routes:
- name: r
  policies:
    apiKey: {keys: [{key: planted-api-key-0, metadata: {name: ci}}, {keyHash: "sha256:%[2]s"}], location: {header: {name: x-api-key}}}
    backendAuth: {key: planted-backend-key-4}
  backends:
  - host: %[3]s
    policies:
      backendAuth:
        credentials: [{location: {queryParameter: {name: sig}}, key: planted-credential-5}]
- name: s
  matches: [{path: {pathPrefix: /s}}]
  policies:
    basicAuth: {htpasswd: "%[4]s", mode: strict}
  backends: [{host: %[3]s}]
policies:
- name: {name: p, namespace: default}
  target: {route: {name: r, namespace: default}}
  policy:
    backendAuth: {key: {value: planted-policy-key-6, location: {header: {name: x-up}}}}
`, htp, hex.EncodeToString(hash[:]), be, htpasswd), WithLogOutput(logs), WithLogFilter("trace"))
	base := "http://" + p.BindAddrs()[0]
	var events []trace.Event
	for _, hdr := range [][]string{
		append(basic("alice", "planted-password-1"), "x-api-key", "planted-api-key-0"),
		append(basic("alice", "wrong-password-7"), "x-api-key", "planted-api-key-0"),
		{"x-api-key", "planted-hashed-key-3"},
		{"x-api-key", "wrong-api-key-8"},
	} {
		_, evs := traced(t, p, base+"/?q=1", hdr...)
		events = append(events, evs...)
	}
	for _, hdr := range [][]string{basic("bob", "planted-password-2"), basic("bob", "wrong-password-9")} {
		_, evs := traced(t, p, base+"/s", hdr...)
		events = append(events, evs...)
	}
	planted = append(planted, "wrong-password-7", "wrong-api-key-8", "wrong-password-9")
	resp, dump := adminDo(t, p, http.MethodGet, "/config_dump")
	if resp.StatusCode != 200 || !strings.Contains(dump, `"<redacted>"`) || !strings.Contains(dump, `"aPIKey"`) {
		t.Fatalf("config_dump: %d, want the auth policies redacted:\n%s", resp.StatusCode, dump)
	}
	var traceBytes strings.Builder
	for _, e := range events {
		switch e.Type() {
		case trace.RequestSnapshot, trace.ResponseSnapshot:
			continue // the tracer's redaction: TestTraceHidesCredentials
		}
		b, _ := json.Marshal(e)
		traceBytes.Write(b)
		traceBytes.WriteByte('\n')
	}
	for what, out := range map[string]string{"config_dump": dump, "logs": logs.String(), "trace": traceBytes.String()} {
		for _, s := range planted {
			if strings.Contains(out, s) {
				t.Errorf("%s holds the secret %q:\n%s", what, s, out)
			}
		}
	}
	if len(policyResults(events, "backendAuth")) == 0 || len(policyResults(events, "apiKey")) == 0 || len(policyResults(events, "basicAuth")) == 0 {
		t.Errorf("the trace lacks the auth policy events the search needs")
	}
}

// TestTraceHidesCredentials: with the tracer's redaction (default
// credential headers, Config.CredentialHeaders, and the values the auth
// policies give Tracer.AddSecret), no byte of a trace holds a credential a
// request carried or a backendAuth sent: headers of any name a policy
// reads, a query parameter (in the URI), a cookie, the Basic password, the
// JWT, the backend's keys. It needs the tracer's half of issue 42; a build
// whose tracer shows an Authorization header in clear skips it.
func TestTraceHidesCredentials(t *testing.T) {
	is := authntest.NewIssuer(t, "k1")
	jwks := strings.ReplaceAll(is.JWKS(), `"`, `\"`)
	be := echoBackend(t)
	p := startProxy(t, `
gateways:
  default: {port: 0}
routes:
- name: plain
  matches: [{path: {pathPrefix: /plain}}]
  backends: [{host: `+be+`}]
- name: key
  matches: [{path: {pathPrefix: /key}}]
  policies:
    apiKey: {keys: [{key: sk-trace-query-key-01}], location: {queryParameter: {name: k}}}
    basicAuth: {htpasswd: "`+authntest.Bcrypt(t, "alice", "trace-password-02")+`", authorizationLocation: {header: {name: X-Basic, prefix: "Basic "}}}
  backends:
  - host: `+be+`
    policies:
      backendAuth:
        key: {value: sk-trace-backend-03, location: {header: {name: X-Upstream-Secret}}}
        credentials: [{location: {queryParameter: {name: sig}}, key: sk-trace-backend-sig-04}]
- name: jwt
  matches: [{path: {pathPrefix: /jwt}}]
  policies:
    jwtAuth: {issuer: https://idp.example, jwks: "`+jwks+`", location: {cookie: {name: session}}}
    backendAuth: {passthrough: {location: {header: {name: X-Jwt}}}}
  backends: [{host: `+be+`}]
`)
	base := "http://" + p.BindAddrs()[0]
	_, evs := traced(t, p, base+"/plain", "Authorization", "Bearer sk-trace-probe-00")
	if b, _ := json.Marshal(evs); strings.Contains(string(b), "sk-trace-probe-00") {
		t.Skip("this build's tracer shows Authorization in clear: the trace redaction of issue 42 is not in it")
	}
	token := is.Token(map[string]any{"iss": "https://idp.example", "exp": time.Now().Add(time.Hour).Unix()})
	basicValue := base64.StdEncoding.EncodeToString([]byte("alice:trace-password-02"))
	secretsSent := []string{"sk-trace-query-key-01", "trace-password-02", basicValue, "sk-trace-backend-03", "sk-trace-backend-sig-04", token}
	var all []trace.Event
	a, evs := traced(t, p, base+"/key?k=sk-trace-query-key-01&x=1", "X-Basic", "Basic "+basicValue)
	if a.status != 200 || a.got.Header.Get("X-Upstream-Secret") != "sk-trace-backend-03" {
		t.Fatalf("/key: %d, backend saw %v", a.status, a.got.Header)
	}
	all = append(all, evs...)
	if a, evs = traced(t, p, base+"/jwt", "Cookie", "session="+token); a.status != 200 || a.got.Header.Get("X-Jwt") != token {
		t.Fatalf("/jwt: %d, backend saw %v", a.status, a.got.Header)
	}
	all = append(all, evs...)
	b, err := json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secretsSent {
		if strings.Contains(string(b), s) {
			t.Errorf("the trace holds the credential %q", s)
		}
	}
}
