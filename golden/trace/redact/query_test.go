package redact

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestQueryCredentials: the value of a credential query parameter is
// redacted in every string of an event that holds a URL's query (a
// snapshot's uri and pathAndQuery, a reason quoting it), whatever its
// length and case, by AppendEvent and by the fast path alike; the other
// parameters, and a name that only ends like one, are left.
func TestQueryCredentials(t *testing.T) {
	r := New(Options{Key: testKey, ExtraQuery: []string{"tenant_sig"}})
	for _, tt := range []struct{ name, in, want string }{
		{"Gemini's key", `{"request":{"uri":"https://g/v1beta/models/m:generateContent?key=AIzaSyPlanted0123456789&alt=sse"}}`,
			`{"request":{"uri":"https://g/v1beta/models/m:generateContent?key=` + fp("AIzaSyPlanted0123456789") + `&alt=sse"}}`},
		{"a short one, after another parameter", `{"pathAndQuery":"/get?page=2&api_key=k1"}`, `{"pathAndQuery":"/get?page=2&api_key=` + fp("k1") + `"}`},
		{"any case", `{"uri":"/x?Access_Token=tok-abc#frag"}`, `{"uri":"/x?Access_Token=` + fp("tok-abc") + `#frag"}`},
		{"an extra name", `{"uri":"/x?tenant_sig=s1"}`, `{"uri":"/x?tenant_sig=` + fp("s1") + `"}`},
		{"quoted in a reason", `{"reason":"GET /x?token=abc123def456 refused"}`, `{"reason":"GET /x?token=` + fp("abc123def456") + ` refused"}`},
		{"other parameters", `{"uri":"/x?monkey=1&keys=2&page=3&key=&code"}`, `{"uri":"/x?monkey=1&keys=2&page=3&key=&code"}`},
		{"not in a query", `{"reason":"key=abc","expr":"request.query == 'key=x'"}`, `{"reason":"key=abc","expr":"request.query == 'key=x'"}`},
		{"already redacted", `{"uri":"/x?key=` + fp("v") + `"}`, `{"uri":"/x?key=` + fp("v") + `"}`},
	} {
		t.Run(tt.name, func(t *testing.T) { checkRedacts(t, r, tt.in, tt.want) })
	}
}

// checkRedacts fails unless AppendEvent redacts the event in to want,
// and the fast paths agree with it on in, as written and as refproxy
// writes it (json.Marshal: <, > and & escaped).
func checkRedacts(t *testing.T, r *Redactor, in, want string) {
	t.Helper()
	got, changed := r.AppendEvent(nil, []byte(in), &Secrets{})
	if string(got) != want || changed != (in != want) {
		t.Errorf("AppendEvent\n in   %s\n got  %s (changed %v)\n want %s", in, got, changed, want)
	}
	checkMayRedact(t, r, []byte(in), nil)
	checkParsed(t, r, []byte(in), nil)
	var v any
	if err := json.Unmarshal([]byte(in), &v); err != nil {
		t.Fatal(err)
	}
	m, _ := json.Marshal(v)
	checkMayRedact(t, r, m, nil)
	checkParsed(t, r, m, nil)
}

// TestQueryCredentialsKeptForTheRequest: a query credential is a secret of
// its request: a later event quoting it elsewhere (a backend echoing it)
// is scrubbed of it too.
func TestQueryCredentialsKeptForTheRequest(t *testing.T) {
	r := New(Options{Key: testKey})
	var s Secrets
	first := `{"request":{"pathAndQuery":"/chat?key=AIzaSyPlanted0123456789"}}`
	later := `{"response":{"headers":{"x-echo":"AIzaSyPlanted0123456789"}},"reason":"key%2Bwith%2Bplus"}`
	if _, changed := r.AppendEvent(nil, []byte(first), &s); !changed {
		t.Fatal("the query credential was not redacted")
	}
	got, _ := r.AppendEvent(nil, []byte(later), &s)
	if strings.Contains(string(got), "AIzaSyPlanted") {
		t.Errorf("the later event keeps the credential: %s", got)
	}
	var s2 Secrets
	r.CollectEvent([]byte(`{"uri":"/x?access_token=a%2Bb%2Bc%2Bd%2Be"}`), &s2)
	if vals := strings.Join(s2.Values(), " "); !strings.Contains(vals, "a+b+c+d+e") || !strings.Contains(vals, "a%2Bb%2Bc%2Bd%2Be") {
		t.Errorf("collected %q: want the value and its decoded form", vals)
	}
}

// TestQueryCredentialsInText: curl's -v output, a log line and a command
// line show a URL's credentials redacted.
func TestQueryCredentialsInText(t *testing.T) {
	r := New(Options{Key: testKey})
	in := "> GET /v1beta/models/m:generateContent?key=AIzaSyPlanted0123456789 HTTP/1.1\r\ncurl 'http://x/get?a=1&access_token=t0k'\n"
	want := "> GET /v1beta/models/m:generateContent?key=" + fp("AIzaSyPlanted0123456789") + " HTTP/1.1\r\ncurl 'http://x/get?a=1&access_token=" + fp("t0k") + "'\n"
	if got := r.Text(in, &Secrets{}); got != want {
		t.Errorf("Text\n got  %q\n want %q", got, want)
	}
	if got := New(Options{Key: testKey, NoDefaults: true}).Text(in, &Secrets{}); got != in {
		t.Errorf("with redaction off: %q", got)
	}
}

func TestQueryDefaultsDocumented(t *testing.T) {
	for _, h := range QueryDefaults {
		if h.Name != strings.ToLower(h.Name) || h.Why == "" || strings.IndexFunc(h.Name, func(c rune) bool { return c > 0x7f || !isNameByte(byte(c)) }) >= 0 {
			t.Errorf("%+v: want a lower-case name of letters, digits, - and _, and a reason", h)
		}
	}
}

// TestWithQuery: WithQuery adds query parameters (a config's) to the
// defaults, in any case, leaving its parent as it was.
func TestWithQuery(t *testing.T) {
	r := New(Options{Key: testKey})
	w := r.WithQuery("Tenant_Sig")
	if !w.SensitiveQuery("tenant_SIG") || !w.SensitiveQuery("key") || r.SensitiveQuery("tenant_sig") {
		t.Errorf("WithQuery: tenant_sig %v, key %v; the parent tenant_sig %v", w.SensitiveQuery("tenant_SIG"), w.SensitiveQuery("key"), r.SensitiveQuery("tenant_sig"))
	}
	if got := w.Text("GET /x?tenant_sig=s1 HTTP/1.1", &Secrets{}); got != "GET /x?tenant_sig="+fp("s1")+" HTTP/1.1" {
		t.Errorf("Text: %q", got)
	}
}
