package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/refproxy/internal/authn/authntest"
)

// Planted secrets: unique strings that must never leave the config but
// through the data plane (errors, JSON, fmt).
const (
	plantedKey      = "sk-planted-apikey-7f3a9c"
	plantedBackend  = "sk-planted-backend-41be0d"
	plantedCred     = "sk-planted-credential-9d2e"
	plantedPassword = "planted-password-c0ffee"
)

// authConfig writes the htpasswd and JWKS files an auth config reads
// and returns the config, every auth policy in every place it may be.
func authConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	htp := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htp, []byte(authntest.Bcrypt(t, "alice", plantedPassword)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	jwks := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(jwks, []byte(authntest.NewIssuer(t, "k1").JWKS()), 0o600); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "backend-key")
	if err := os.WriteFile(keyFile, []byte(plantedBackend), 0o600); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`
gateways:
  default:
    port: 3000
    apiKey:
      keys:
      - key: %[1]s
        metadata: {name: ci, tier: 2}
      - keyHash: "sha256:%[6]s"
      mode: strict
      location: {header: {name: X-Api-Key}}
routes:
- name: r
  policies:
    basicAuth:
      htpasswd: {file: %[2]s}
      realm: staff
      mode: strict
    jwtAuth:
      issuer: https://idp.example
      audiences: [api]
      jwks: {file: %[3]s}
      location: {cookie: {name: session}}
    backendAuth:
      key: {value: {file: %[4]s}, location: {header: {name: X-Upstream-Key, prefix: "Token "}}}
  backends:
  - host: 127.0.0.1:9
    policies:
      backendAuth:
        key: %[5]s
        credentials:
        - {location: {header: {name: dd-api-key}}, key: %[5]s}
        - {location: {queryParameter: {name: token}}, key: other}
policies:
- name: {name: p, namespace: default}
  target: {route: {name: r, namespace: default}}
  policy:
    backendAuth: {passthrough: {location: {header: {name: X-Forwarded-Jwt}}}}
`, plantedKey, htp, jwks, keyFile, plantedCred, strings.Repeat("ab", 32))
}

// TestAuthPoliciesLoad: every auth policy loads in every place, files
// read; CredentialHeaders lists each header they read or send.
func TestAuthPoliciesLoad(t *testing.T) {
	cfg, err := Parse("auth.yaml", []byte(authConfig(t)))
	if err != nil {
		t.Fatal(err)
	}
	lp := cfg.Binds[0].Listeners[0].Policies
	if lp == nil || lp.APIKey == nil || string(lp.APIKey.Keys[0].Key) != plantedKey || lp.APIKey.Mode != ModeStrict {
		t.Fatalf("listener apiKey %+v", lp)
	}
	if md := lp.APIKey.Keys[0].Metadata; md == nil || md.V.(map[string]any)["tier"] != int64(2) {
		t.Errorf("metadata %+v, want tier 2 as an int64", md)
	}
	rp := cfg.Binds[0].Listeners[0].Routes[0].Policies
	if !strings.HasPrefix(string(rp.BasicAuth.Htpasswd), "alice:$2a$") {
		t.Errorf("htpasswd not read from its file")
	}
	if ps := rp.JWTAuth.AllProviders(); len(ps) != 1 || !strings.Contains(ps[0].JWKS.JSON, `"kid":"k1"`) {
		t.Errorf("jwks not read from its file: %+v", ps)
	}
	if string(rp.BackendAuth.Key.Value) != plantedBackend {
		t.Errorf("backend key not read from its file")
	}
	ba := cfg.Binds[0].Listeners[0].Routes[0].Backends[0].Policies.BackendAuth
	if string(ba.Key.Value) != plantedCred || ba.Key.Location != nil || len(ba.Credentials) != 2 {
		t.Errorf("backend's backendAuth %+v", ba)
	}
	want := []string{"authorization", "cookie", "dd-api-key", "x-api-key", "x-forwarded-jwt", "x-upstream-key"}
	if got := cfg.CredentialHeaders(); !slices.Equal(got, want) {
		t.Errorf("CredentialHeaders\n got %q\nwant %q", got, want)
	}
}

// TestCredentialHeadersDefaults: each policy's default location counts;
// a query parameter is no header; no policy, no header.
func TestCredentialHeadersDefaults(t *testing.T) {
	for _, tc := range []struct {
		name, policies string
		want           []string
	}{
		{"none", `{cors: {allowOrigins: ["*"]}}`, nil},
		{"apiKey default", `{apiKey: {keys: [{key: k}]}}`, []string{"authorization"}},
		{"apiKey query", `{apiKey: {keys: [{key: k}], location: {queryParameter: {name: key}}}}`, nil},
		{"basicAuth default", `{basicAuth: {htpasswd: "a:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g="}}`, []string{"authorization"}},
		{"backendAuth key", `{backendAuth: {key: k}}`, []string{"authorization"}},
		{"jwt header", `{jwtAuth: {issuer: i, jwks: '{"keys": []}', location: {header: {name: X-Token}}}}`, []string{"x-token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("t.yaml", []byte("binds:\n- port: 3000\n  listeners:\n  - routes:\n    - policies: "+tc.policies+"\n      backends: [{host: '127.0.0.1:9'}]\n"))
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.CredentialHeaders(); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestConfigNeverShowsSecrets: the parsed config as JSON, and as fmt
// prints it, holds no planted secret.
func TestConfigNeverShowsSecrets(t *testing.T) {
	cfg, err := Parse("auth.yaml", []byte(authConfig(t)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lp := cfg.Binds[0].Listeners[0].Policies
	rp := cfg.Binds[0].Listeners[0].Routes[0].Policies
	be := cfg.Binds[0].Listeners[0].Routes[0].Backends[0].Policies
	for _, out := range []string{string(b), fmt.Sprintf("%v %+v %#v", *lp.APIKey, *rp.BackendAuth.Key, *be.BackendAuth)} {
		for _, s := range []string{plantedKey, plantedBackend, plantedCred, "$2a$", strings.Repeat("ab", 32)} {
			if strings.Contains(out, s) {
				t.Errorf("%q shows in\n%s", s, out)
			}
		}
	}
	if !strings.Contains(string(b), `"key":"\u003credacted\u003e"`) {
		t.Errorf("want the key as <redacted> in %s", b)
	}
}

// TestAuthConfigErrors: one error per field, naming file, line and field,
// never quoting a secret.
func TestAuthConfigErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	route := func(p string) string {
		return "binds:\n- port: 3000\n  listeners:\n  - routes:\n    - policies:\n" + p + "      backends: [{host: '127.0.0.1:9'}]\n"
	}
	const at = "t.yaml:6: binds[0].listeners[0].routes[0].policies."
	tests := []struct {
		name, yaml, want string
		notImplemented   bool
	}{
		{"apiKey mode", route("        apiKey: {keys: [{key: " + plantedKey + "}], mode: sometimes}\n"),
			at + "apiKey.mode: ", false},
		{"apiKey no keys", route("        apiKey: {keys: []}\n"), at + "apiKey.keys: want at least one key", false},
		{"apiKey key and hash", route("        apiKey: {keys: [{key: " + plantedKey + ", keyHash: 'sha256:00'}]}\n"), at + "apiKey.keys[0]: ", false},
		{"apiKey bad hash", route("        apiKey: {keys: [{keyHash: 'sha256:" + plantedKey + "'}]}\n"),
			at + "apiKey.keys[0].keyHash: want sha256: and 64 hex digits", false},
		{"apiKey hash form", route("        apiKey: {keys: [{keyHash: 'md5:" + plantedKey + "'}]}\n"),
			at + "apiKey.keys[0].keyHash: want sha256:<64 hex digits>, or a bcrypt hash ($2a$, $2b$, $2y$)", false},
		{"apiKey allowedModels", route("        apiKey: {keys: [{key: k, allowedModels: []}]}\n"),
			at + "apiKey.keys[0].allowedModels: not implemented by refproxy (the models a key may ask for)", true},
		{"apiKey expression location", route("        apiKey: {keys: [{key: k}], location: {expression: 'request.headers[\"k\"]'}}\n"),
			at + "apiKey.location.expression: not implemented by refproxy", true},
		{"apiKey header name", route("        apiKey: {keys: [{key: k}], location: {header: {name: 'x key'}}}\n"),
			at + `apiKey.location: header.name: "x key" is not a header name`, false},
		{"basicAuth bad line", route("        basicAuth: {htpasswd: \"alice:{SHA}" + plantedPassword + "\"}\n"),
			at + `basicAuth.htpasswd: htpasswd line 1 (user "alice"): malformed SHA-1 hash`, false},
		{"basicAuth unsupported hash", route("        basicAuth: {htpasswd: \"alice:" + plantedPassword + "\"}\n"),
			at + `basicAuth.htpasswd: not implemented by refproxy (htpasswd line 1 (user "alice"): a password hash in a format refproxy does not verify`, true},
		{"basicAuth missing file", route("        basicAuth: {htpasswd: {file: " + missing + "}}\n"),
			at + "basicAuth.htpasswd.file: cannot read the file: open " + missing + ": no such file or directory", false},
		{"basicAuth realm", route("        basicAuth: {htpasswd: \"a:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\", realm: 'a\"b'}\n"),
			at + "basicAuth.realm: a realm holds no quote, line break or NUL", false},
		{"jwt bad jwks", route("        jwtAuth: {issuer: i, jwks: '{\"keys\": [{\"kty\": \"oct\", \"kid\": \"k\", \"k\": \"" + plantedKey + "\"}]}'}\n"),
			at + `jwtAuth.jwks: keys[0] (kid "k"): not an RSA, EC or Ed25519 public key (symmetric keys are not accepted)`, false},
		{"jwt providers jwks", route("        jwtAuth: {providers: [{issuer: i, jwks: '{}'}]}\n"),
			at + `jwtAuth.providers[0].jwks: not a JSON Web Key Set: want {"keys": [...]}`, false},
		{"jwt mode", route("        jwtAuth: {issuer: i, jwks: '{\"keys\": []}', mode: never}\n"), at + "jwtAuth.mode: ", false},
		{"backendAuth gcp", route("        backendAuth: {gcp: {}}\n"), at + "backendAuth.gcp: not implemented by refproxy", true},
		{"backendAuth copilot", route("        backendAuth: copilot\n"), at + "backendAuth: not implemented by refproxy (backendAuth copilot)", true},
		{"backendAuth key location", route("        backendAuth: {key: {value: " + plantedBackend + ", location: {cookie: {name: 'a b'}}}}\n"),
			at + `backendAuth.key.location: cookie.name: "a b" is not a cookie name`, false},
		{"backendAuth key with a line break", route("        backendAuth: {key: \"" + plantedBackend + "\\nx\"}\n"),
			at + "backendAuth.key.location: the secret holds a line break or NUL, which no header takes", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("accepted:\n%s", tt.yaml)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error\n got: %v\nwant: %s...", err, tt.want)
			}
			if IsNotImplemented(err) != tt.notImplemented {
				t.Errorf("IsNotImplemented = %v, want %v: %v", !tt.notImplemented, tt.notImplemented, err)
			}
			for _, s := range []string{plantedKey, plantedPassword, plantedBackend} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("the error quotes a secret: %v", err)
				}
			}
		})
	}
}
