package redact

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/golden/trace"
)

// policies wraps an effectivePolicy object in a policySelection event.
func policies(p string) string {
	return `{"eventStart":null,"eventEnd":113,"severity":"info","message":{"type":"policySelection","effectivePolicy":` + p + `}}`
}

// TestConfigCredentials: the credentials a proxy that does not redact
// shows in an event's effectivePolicy (its config's keys) are redacted,
// by AppendEvent and by the fast paths alike; what is no credential (a
// policy's name, the headers a modifier removes, a realm) is left.
func TestConfigCredentials(t *testing.T) {
	r := New(Options{Key: testKey})
	for _, tt := range []struct{ name, in, want string }{
		{"every client's API key of an apiKey policy",
			`{"apiKey":{"keys":[{"key":"sk-client-one-0001","metadata":{"user":"ann"}},{"key":"k2","metadata":null}],"mode":"strict"},"basicAuth":null}`,
			`{"apiKey":{"keys":[{"key":"` + fp("sk-client-one-0001") + `","metadata":{"user":"ann"}},{"key":"` + fp("k2") + `","metadata":null}],"mode":"strict"},"basicAuth":null}`},
		{"keys as strings, and a key hash",
			`{"apiKey":{"keys":["sk-a","sk-b"],"keyHash":"9f86d081884c7d65"}}`,
			`{"apiKey":{"keys":["` + fp("sk-a") + `","` + fp("sk-b") + `"],"keyHash":"` + fp("9f86d081884c7d65") + `"}}`},
		{"a basicAuth policy's htpasswd",
			`{"basicAuth":{"htpasswd":"ann:$apr1$salt$hash","realm":"gw"}}`,
			`{"basicAuth":{"htpasswd":"` + fp("ann:$apr1$salt$hash") + `","realm":"gw"}}`},
		{"the key the proxy sends a backend, and an AWS one",
			`[{"backendAuth":{"key":"sk-backend-0002"}},{"backendAuth":{"aws":{"accessKeyId":"AKIAPLANTED","secretAccessKey":"aws-secret","sessionToken":"aws-session","region":"eu-west-1"}}}]`,
			`[{"backendAuth":{"key":"` + fp("sk-backend-0002") + `"}},{"backendAuth":{"aws":{"accessKeyId":"` + fp("AKIAPLANTED") + `","secretAccessKey":"` + fp("aws-secret") + `","sessionToken":"` + fp("aws-session") + `","region":"eu-west-1"}}}]`},
		{"a header a modifier sets, as a map and as pairs; the ones it removes",
			`{"requestHeaderModifier":{"set":{"authorization":"Bearer sk-upstream-0003","x-gateway":"gw"},"add":[["x-api-key","k3"],["x-b","v"]],"remove":["authorization","cookie"]},"responseHeaderModifier":{"add":{"set-cookie":"sid=s3cret; Path=/"}}}`,
			`{"requestHeaderModifier":{"set":{"authorization":"Bearer ` + fp("sk-upstream-0003") + `","x-gateway":"gw"},"add":[["x-api-key","` + fp("k3") + `"],["x-b","v"]],"remove":["authorization","cookie"]},"responseHeaderModifier":{"add":{"set-cookie":"sid=` + fp("s3cret") + `; Path=/"}}}`},
		{"a header a modifier sets as {name, value}, either order",
			`{"requestHeaderModifier":{"set":[{"name":"authorization","value":"Bearer sk-up-0005"},{"value":["k5"],"name":"x-api-key"},{"name":"x-b","value":"v"}]}}`,
			`{"requestHeaderModifier":{"set":[{"name":"authorization","value":"Bearer ` + fp("sk-up-0005") + `"},{"value":["` + fp("k5") + `"],"name":"x-api-key"},{"name":"x-b","value":"v"}]}}`},
		{"a route's header match on a credential, exact or regex; another header's kept",
			`{"matches":[{"headers":[{"name":"authorization","value":{"exact":"Bearer sk-live-0006"}},{"value":{"regex":"^k3P-0007.*$"},"name":"X-Api-Key"},{"name":"x-tenant","value":{"exact":"acme"}}],"path":{"pathPrefix":"/"}}]}`,
			`{"matches":[{"headers":[{"name":"authorization","value":{"exact":"Bearer ` + fp("sk-live-0006") + `"}},{"value":{"regex":"` + fp("^k3P-0007.*$") + `"},"name":"X-Api-Key"},{"name":"x-tenant","value":{"exact":"acme"}}],"path":{"pathPrefix":"/"}}]}`},
		{"a route's query match on a credential parameter; another parameter's, and a header named key, kept",
			`{"matches":[{"query":[{"name":"key","value":{"exact":"AIzaPLANTED-0008"}},{"value":{"regex":"^t0k.*$"},"name":"Access_Token"},{"name":"alt","value":{"exact":"sse"}}],"headers":[{"name":"key","value":{"exact":"k"}}]}]}`,
			`{"matches":[{"query":[{"name":"key","value":{"exact":"` + fp("AIzaPLANTED-0008") + `"}},{"value":{"regex":"` + fp("^t0k.*$") + `"},"name":"Access_Token"},{"name":"alt","value":{"exact":"sse"}}],"headers":[{"name":"key","value":{"exact":"k"}}]}]}`},
		{"any spelling of a field; a URL's password",
			`{"oidc":{"client_secret":"cs-1","Client-Secret":"cs-2","issuer":"https://idp"},"remoteRateLimit":{"target":"redis://user:pw-4@redis:6379/0"}}`,
			`{"oidc":{"client_secret":"` + fp("cs-1") + `","Client-Secret":"` + fp("cs-2") + `","issuer":"https://idp"},"remoteRateLimit":{"target":"redis://user:` + fp("pw-4") + `@redis:6379/0"}}`},
		{"already redacted, as the reference and refproxy write it",
			`{"apiKey":{"keys":[{"key":"<redacted>"}]},"requestHeaderModifier":{"set":{"authorization":"<redacted>"}},"basicAuth":{"htpasswd":"` + fp("x") + `"}}`,
			`{"apiKey":{"keys":[{"key":"<redacted>"}]},"requestHeaderModifier":{"set":{"authorization":"<redacted>"}},"basicAuth":{"htpasswd":"` + fp("x") + `"}}`},
		{"no credential: the real proxy's",
			`{"localRateLimit":null,"authorization":null,"apiKey":null,"cors":{"allowOrigins":["https://a"],"allowHeaders":["authorization"]},"transformation":{"request":{"set":[["x-key","request.path"]]}}}`,
			`{"localRateLimit":null,"authorization":null,"apiKey":null,"cors":{"allowOrigins":["https://a"],"allowHeaders":["authorization"]},"transformation":{"request":{"set":[["x-key","request.path"]]}}}`},
	} {
		t.Run(tt.name, func(t *testing.T) { checkRedacts(t, r, policies(tt.in), policies(tt.want)) })
	}
}

// TestMayHoldPolicies: an effectivePolicy whose members are all null (the
// real proxies' and refproxy's most often) is passed over without reading
// its strings; any other shape is read, however written, and whatever
// the reading finds, AppendEvent agrees with the fast paths.
func TestMayHoldPolicies(t *testing.T) {
	r := New(Options{Key: testKey})
	var cache seen // as a Stream keeps it, over every case in turn
	for _, tt := range []struct {
		src  string
		want bool
	}{
		{`{"message":{"type":"routeSelection"}}`, false},
		{policies(`{"apiKey":null,"authorization":null,"cors":null}`), false},
		{policies(`{ "apiKey":null , "authorization":null }`), false},
		{policies(`{}`), false},
		{policies(`null`), false},
		{`{"type":"effectivePolicy","x":["effectivePolicy"]}`, true},
		{policies(`{"cors":{"allowOrigins":["*"]}}`), true},
		{policies(`{"authorization" : null}`), true},
		{policies(`{"authorization":null "x":"Bearer t"}`), true},
		{`{"effectivePolicy":{"a":null} {"authorization":"Bearer t"}}`, true},
		{`{"effectivePolicy":null {"authorization":"Bearer t"}}`, true},
		{`{"effectivePolicy" {"authorization":"Bearer t"}}`, true},
		{policies(`{"a\"":null}`), true},
	} {
		for _, c := range []*[]byte{nil, &cache.policies, &cache.policies} {
			if got := r.mayHoldPolicies([]byte(tt.src), c); got != tt.want {
				t.Errorf("mayHoldPolicies(%s, cache %q) = %v, want %v", tt.src, *cmp.Or(c, new([]byte)), got, tt.want)
			}
		}
		checkMayRedact(t, r, []byte(tt.src), nil)
		if json.Valid([]byte(tt.src)) {
			checkParsed(t, r, []byte(tt.src), nil)
		}
	}
}

// TestConfigCredentialsOnlyInPolicies: the names are read as a config's
// only in an effectivePolicy (and in a config dump, AppendConfig): a
// member "token" elsewhere in an event (an LLM response's) is left.
func TestConfigCredentialsOnlyInPolicies(t *testing.T) {
	r := New(Options{Key: testKey})
	in := `{"message":{"type":"x","token":"the","usage":{"password":"p"},"effectivePolicies":{"key":"k"}}}`
	if got, changed := r.AppendEvent(nil, []byte(in), &Secrets{}); changed {
		t.Errorf("changed outside an effectivePolicy: %s", got)
	}
	checkMayRedact(t, r, []byte(in), nil)
}

// TestConfigCredentialsKeptForTheRequest: a key the effectivePolicy shows
// is a secret of its request: a later event quoting it is scrubbed too.
func TestConfigCredentialsKeptForTheRequest(t *testing.T) {
	st := NewStream(New(Options{Key: testKey}))
	first := `{"requestId":"r1","message":{"type":"policySelection","effectivePolicy":{"backendAuth":{"key":"sk-backend-planted-0005"}}}}`
	later := `{"requestId":"r1","message":{"type":"backendCallResult","error":"401 from upstream for key sk-backend-planted-0005"}}`
	for _, ev := range []string{first, later} {
		h, err := trace.ParseHeader([]byte(ev))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := st.Parsed([]byte(ev), h)
		if strings.Contains(string(got), "sk-backend-planted") {
			t.Errorf("the key is left: %s", got)
		}
	}
}

// TestConfigCredentialsOff: with the defaults off, only the headers asked
// for are redacted, a modifier's among them.
func TestConfigCredentialsOff(t *testing.T) {
	r := New(Options{Key: testKey, NoDefaults: true, Extra: []string{"authorization"}})
	in := policies(`{"apiKey":{"keys":[{"key":"sk-1"}]},"requestHeaderModifier":{"set":{"authorization":"Bearer up-1"}},"x":"redis://u:pw@h"}`)
	want := policies(`{"apiKey":{"keys":[{"key":"sk-1"}]},"requestHeaderModifier":{"set":{"authorization":"Bearer ` + fp("up-1") + `"}},"x":"redis://u:pw@h"}`)
	if got, _ := r.AppendEvent(nil, []byte(in), &Secrets{}); string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	checkMayRedact(t, r, []byte(in), nil)
	checkParsed(t, r, []byte(in), nil)
	none := New(Options{Key: testKey, NoDefaults: true})
	if got, changed := none.AppendEvent(nil, []byte(in), &Secrets{}); changed {
		t.Errorf("--redact=false changed %s", got)
	}
}

// TestAppendConfig: a config dump's credentials are redacted wherever
// they stand; a policy's key, a route's name and the rest are copied byte
// for byte.
func TestAppendConfig(t *testing.T) {
	r := New(Options{Key: testKey})
	in := `{"policies":[{"key":"traffic/default/llm:backendAuth","name":{"kind":"AgentgatewayPolicy","name":"llm"},"policy":{"backend":{"backendAuth":{"key":"sk-dump-planted-0006"}}}}],` +
		"\n" + `"backends":[{"backend":{"ai":{"name":"openai","provider":{"openAI":{"apiKey":"sk-inline-0007"}}}}}],"config":{"tracing":{"headers":{"Authorization":"Bearer otlp-0008"},"endpoint":"https://u:otlp-pw@collector/v1"}},"note":"sk-dump-planted-0006"}`
	want := `{"policies":[{"key":"traffic/default/llm:backendAuth","name":{"kind":"AgentgatewayPolicy","name":"llm"},"policy":{"backend":{"backendAuth":{"key":"` + fp("sk-dump-planted-0006") + `"}}}}],` +
		"\n" + `"backends":[{"backend":{"ai":{"name":"openai","provider":{"openAI":{"apiKey":"` + fp("sk-inline-0007") + `"}}}}}],"config":{"tracing":{"headers":{"Authorization":"Bearer ` + fp("otlp-0008") + `"},"endpoint":"https://u:` + fp("otlp-pw") + `@collector/v1"}},"note":"` + fp("sk-dump-planted-0006") + `"}`
	got, changed := r.AppendConfig(nil, []byte(in))
	if string(got) != want || !changed {
		t.Errorf("AppendConfig\n got  %s\n want %s", got, want)
	}
	if again, changed := r.AppendConfig(nil, got); changed {
		t.Errorf("not idempotent: %s", again)
	}
}

// TestRealDumpsUnchanged: the real proxy's dumps hold no credential and
// come out byte for byte.
func TestRealDumpsUnchanged(t *testing.T) {
	files, _ := filepath.Glob("../../../cli/internal/configcmd/testdata/agentgateway/*.json")
	if len(files) == 0 {
		t.Fatal("no real dumps")
	}
	r := New(Options{Key: testKey})
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if got, changed := r.AppendConfig(nil, b); changed || string(got) != string(b) {
			t.Errorf("%s changed", f)
		}
	}
}

// TestFieldsDocumented: every field and key holder has its reason, and
// its name is found in any case.
func TestFieldsDocumented(t *testing.T) {
	for _, f := range append(FieldDefaults, KeyHolders...) {
		if f.Why == "" || normalizeField(f.Name) == "" {
			t.Errorf("%q: no reason or no name", f.Name)
		}
	}
	for _, f := range FieldDefaults {
		if !credentialMember(f.Name, false) || !credentialMember(strings.ToUpper(f.Name), false) {
			t.Errorf("%q not found", f.Name)
		}
	}
}

// manyKeys is a dump whose apiKey policy holds n clients' keys.
func manyKeys(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"policies":[{"key":"traffic/default/keys:apiKey","policy":{"traffic":{"apiKey":{"keys":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"key":"sk-client-%06d-planted","metadata":{"user":"client-%d"}}`, i, i)
	}
	b.WriteString(`]}}}}]}`)
	return []byte(b.String())
}

// TestManyKeys: every key of a config holding thousands is redacted where
// it stands, while the secrets kept to scrub elsewhere stay bounded (a
// search of every string for each of 50 000 keys took 12 s:
// BenchmarkAppendConfig).
func TestManyKeys(t *testing.T) {
	r := New(Options{Key: testKey})
	dump := manyKeys(2000)
	out, _ := r.AppendConfig(nil, dump)
	if n := strings.Count(string(out), "planted"); n != 0 {
		t.Errorf("%d keys left of 2000", n)
	}
	if n := strings.Count(string(out), "<redacted:"); n != 2000 {
		t.Errorf("%d markers, want 2000", n)
	}
	var s Secrets
	r.CollectConfig(dump, &s)
	if s.Len() > MaxSecretsPerRequest {
		t.Errorf("%d secrets kept, want at most %d", s.Len(), MaxSecretsPerRequest)
	}
}

// BenchmarkAppendConfig: a config dump of 1 000 and 50 000 clients' keys
// (the time per key stays the same).
func BenchmarkAppendConfig(b *testing.B) {
	r := New(Options{Key: testKey})
	for _, n := range []int{1000, 50000} {
		dump := manyKeys(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(len(dump)))
			for b.Loop() {
				r.AppendConfig(nil, dump)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
		})
	}
}
