package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/refproxy/ratelimit"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

// acceptedConfigs is every config refproxy ships or tests with as valid.
func acceptedConfigs(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, g := range []string{"../examples/*.yaml", "testdata/valid/*.yaml"} {
		m, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 4 {
		t.Fatalf("found only %d configs: %v", len(files), files)
	}
	return files
}

func TestAcceptedConfigsMatchReferenceSchema(t *testing.T) {
	c := jsonschema.NewCompiler()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(SchemaJSON))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("config.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("config.schema.json")
	if err != nil {
		t.Fatalf("compile schema: %v", err)
	}
	for _, f := range acceptedConfigs(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Parse(f, data); err != nil {
				t.Fatalf("refproxy rejects it: %v", err)
			}
			var v any
			if err := yaml.Unmarshal(data, &v); err != nil {
				t.Fatal(err)
			}
			// Round-trip through JSON so that the validator sees JSON types.
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(inst); err != nil {
				t.Errorf("refproxy accepts a config the reference schema rejects:\n%v", err)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string // the whole error message
	}{
		{"unknown top-level field", "bindz: []\n", `t.yaml:1: bindz: unknown field "bindz" (did you mean "binds"?)`},
		{"typo in path match", "binds:\n- port: 3000\n  listeners:\n  - routes:\n    - matches:\n      - path: {pathPrefx: /}\n",
			`t.yaml:6: binds[0].listeners[0].routes[0].matches[0].path.pathPrefx: unknown field "pathPrefx" (did you mean "pathPrefix"?)`},
		{"port out of range", "binds:\n- port: 70000\n  listeners: []\n", `t.yaml:2: binds[0].port: want at most 65535, got 70000`},
		{"port is a string", "binds:\n- port: http\n  listeners: []\n", `t.yaml:2: binds[0].port: want an integer, got a string`},
		{"listeners missing", "binds:\n- port: 3000\n", `t.yaml:2: binds[0]: missing required field listeners`},
		{"binds not a list", "binds: {port: 1}\n", `t.yaml:1: binds: want a list, got a mapping`},
		{"bad duration", "binds:\n- listeners:\n  - routes:\n    - policies:\n        localRateLimit:\n        - {maxTokens: 1, tokensPerFill: 1, fillInterval: soon}\n",
			`t.yaml:6: binds[0].listeners[0].routes[0].policies.localRateLimit[0].fillInterval: want a duration such as 1s or 500ms, got "soon"`},
		{"missing fillInterval", "binds:\n- listeners:\n  - routes:\n    - policies:\n        localRateLimit:\n        - {maxTokens: 1}\n",
			`t.yaml:6: binds[0].listeners[0].routes[0].policies.localRateLimit[0]: missing required field fillInterval`},
		{"bad limit type", "binds:\n- listeners:\n  - routes:\n    - policies:\n        localRateLimit:\n        - {maxTokens: 1, fillInterval: 1s, type: bytes}\n",
			`t.yaml:6: binds[0].listeners[0].routes[0].policies.localRateLimit[0].type: want "requests" or "tokens", got "bytes"`},
		{"two path kinds", "binds:\n- listeners:\n  - routes:\n    - matches:\n      - path: {exact: /a, pathPrefix: /}\n",
			`t.yaml:5: binds[0].listeners[0].routes[0].matches[0].path: set only one of exact or pathPrefix`},
		{"bad regex", "binds:\n- listeners:\n  - routes:\n    - matches:\n      - path: {regex: \"(\"}\n",
			"t.yaml:5: binds[0].listeners[0].routes[0].matches[0].path: bad regex: error parsing regexp: missing closing ): `(`"},
		{"backend without port", "binds:\n- listeners:\n  - routes:\n    - backends:\n      - host: localhost\n",
			`t.yaml:5: binds[0].listeners[0].routes[0].backends[0].host: want host:port: address localhost: missing port in address`},
		{"serviceOf without a namespace", "binds:\n- listeners:\n  - routes:\n    - backends:\n      - {host: \"10.0.0.1:80\", serviceOf: {name: s}}\n",
			`t.yaml:5: binds[0].listeners[0].routes[0].backends[0].serviceOf: missing required field namespace`},
		{"serviceOf on an AI backend", "binds:\n- listeners:\n  - routes:\n    - backends:\n      - ai: {name: a, provider: {openAI: {}}}\n        serviceOf: {name: s, namespace: n}\n",
			`t.yaml:6: binds[0].listeners[0].routes[0].backends[0].serviceOf: only a host backend is an endpoint of a Service`},
		{"unsupported protocol", "binds:\n- listeners:\n  - protocol: TCP\n", `t.yaml:3: binds[0].listeners[0].protocol: not implemented by refproxy (protocol TCP; refproxy serves HTTP)`},
		{"duplicate port", "binds:\n- port: 1\n  listeners: []\n- port: 1\n  listeners: []\n", `t.yaml:4: binds[1].port: port 1 is bound twice`},
		{"policy with two targets", "policies:\n- name: {name: a, namespace: b}\n  target: {route: {name: r, namespace: n}, gateway: {gatewayName: g, gatewayNamespace: n}}\n  policy: {}\n",
			`t.yaml:3: policies[0].target: set only one of gateway or route`},
		{"policy not implemented", "binds:\n- listeners:\n  - routes:\n    - policies: {oidc: {issuer: i, clientId: c, clientSecret: s, redirectURI: 'http://x/cb'}}\n",
			`t.yaml:4: binds[0].listeners[0].routes[0].policies.oidc: not implemented by refproxy`},
		{"remote JWKS not implemented", "binds:\n- listeners:\n  - routes:\n    - policies: {jwtAuth: {issuer: i, audiences: [a], jwks: {url: 'https://idp/jwks'}}}\n",
			`t.yaml:4: binds[0].listeners[0].routes[0].policies.jwtAuth.jwks.url: not implemented by refproxy (a JWKS fetched from a URL; give it inline or as a file)`},
		{"policy typo", "binds:\n- listeners:\n  - routes:\n    - policies: {cros: {}}\n",
			`t.yaml:4: binds[0].listeners[0].routes[0].policies.cros: unknown field "cros" (did you mean "cors"?)`},
		{"remote limit without host", "binds:\n- listeners:\n  - routes:\n    - policies:\n        remoteRateLimit: {domain: d, descriptors: [{entries: [{key: k, value: '\"v\"'}]}]}\n",
			`t.yaml:5: binds[0].listeners[0].routes[0].policies.remoteRateLimit: missing required field: one of service, host or backend`},
		{"remote limit, bad failure mode", "binds:\n- listeners:\n  - routes:\n    - policies:\n        remoteRateLimit:\n          host: 127.0.0.1:8081\n          domain: d\n          failureMode: sometimes\n          descriptors: [{entries: [{key: k, value: '\"v\"'}]}]\n",
			`t.yaml:8: binds[0].listeners[0].routes[0].policies.remoteRateLimit.failureMode: want "failClosed", "FailClosed", "failOpen" or "FailOpen", got "sometimes"`},
		{"remote limit, bad CEL", "policies:\n- name: {name: a, namespace: b}\n  target: {route: {name: r, namespace: n}}\n  policy:\n    remoteRateLimit:\n      host: 127.0.0.1:8081\n      domain: d\n      descriptors:\n      - entries:\n        - {key: user, value: 'user.name'}\n",
			"t.yaml:10: policies[0].policy.remoteRateLimit.descriptors[0].entries[0].value: CEL: ERROR: <input>:1:1: undeclared reference to 'user'\n | user.name\n | ^"},
		{"remote limit, bad descriptor type", "binds:\n- listeners:\n  - routes:\n    - policies:\n        remoteRateLimit:\n          host: 127.0.0.1:8081\n          domain: d\n          descriptors: [{type: bytes, entries: [{key: k, value: '\"v\"'}]}]\n",
			`t.yaml:8: binds[0].listeners[0].routes[0].policies.remoteRateLimit.descriptors[0].type: want "requests" or "tokens", got "bytes"`},
		{"syntax error", "binds: [\n", `t.yaml:1: did not find expected node content`},
		{"bad admin address", "config: {adminAddr: nowhere}\n", `t.yaml:1: config.adminAddr: want host:port: address nowhere: missing port in address`},
		{"admin port out of range", "config: {adminAddr: \"127.0.0.1:99999\"}\n", `t.yaml:1: config.adminAddr: port "99999" is not a number from 0 to 65535`},
		{"backend with an empty port", "binds:\n- listeners:\n  - routes:\n    - backends:\n      - host: \"127.0.0.1:\"\n",
			`t.yaml:5: binds[0].listeners[0].routes[0].backends[0].host: port "" is not a number from 1 to 65535`},
		{"backend port out of range", "binds:\n- listeners:\n  - routes:\n    - backends:\n      - host: \"127.0.0.1:99999\"\n",
			`t.yaml:5: binds[0].listeners[0].routes[0].backends[0].host: port "99999" is not a number from 1 to 65535`},
		{"backend port not a number", "binds:\n- listeners:\n  - routes:\n    - backends:\n      - host: \"127.0.0.1:abc\"\n",
			`t.yaml:5: binds[0].listeners[0].routes[0].backends[0].host: port "abc" is not a number from 1 to 65535`},
		{"backend port zero", "binds:\n- listeners:\n  - routes:\n    - backends:\n      - host: \"127.0.0.1:0\"\n",
			`t.yaml:5: binds[0].listeners[0].routes[0].backends[0].host: port "0" is not a number from 1 to 65535`},
		{"backend without a host", "binds:\n- listeners:\n  - routes:\n    - backends:\n      - host: \":8000\"\n",
			`t.yaml:5: binds[0].listeners[0].routes[0].backends[0].host: missing host before ":8000"`},
		{"conditional fallback not last", "binds:\n- listeners:\n  - routes:\n    - policies:\n        localRateLimit:\n          conditional:\n          - {maxTokens: 1, tokensPerFill: 1, fillInterval: 1s}\n          - {condition: 'true', maxTokens: 1, tokensPerFill: 1, fillInterval: 1s}\n",
			`t.yaml:7: binds[0].listeners[0].routes[0].policies.localRateLimit.conditional[0]: an entry without a condition is the fallback and must be last`},
		{"limit key not CEL", "binds:\n- listeners:\n  - routes:\n    - policies:\n        localRateLimit:\n        - {maxTokens: 1, tokensPerFill: 1, fillInterval: 1s, key: 'request.headers['}\n",
			"t.yaml:6: binds[0].listeners[0].routes[0].policies.localRateLimit[0].key: CEL: ERROR: <input>:1:17: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', '?', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | request.headers[\n | ................^"},
		{"limit key not a scalar", "binds:\n- listeners:\n  - routes:\n    - policies:\n        localRateLimit:\n          conditional:\n          - {maxTokens: 1, tokensPerFill: 1, fillInterval: 1s, key: '[request.path]'}\n",
			"t.yaml:7: binds[0].listeners[0].routes[0].policies.localRateLimit.conditional[0].key: CEL: expression yields list(dyn), want a string"},
		{"rateLimitError unknown", "binds:\n- listeners:\n  - routes:\n    - policies:\n        rateLimitError: xml\n",
			`t.yaml:5: binds[0].listeners[0].routes[0].policies.rateLimitError: want "text", "openai" or "anthropic", got "xml"`},
		{"rateLimitHeaders unknown", "binds:\n- listeners:\n  - routes:\n    - policies:\n        rateLimitHeaders: [ietf, draft7]\n",
			`t.yaml:5: binds[0].listeners[0].routes[0].policies.rateLimitHeaders[1]: want "xRateLimit", "ietf", "openai" or "anthropic", got "draft7"`},
		{"rateLimitHeaders twice", "binds:\n- listeners:\n  - routes:\n    - policies:\n        rateLimitHeaders: [openai, openai]\n",
			`t.yaml:5: binds[0].listeners[0].routes[0].policies.rateLimitHeaders: items at 0 and 1 are equal`},
		{"shadowHeaders without shadow", "binds:\n- listeners:\n  - routes:\n    - policies:\n        localRateLimit:\n        - {maxTokens: 1, tokensPerFill: 1, fillInterval: 1s, shadowHeaders: true}\n",
			`t.yaml:6: binds[0].listeners[0].routes[0].policies.localRateLimit[0].shadowHeaders: only with shadow: true (a limit that refuses always writes its headers)`},
		{"conditional condition not CEL", "binds:\n- listeners:\n  - routes:\n    - policies:\n        localRateLimit:\n          conditional:\n          - {condition: 'request.path ==', maxTokens: 1, tokensPerFill: 1, fillInterval: 1s}\n",
			"t.yaml:7: binds[0].listeners[0].routes[0].policies.localRateLimit.conditional[0].condition: CEL: ERROR: <input>:1:16: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | request.path ==\n | ...............^"},
		{"conditional entry's limit", "binds:\n- listeners:\n  - routes:\n    - policies:\n        localRateLimit:\n          conditional:\n          - {condition: 'true', maxTokens: 0, tokensPerFill: 2, fillInterval: 1s}\n",
			`t.yaml:7: binds[0].listeners[0].routes[0].policies.localRateLimit.conditional[0].maxTokens: must be >= 1, got 0`},
		{"authorization rule not a bool", "gateways:\n  default:\n    port: 3000\n    authorization: {rules: ['\"yes\"']}\n",
			`t.yaml:4: gateways.default.authorization.rules[0]: CEL: expression yields string, want bool`},
		{"route on an unknown gateway", "gateways:\n  default: {port: 3000}\nroutes:\n- gateways: [default, other/l]\n  backends: [{host: \"127.0.0.1:1\"}]\n",
			`t.yaml:4: routes[0].gateways[1]: unknown gateway "other/l" (want <gateway> or <gateway>/<listener> of gateways)`},
		{"route with no default gateway", "gateways:\n  main: {port: 3000}\nroutes:\n- backends: [{host: \"127.0.0.1:1\"}]\n",
			`t.yaml:4: routes[0]: missing gateways: no gateway is named default`},
		{"gateway without a port", "gateways:\n  default: {protocol: HTTP}\n", `t.yaml:2: gateways.default: missing required field port`},
		{"gateway and bind on one port", "binds:\n- port: 3000\n  listeners: []\ngateways:\n  default: {port: 3000}\n",
			`t.yaml:5: gateways.default.port: port 3000 is bound twice`},
		{"a bad backend of an attached route", "gateways:\n  default: {port: 3000}\nroutes:\n- name: a\n- name: b\n  backends: [{host: \"127.0.0.1:0\"}]\n",
			`t.yaml:6: routes[1].backends[0].host: port "0" is not a number from 1 to 65535`},
		{"llm model name with two wildcards", "llm:\n  models:\n  - {name: '*x*', provider: openAI}\n",
			`t.yaml:3: llm.models[0].name: a model name has at most one *, at its start or end: "*x*"`},
		{"llm baseUrl not http", "llm:\n  models:\n  - {name: m, provider: openAI, params: {baseUrl: 'ftp://h/v1'}}\n",
			`t.yaml:3: llm.models[0].params.baseUrl: want an http or https URL, got "ftp://h/v1"`},
		{"llm provider unknown", "llm:\n  models:\n  - {name: m, provider: {reference: p}}\n",
			`t.yaml:3: llm.models[0].provider.reference: unknown provider "p" (want a name of llm.providers)`},
		{"llm model on a gateway and a port", "gateways:\n  default: {port: 3000}\nllm:\n  gateways: default\n  port: 4000\n  models: []\n",
			`t.yaml:5: llm.port: llm.gateways cannot be used with llm.port`},
		{"header modifier with a bad name", "binds:\n- listeners:\n  - routes:\n    - policies: {requestHeaderModifier: {set: {'a b': c}}}\n",
			`t.yaml:4: binds[0].listeners[0].routes[0].policies.requestHeaderModifier: "a b" is not a header name`},
		{"every schema error at once, each at its place", "gateways:\n  default: {port: 3000}\nroutes:\n- backends:\n  - hots: 127.0.0.1:8000\n- policies:\n    cors: {allowOrigin: ['*']}\n",
			"t.yaml:5: routes[0].backends[0].hots: unknown field \"hots\" (did you mean \"host\"?)\n" +
				"t.yaml:7: routes[1].policies.cors.allowOrigin: unknown field \"allowOrigin\" (did you mean \"allowOrigins\"?)"},
		{"tracing protocol unknown", "config:\n  tracing:\n    otlpEndpoint: http://127.0.0.1:4317\n    otlpProtocol: thrift\n",
			`t.yaml:4: config.tracing.otlpProtocol: want "grpc" or "http", got "thrift"`},
		{"tracing endpoint not a URL", "config:\n  tracing:\n    otlpEndpoint: 'ftp://collector:21'\n",
			`t.yaml:3: config.tracing.otlpEndpoint: OTLP endpoint "ftp://collector:21": scheme "ftp", want http or https`},
		{"tracing sampling out of range", "config:\n  tracing:\n    otlpEndpoint: collector:4317\n    randomSampling: 1.5\n",
			`t.yaml:4: config.tracing.randomSampling: want a share of requests from 0 to 1, got 1.5`},
		{"tracing sampling a list", "config:\n  tracing:\n    otlpEndpoint: collector:4317\n    clientSampling: [1]\n",
			`t.yaml:4: config.tracing.clientSampling: want true or false, a number, a string or null, got a list`},
		{"tracing sampling a bad expression", "config:\n  tracing:\n    otlpEndpoint: collector:4317\n    randomSampling: 'request.headers['\n",
			"t.yaml:4: config.tracing.randomSampling: ERROR: <input>:1:17: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', '?', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | request.headers[\n | ................^"},
		{"tracing field misspelt", "config:\n  tracing:\n    otlpEndpont: collector:4317\n",
			`t.yaml:3: config.tracing.otlpEndpont: unknown field "otlpEndpont" (did you mean "otlpEndpoint"?)`},
		{"AI backend port out of range", "binds:\n- listeners:\n  - routes:\n    - backends:\n      - ai: {name: o, provider: {openAI: {}}, hostOverride: \"127.0.0.1:70000\"}\n",
			`t.yaml:5: binds[0].listeners[0].routes[0].backends[0].ai.hostOverride: port "70000" is not a number from 1 to 65535`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse accepted it; want error %q", tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error\n got: %s\nwant: %s", got, tt.want)
			}
		})
	}
}

func TestParseValues(t *testing.T) {
	cfg, err := Load("testdata/valid/route-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.AdminAddress(), "127.0.0.1:0"; got != want {
		t.Errorf("AdminAddress() = %q, want %q", got, want)
	}
	b, l := cfg.Binds[0], cfg.Binds[0].Listeners[0]
	r := l.Routes[0]
	if got, want := RouteKey(b, l, 0, r, 0), "team/default/bind/3001/main/team/chat"; got != want {
		t.Errorf("RouteKey = %q, want %q", got, want)
	}
	if got, want := r.Backends[0].Address(), "127.0.0.1:8001"; got != want {
		t.Errorf("Address = %q, want %q", got, want)
	}
	got := cfg.Policies[0].Policy.LocalRateLimit[0].Spec()
	want := ratelimit.Spec{MaxTokens: 100, TokensPerFill: 100, FillInterval: time.Minute, Type: ratelimit.Tokens}
	if got != want {
		t.Errorf("Spec() = %+v, want %+v", got, want)
	}
	def, err := Parse("d.yaml", []byte("binds:\n- port: 3000\n  listeners:\n  - routes:\n    - name: httpbin\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := RouteKey(def.Binds[0], def.Binds[0].Listeners[0], 0, def.Binds[0].Listeners[0].Routes[0], 0),
		"default/default/bind/3000/listener0/default/httpbin"; got != want {
		t.Errorf("default RouteKey = %q, want %q (REFERENCE.md)", got, want)
	}
	if got, want := def.AdminAddress(), DefaultAdminAddr; got != want {
		t.Errorf("default AdminAddress() = %q, want %q", got, want)
	}
}

// FuzzLoad: whatever the bytes, Parse returns a config or *Errors naming
// the file; a config it returns is one the data plane's own check accepts
// (Apply validates again), and a refusal is only of features refproxy does
// not implement, each naming the file. Seeded with the examples, the test
// configs and the 55 real configs of the reference (every style).
func FuzzLoad(f *testing.F) {
	for _, g := range []string{"../examples/*.yaml", "testdata/valid/*.yaml", "testdata/invalid/*.yaml", "testdata/corpus/*.yaml"} {
		m, _ := filepath.Glob(g)
		for _, p := range m {
			data, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.yaml", data)
		if err != nil {
			if !isConfigError(err) {
				t.Fatalf("error is not a *config.Error: %T %v", err, err)
			}
			for _, e := range allErrors(err) {
				if !strings.HasPrefix(e.Error(), "fuzz.yaml") {
					t.Fatalf("error does not name the file: %v", e)
				}
			}
			return
		}
		if cfg == nil {
			t.Fatal("nil config without error")
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Parse accepted a config Validate refuses: %v", err)
		}
	})
}

// TestAliasBomb: a few aliases standing for millions of values are refused
// at a bound rather than expanded.
func TestAliasBomb(t *testing.T) {
	doc := "a: &a [x,x,x,x,x,x,x,x,x,x]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g"} {
		doc += n + ": &" + n + " [" + strings.Repeat("*"+prev+",", 9) + "*" + prev + "]\n"
		prev = n
	}
	_, err := Parse("bomb.yaml", []byte(doc))
	if err == nil || !strings.Contains(err.Error(), "values once its aliases are expanded") {
		t.Fatalf("got %v, want the document refused for its expanded size", err)
	}
}

// isConfigError reports whether err is a *Error (or holds some).
func isConfigError(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
