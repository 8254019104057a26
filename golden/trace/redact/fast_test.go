package redact

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse/ssetest"
)

// checkMayRedact fails when mayRedact says AppendEvent would change
// nothing of src with secrets and AppendEvent does change it, or learns a
// credential from it.
func checkMayRedact(t *testing.T, r *Redactor, src []byte, secrets []string) bool {
	t.Helper()
	var s Secrets
	for _, v := range secrets {
		s.Add(v)
	}
	before := s.Values()
	var buf []byte
	may := namesOf(r).mayRedact(r, src, &s, &buf)
	if len(secrets) == 0 && may != namesOf(r).mayRedact(r, src, nil, &buf) {
		t.Fatalf("mayRedact with no secrets and with nil differ on %q", src)
	}
	out, changed := r.AppendEvent(nil, src, &s)
	if !may && (changed || !bytes.Equal(out, src) || !slices.Equal(s.Values(), before)) {
		t.Fatalf("mayRedact said nothing to do, AppendEvent disagrees:\n src     %q\n secrets %q\n out     %q\n learned %q", src, secrets, out, s.Values())
	}
	return may
}

// TestMayRedact: the fast path is taken for what holds nothing to redact
// (the real proxies' traces, a policySelection's "authorization":null),
// and not for what does, however written.
func TestMayRedact(t *testing.T) {
	r := New(Options{Key: testKey, Extra: []string{"x-tenant-token"}})
	for _, tt := range []struct {
		name    string
		src     string
		secrets []string
		may     bool
	}{
		{"no headers", `{"message":{"type":"requestStarted"}}`, nil, false},
		{"headers without credentials", `{"message":{"requestState":{"request":{"headers":{"accept":"*/*","user-agent":"curl/8"}}}}}`, nil, false},
		{"names, no headers object", `{"message":{"reason":"authorization","effectivePolicy":{"authorization":{"rules":["x"]}}}}`, nil, false},
		{"an authorization policy that is null", `{"headers":{},"message":{"effectivePolicy":{"apiKey":null,"authorization":null,"cors":null}}}`, nil, false},
		{"a name, null, then a value without a comma", `{"headers":{"authorization":null"Bearer x"}}`, nil, true},
		{"an authorization policy that is set", `{"headers":{},"message":{"effectivePolicy":{"authorization":{"rules":["x"]}}}}`, nil, true},
		{"headers escaped", `{"h\u0065aders":{"cookie":"a=b"}}`, nil, true},
		{"authorization header", `{"headers":{"authorization":"Bearer x"}}`, nil, true},
		{"in capitals", `{"headers":{"AUTHORIZATION":"Bearer x"}}`, nil, true},
		{"an extra name", `{"headers":{"X-Tenant-Token":"t"}}`, nil, true},
		{"escaped", `{"headers":{"authorizatio\u006e":"Bearer x"}}`, nil, true},
		{"escaped otherwise", `{"headers":{"x":"a \"b\" c","cookie":"a=b"}}`, nil, true},
		{"escapes, no name", `{"reason":"matched path prefix \"/\"","x":"\\"}`, nil, false},
		{"a Kelvin sign folds to k", `{"headers":{"x-api-` + "\u212a" + `ey":"v"}}`, nil, true},
		{"a long secret", `{"message":{"reason":"key sk-secret-123 refused"}}`, []string{"sk-secret-123"}, true},
		{"a long secret, escaped", `{"message":{"reason":"key sk-secret\/123 refused"}}`, []string{"sk-secret/123"}, true},
		{"a short secret, whole", `{"message":{"bucket":"abc"}}`, []string{"abc"}, true},
		{"a short secret, inside", `{"message":{"path":"/abc/def"}}`, []string{"abc"}, false},
		{"a secret elsewhere", `{"message":{"bucket":"xyz"}}`, []string{"abc", "sk-secret-123"}, false},
		// \u escapes are decoded by the fast path (jsonscan.AppendUnquoted), as walk decodes them
		{"a short secret behind \\u escapes", `{"message":{"bucket":"\u0061b\u0063"}}`, []string{"abc"}, true},
		{"a long secret behind a \\u escape", `{"message":{"reason":"key sk-secret\u002d123 refused"}}`, []string{"sk-secret-123"}, true},
		{"a long secret behind a surrogate pair", `{"message":{"reason":"\ud83d\ude00-sk-secret-123"}}`, []string{"\U0001F600-sk-secret-123"}, true},
		{"\\u escapes, no secret", `{"message":{"x":"\u00e9t\u00e9 \ud83d\ude00"}}`, []string{"abc"}, false},
		{"a \\u escape that is not one", `{"message":{"x":"\u00zz"}}`, []string{"abc"}, true},
		{"cut short", `{"headers":{"authorization":"Bearer x`, nil, true},
		{"a name cut short", `{"headers":{"authorization`, nil, true},
		{"a backslash at the end", `{"headers":{},"x":"a\`, nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkMayRedact(t, r, []byte(tt.src), tt.secrets); got != tt.may {
				t.Errorf("mayRedact = %v, want %v", got, tt.may)
			}
		})
	}
}

// TestMayRedactSavedTraces: every event of the real proxies' saved traces
// in the repository takes the fast path (none holds a credential), and
// the recorded follow stream's do unless they hold its cookie.
func TestMayRedactSavedTraces(t *testing.T) {
	r := New(Options{})
	files, _ := filepath.Glob("../sse/testdata/agentgateway/*.jsonl")
	more, _ := filepath.Glob("../../traces/*.jsonl")
	files = append(files, more...)
	if len(files) < 10 {
		t.Fatalf("found %d saved traces, want the real proxy's and the goldens", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range bytes.Split(b, []byte("\n")) {
			if checkMayRedact(t, r, l, nil) {
				t.Errorf("%s:%d: the slow path for an event without credentials: %s", f, i+1, l)
			}
		}
	}
	evs, _ := followEvents(t)
	for _, e := range evs {
		if got, want := checkMayRedact(t, r, e, nil), bytes.Contains(e, []byte(`"cookie"`)); got != want {
			t.Errorf("mayRedact = %v, want %v: %s", got, want, e)
		}
	}
	_ = ssetest.FollowFile
}

// FuzzMayRedact: whatever the event and the secrets, when mayRedact says
// there is nothing to do, AppendEvent changes nothing and learns nothing.
func FuzzMayRedact(f *testing.F) {
	f.Add(`{"message":{"requestState":{"request":{"headers":{"authorization":"Bearer sk-secret-123"}}},"reason":"sk-secret-123"}}`, "sk-secret-123", "abc")
	f.Add(`{"headers":{"x":"a \"b\" c","cookie":"a=b"}}`, "", "b")
	f.Add(`{"effectivePolicy":{"authorization":null,"x":"authorization"}}`, "", "")
	f.Add(`{"a":"\\","b":"x-api-`+"\u212a"+`ey"}`, "x", "")
	f.Add(`["\"`, "", "")
	f.Add(`{"headers":{"cookie":null"a=b"}}`, "", "")
	f.Add(`{"k":"İ"}`, "", "")
	f.Add(`{"uri":"/x?a=1\u0026key=v","r":"?token=\u003cx"}`, "", "")
	f.Add(`{"uri":"/x?ke\u0079=v"}`, "", "")
	f.Add(`{"effectivePolicy":{"apiKey":{"keys":[{"key":"sk-1"}]},"basicAuth":null,"m":{"set":[["authorization","Bearer t"]]}}}`, "", "")
	f.Add(`{"effectivePolicy":{"backendAuth":{"key":"\u003credacted\u003e"},"x":"redis://u:p@h:1","Client_Secret":["a"],"add":{"x-api-key":"k"}}}`, "p", "")
	f.Add(`{"effectivePolicy":{"authorization":null "authorization":"Bearer x"},"b":{"effectivePolicy":null {"x-api-key":"k"}}}`, "", "")
	r := New(Options{Key: testKey, Extra: []string{"x-tenant-token", "K"}})
	f.Fuzz(func(t *testing.T, src, secret1, secret2 string) {
		checkMayRedact(t, r, []byte(src), nil)
		checkMayRedact(t, r, []byte(src), []string{secret1, secret2})
	})
}

// checkParsed fails when appendParsed, taking src, redacts it otherwise
// than AppendEvent, or keeps other secrets; it reports whether it took it.
func checkParsed(t *testing.T, r *Redactor, src []byte, secrets []string) bool {
	t.Helper()
	var s1, s2 Secrets
	for _, v := range secrets {
		s1.Add(v)
		s2.Add(v)
	}
	want, wantChanged := r.AppendEvent([]byte("prefix:"), src, &s1)
	var spans []span
	got, changed, ok := namesOf(r).appendParsed(r, []byte("prefix:"), src, &s2, &spans, new(seen), (&markers{r: r}).of, true)
	if !ok {
		return false
	}
	if !bytes.Equal(got, want) || changed != wantChanged || !slices.Equal(s1.Values(), s2.Values()) {
		t.Fatalf("appendParsed and AppendEvent differ:\n src       %s\n secrets   %q\n got       %s (changed %v), kept %q\n AppendEvent %s (changed %v), kept %q",
			src, secrets, got, changed, s2.Values(), want, wantChanged, s1.Values())
	}
	return true
}

// TestAppendParsed: on JSON without a backslash, appendParsed gives
// AppendEvent's bytes and keeps its secrets; it declines the rest.
func TestAppendParsed(t *testing.T) {
	r := New(Options{Key: testKey, Extra: []string{"x-tenant-token"}})
	for _, tt := range []struct {
		name    string
		src     string
		secrets []string
		taken   bool
	}{
		{"nothing", `{"message":{"type":"requestStarted"}}`, nil, true},
		{"request and response headers, any case, arrays", `{"message":{"requestState":{"request":{"headers":{"accept":"*/*","Authorization":"Bearer sk-secret-123","x-api-key":"abc","cookie":["a=one-cookie","b=two"]}},"response":{"headers":{"set-cookie":"sid=xyz; Path=/","X-Tenant-Token":"t0k"}}}}}`, nil, true},
		{"a credential before and after its header", `{"message":{"reason":"key sk-secret-123 refused","headers":{"authorization":"Bearer sk-secret-123"},"bucket":"sk-secret-123","k":"abc"}}`, nil, true},
		{"secrets of earlier events", `{"message":{"reason":"key sk-secret-123","bucket":"abc","path":"/abc/x","sk-secret-123":1}}`, []string{"sk-secret-123", "abc"}, true},
		{"nested headers, odd members", ` { "headers" : { "a" : 1 , "cookie" : { "headers" : { "authorization" : "Basic dXNlcjpwYXNz" } } , "x-api-key" : [ "k1" , [ "k2" ] , { "k" : "k3" } , null ] , "b" : null } } `, nil, true},
		{"headers as a value", `{"type":"headers","x":["headers",{"headers":{"cookie":"c=d"}}]}`, nil, true},
		{"a key holding headers", `{"x\"headers":{"cookie":"c=d"}}`, nil, false},
		{"redacted by refproxy (json.Marshal's escapes)", `{"message":{"reason":"key \u003credacted:0123456789ab\u003e","headers":{"authorization":"Bearer \u003credacted:0123456789ab\u003e","x-a\u0026b":"\u003c\u003e","cookie":"a=\u003credacted\u003e; b=clear-cookie"}}}`, nil, true},
		{"escapes and a secret with <", `{"a":"\u003cx"}`, []string{"<x"}, false},
		{"escapes and secrets without", `{"a":"\u003cx","b":"sk-secret-123"}`, []string{"sk-secret-123"}, true},
		{"already redacted", `{"headers":{"authorization":"<redacted>","cookie":"a=<redacted:0123456789ab>"}}`, nil, true},
		{"empty values", `{"headers":{"authorization":"","cookie":""}}`, nil, true},
		{"a short secret that is a key", `{"abc":"x","y":"abc"}`, []string{"abc"}, true},
		{"a secret with a quote", `{"a":"x","b":"y"}`, []string{`x","b":"y`}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !json.Valid([]byte(tt.src)) {
				t.Fatalf("not JSON: %s", tt.src)
			}
			if got := checkParsed(t, r, []byte(tt.src), tt.secrets); got != tt.taken {
				t.Errorf("taken = %v, want %v", got, tt.taken)
			}
		})
	}
}

// TestAppendParsedStreams: a Stream gives the same bytes by AppendParsed
// and AppendEvent on every saved trace and the recorded follow stream,
// as recorded and with a credential in every request.
func TestAppendParsedStreams(t *testing.T) {
	r := New(Options{Key: testKey})
	evs, hs := followEvents(t)
	streams := map[string][][]byte{"recorded": evs, "credentialed": credentialed(evs, hs)}
	files, _ := filepath.Glob("../sse/testdata/agentgateway/*.jsonl")
	more, _ := filepath.Glob("../../traces/*.jsonl")
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			if json.Valid(l) {
				streams[f] = append(streams[f], l)
			}
		}
	}
	for name, evs := range streams {
		a, b, c := NewStream(r), NewStream(r), NewStream(r)
		for i, e := range evs {
			h, err := trace.ParseHeader(e)
			if err != nil {
				t.Fatalf("%s event %d: %v", name, i+1, err)
			}
			want, wantChanged := a.AppendEvent(nil, e, h)
			got, changed := b.AppendParsed(nil, e, h)
			if !bytes.Equal(got, want) || changed != wantChanged {
				t.Fatalf("%s event %d:\n AppendParsed %s\n AppendEvent  %s", name, i+1, got, want)
			}
			if got, changed := c.Parsed(e, h); !bytes.Equal(got, want) || changed != wantChanged || !changed && &got[0] != &e[0] {
				t.Fatalf("%s event %d:\n Parsed      %s\n AppendEvent %s", name, i+1, got, want)
			}
		}
		if a.Redacted != b.Redacted || len(a.open) != len(b.open) {
			t.Errorf("%s: redacted %d and %d, open %d and %d", name, a.Redacted, b.Redacted, len(a.open), len(b.open))
		}
		if name == "credentialed" && b.Redacted == 0 {
			t.Errorf("%s: nothing redacted", name)
		}
	}
}

// FuzzAppendParsed: on any JSON, appendParsed gives AppendEvent's bytes
// and secrets, or declines.
func FuzzAppendParsed(f *testing.F) {
	f.Add(`{"message":{"requestState":{"request":{"headers":{"authorization":"Bearer sk-secret-123"}}},"reason":"sk-secret-123"}}`, "sk-secret-123", "abc")
	f.Add(`{"headers":{"cookie":["a=b; c=d",["x"],{"y":"z"}],"set-cookie":"id=1; Expires=Wed, 21 Oct 2015 07:28:00 GMT"}}`, "d", "")
	f.Add(`[{"headers":{"x-api-key":"abc"}},"abc",{"abc":null}]`, "", "")
	f.Add(`{"x":"headers","headers":"x","y":{"headers":{}}}`, "x", "y")
	f.Add(`{"uri":"/x?a=1&key=v&token=<x>","p":"/x?api_key=abcdefghij"}`, "abcdefghij", "")
	f.Add(`{"effectivePolicy":{"apiKey":{"keys":[{"key":"sk-1"}]},"basicAuth":null,"m":{"set":[["authorization","Bearer t"]]}},"k":"sk-1"}`, "", "")
	r := New(Options{Key: testKey, Extra: []string{"x-tenant-token"}})
	f.Fuzz(func(t *testing.T, src, secret1, secret2 string) {
		if json.Valid([]byte(src)) {
			checkParsed(t, r, []byte(src), nil)
			checkParsed(t, r, []byte(src), []string{secret1, secret2})
		}
		// The secrets planted as headers and in other strings.
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		planted := map[string]any{"message": map[string]any{
			"headers": map[string]any{"authorization": secret1, "cookie": []string{secret2, "k=" + secret1}},
			"reason":  "before " + secret1 + " after", "bucket": secret2, "raw": json.RawMessage(orNull(src)),
			"uri": "/x?key=" + secret1 + "&a=b&access_token=" + secret2,
			"effectivePolicy": map[string]any{"apiKey": map[string]any{"keys": []any{map[string]any{"key": secret2}}},
				"requestHeaderModifier": map[string]any{"set": map[string]any{"authorization": secret1}}, "x": json.RawMessage(orNull(src))},
		}}
		if enc.Encode(planted) == nil {
			checkParsed(t, r, bytes.TrimSpace(b.Bytes()), nil)
		}
		// As json.Marshal writes it (refproxy's events: <, > and &
		// escaped), and once redacted.
		if m, err := json.Marshal(planted); err == nil {
			checkParsed(t, r, m, []string{secret2})
			out, _ := r.AppendEvent(nil, m, &Secrets{})
			var v any
			if json.Unmarshal(out, &v) == nil {
				again, _ := json.Marshal(v) // the markers escaped, as refproxy sends them
				checkParsed(t, r, again, nil)
			}
		}
	})
}
