package redact

import (
	"bytes"
	"encoding/json"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/golden/trace"
)

// testKey makes fingerprints the same from run to run, so that tests can
// name them.
var testKey = []byte("gwdiag redact test key")

// fp is the marker of secret under testKey.
func fp(secret string) string { return New(Options{Key: testKey}).MarkerOf(secret) }

var markerRE = regexp.MustCompile(`<redacted:[0-9a-f]{12}>`)

func TestAppendValue(t *testing.T) {
	r := New(Options{Key: testKey})
	for _, tt := range []struct {
		name, header, value, want string
	}{
		{"bearer keeps its scheme", "Authorization", "Bearer sk-secret-123", "Bearer " + fp("sk-secret-123")},
		{"basic keeps its scheme", "authorization", "Basic dXNlcjpwYXNz", "Basic " + fp("dXNlcjpwYXNz")},
		{"no scheme: all of it", "authorization", "sk-secret-123", fp("sk-secret-123")},
		{"a scheme alone is no credential", "authorization", "Bearer", fp("Bearer")},
		{"proxy-authorization", "proxy-authorization", "Basic cHJveHk6cHc=", "Basic " + fp("cHJveHk6cHc=")},
		{"digest: its params are one credential", "authorization", `Digest username="u", realm="r", response="abc"`,
			"Digest " + fp(`username="u", realm="r", response="abc"`)},
		{"sigv4: one credential", "authorization", "AWS4-HMAC-SHA256 Credential=AKIA/20260101/us-east-1/bedrock/aws4_request, SignedHeaders=host, Signature=abcd",
			"AWS4-HMAC-SHA256 " + fp("Credential=AKIA/20260101/us-east-1/bedrock/aws4_request, SignedHeaders=host, Signature=abcd")},
		{"two joined by a proxy", "authorization", "Bearer one-secret, Basic two-secret", "Bearer " + fp("one-secret") + ", Basic " + fp("two-secret")},
		{"api key: all of it", "x-api-key", "abc", fp("abc")},
		{"cookies keep their names", "Cookie", "session=s3cr3t-session; theme=dark", "session=" + fp("s3cr3t-session") + "; theme=" + fp("dark")},
		{"a cookie without a name", "cookie", "justavalue", fp("justavalue")},
		{"set-cookie keeps its attributes", "Set-Cookie", "id=a3fWa; Expires=Wed, 21 Oct 2015 07:28:00 GMT; Path=/; Secure; HttpOnly; SameSite=Lax",
			"id=" + fp("a3fWa") + "; Expires=Wed, 21 Oct 2015 07:28:00 GMT; Path=/; Secure; HttpOnly; SameSite=Lax"},
		{"set-cookie joined by a proxy", "set-cookie", "a=one; Path=/,b=two; Max-Age=60", "a=" + fp("one") + "; Path=/,b=" + fp("two") + "; Max-Age=60"},
		{"set-cookie: a bare value is a secret", "set-cookie", "tok; Path=/", fp("tok") + "; Path=/"},
		{"already redacted: kept", "authorization", "Bearer " + fp("x"), "Bearer " + fp("x")},
		{"the reference's marker: kept", "authorization", "<redacted>", "<redacted>"},
		{"empty", "authorization", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Value(tt.header, tt.value); got != tt.want {
				t.Errorf("Value(%q, %q)\n got  %q\n want %q", tt.header, tt.value, got, tt.want)
			}
			if got := r.Value(tt.header, r.Value(tt.header, tt.value)); got != tt.want {
				t.Errorf("redacted twice: got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFingerprints(t *testing.T) {
	a, b := New(Options{}), New(Options{})
	if a.MarkerOf("k") == b.MarkerOf("k") {
		t.Error("two redactors without a key gave the same fingerprint: the key is not random")
	}
	if a.MarkerOf("k") != a.MarkerOf("k") || a.MarkerOf("k") == a.MarkerOf("l") {
		t.Error("one redactor: the same secret must give the same fingerprint, two secrets two")
	}
	for _, m := range []string{a.MarkerOf("k"), Marker} {
		if !IsMarker(m) {
			t.Errorf("IsMarker(%q) = false", m)
		}
	}
	for _, m := range []string{"<redacted:XYZ>", "<redacted:0123456789ab", "redacted", "<redacted:0123456789abc>"} {
		if IsMarker(m) {
			t.Errorf("IsMarker(%q) = true", m)
		}
	}
}

func TestSensitive(t *testing.T) {
	r := New(Options{Extra: []string{"X-Tenant-Token"}})
	for name, want := range map[string]bool{
		"authorization": true, "Authorization": true, "AUTHORIZATION": true, "x-tenant-token": true, "X-TENANT-TOKEN": true,
		"set-cookie": true, "accept": false, "x-api-keys": false, "": false,
	} {
		if got := r.Sensitive(name); got != want {
			t.Errorf("Sensitive(%q) = %v, want %v", name, got, want)
		}
	}
	off := New(Options{NoDefaults: true, Extra: []string{"x-mine"}})
	if off.Sensitive("authorization") || !off.Sensitive("X-Mine") {
		t.Errorf("NoDefaults: names %v, want only x-mine", off.Names())
	}
	if w := r.With("x-more"); !w.Sensitive("x-more") || !w.Sensitive("authorization") || w.MarkerOf("s") != r.MarkerOf("s") {
		t.Error("With: want the names added and the same key")
	}
}

func TestScrub(t *testing.T) {
	r := New(Options{Key: testKey})
	var s Secrets
	s.AddHeader("authorization", "Bearer sk-secret-123")
	s.AddHeader("x-api-key", "abc")
	for _, tt := range []struct{ in, want string }{
		{"key sk-secret-123 refused", "key " + fp("sk-secret-123") + " refused"},
		{"header authorization is \"Bearer sk-secret-123\"", "header authorization is \"Bearer " + fp("sk-secret-123") + "\""},
		{"abc", fp("abc")},
		// Too short to look for inside other text.
		{"/abc/def", "/abc/def"},
		{"nothing here", "nothing here"},
	} {
		if got, _ := r.Scrub(tt.in, &s); got != tt.want {
			t.Errorf("Scrub(%q)\n got  %q\n want %q", tt.in, got, tt.want)
		}
	}
}

func TestAppendEvent(t *testing.T) {
	r := New(Options{Key: testKey, Extra: []string{"x-tenant-token"}})
	for _, tt := range []struct {
		name, in, want string
	}{
		{
			"request snapshot",
			`{"eventStart":null,"eventEnd":3,"severity":"info","message":{"requestState":{"request":{"headers":{"accept":"*/*","authorization":"Bearer sk-secret-123","x-api-key":"abc"},"uri":"http://h/"}},"stage":"initial request","type":"requestSnapshot"}}`,
			`{"eventStart":null,"eventEnd":3,"severity":"info","message":{"requestState":{"request":{"headers":{"accept":"*/*","authorization":"Bearer ` + fp("sk-secret-123") + `","x-api-key":"` + fp("abc") + `"},"uri":"http://h/"}},"stage":"initial request","type":"requestSnapshot"}}`,
		},
		{
			"response snapshot, names in any case, pretty-printed",
			"{\n  \"message\": {\"requestState\": {\"response\": {\"code\": 200, \"headers\": {\"Set-Cookie\": \"sid=xyz; Path=/\", \"X-Tenant-Token\": \"t0k\"}}}}\n}",
			"{\n  \"message\": {\"requestState\": {\"response\": {\"code\": 200, \"headers\": {\"Set-Cookie\": \"sid=" + fp("xyz") + "; Path=/\", \"X-Tenant-Token\": \"" + fp("t0k") + "\"}}}}\n}",
		},
		{
			"a header as an array of values",
			`{"message":{"headers":{"cookie":["a=one-cookie","b=two-cookie"],"accept":["x"]}}}`,
			`{"message":{"headers":{"cookie":["a=` + fp("one-cookie") + `","b=` + fp("two-cookie") + `"],"accept":["x"]}}}`,
		},
		{
			"a credential elsewhere in the same event",
			`{"message":{"reasons":[{"got":"Bearer sk-secret-123","reason":"header authorization is \"Bearer sk-secret-123\""}],"requestState":{"request":{"headers":{"authorization":"Bearer sk-secret-123"}}}}}`,
			`{"message":{"reasons":[{"got":"Bearer ` + fp("sk-secret-123") + `","reason":"header authorization is \"Bearer ` + fp("sk-secret-123") + `\""}],"requestState":{"request":{"headers":{"authorization":"Bearer ` + fp("sk-secret-123") + `"}}}}}`,
		},
		{
			"an escaped value",
			`{"message":{"headers":{"authorization":"Bearer sk-\u0073ecret\"123"}}}`,
			`{"message":{"headers":{"authorization":"Bearer ` + fp(`sk-secret"123`) + `"}}}`,
		},
		{
			"nothing to redact: byte for byte",
			`{"eventStart":null, "eventEnd":1,"severity":"INFO","message":{"type":"requestStarted"}}`,
			`{"eventStart":null, "eventEnd":1,"severity":"INFO","message":{"type":"requestStarted"}}`,
		},
		{
			"already redacted: byte for byte",
			`{"message":{"headers":{"authorization":"<redacted>","cookie":"a=` + fp("q") + `"}}}`,
			`{"message":{"headers":{"authorization":"<redacted>","cookie":"a=` + fp("q") + `"}}}`,
		},
		{
			"not JSON (a docs page's elision): the headers still redacted",
			`{"message":{"requestState":{"request":{"headers":{"authorization":"Basic dXNlcjpwYXNz", ...}}}}`,
			`{"message":{"requestState":{"request":{"headers":{"authorization":"Basic ` + fp("dXNlcjpwYXNz") + `", ...}}}}`,
		},
		{
			"a string cut short",
			`{"message":{"headers":{"authorization":"Bearer cut-short-token`,
			`{"message":{"headers":{"authorization":"Bearer ` + fp("cut-short-token") + `"`,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var s Secrets
			got, changed := r.AppendEvent([]byte("prefix:"), []byte(tt.in), &s)
			if string(got) != "prefix:"+tt.want {
				t.Errorf("AppendEvent\n in   %s\n got  %s\n want prefix:%s", tt.in, got, tt.want)
			}
			if changed != (tt.in != tt.want) {
				t.Errorf("changed = %v, want %v", changed, tt.in != tt.want)
			}
			if json.Valid([]byte(tt.in)) && !json.Valid(got[len("prefix:"):]) {
				t.Errorf("valid JSON in, invalid out: %s", got)
			}
		})
	}
}

// TestStreamKeepsARequestsSecrets: a credential a snapshot showed is
// scrubbed from the later events of its request (a route's reason, a
// rate-limit key), and only of its request; it is forgotten at
// requestFinished.
func TestStreamKeepsARequestsSecrets(t *testing.T) {
	r := New(Options{Key: testKey})
	st := NewStream(r)
	events := []struct{ in, want string }{
		{`{"message":{"type":"requestSnapshot","requestState":{"request":{"headers":{"x-api-key":"key-of-request-a"}}}},"requestId":"a"}`,
			`{"message":{"type":"requestSnapshot","requestState":{"request":{"headers":{"x-api-key":"` + fp("key-of-request-a") + `"}}}},"requestId":"a"}`},
		{`{"message":{"type":"policy","result":{"bucket":"key-of-request-a"}},"requestId":"b"}`,
			`{"message":{"type":"policy","result":{"bucket":"key-of-request-a"}},"requestId":"b"}`},
		{`{"message":{"type":"policy","result":{"bucket":"key-of-request-a"}},"requestId":"a"}`,
			`{"message":{"type":"policy","result":{"bucket":"` + fp("key-of-request-a") + `"}},"requestId":"a"}`},
		{`{"message":{"type":"requestFinished"},"requestId":"a"}`, `{"message":{"type":"requestFinished"},"requestId":"a"}`},
		{`{"message":{"type":"policy","result":{"bucket":"key-of-request-a"}},"requestId":"a"}`,
			`{"message":{"type":"policy","result":{"bucket":"key-of-request-a"}},"requestId":"a"}`},
	}
	for i, e := range events {
		got, _ := st.Event([]byte(e.in))
		if string(got) != e.want {
			t.Errorf("event %d\n got  %s\n want %s", i, got, e.want)
		}
	}
	if st.Redacted != 2 || len(st.open) != 0 {
		t.Errorf("Redacted %d, open %d: want 2 and 0", st.Redacted, len(st.open))
	}
}

func TestStreamBounded(t *testing.T) {
	st := NewStream(New(Options{}))
	for i := range 3 * MaxOpenRequests {
		id := strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strings.Repeat("y", i/26)
		st.Event([]byte(`{"message":{"type":"requestSnapshot","requestState":{"request":{"headers":{"cookie":"a=1","authorization":"Bearer ` + id + `"}}}},"requestId":"` + id + `"}`))
	}
	if len(st.open) > MaxOpenRequests || len(st.order) != len(st.open) {
		t.Errorf("open %d, order %d: want at most %d, equal", len(st.open), len(st.order), MaxOpenRequests)
	}
}

// FuzzAppendEvent: whatever the input, redacting never panics, is
// idempotent, keeps valid JSON valid, and leaves no value of a sensitive
// header, nor anything holding it, in any string of the output.
func FuzzAppendEvent(f *testing.F) {
	f.Add(`{"message":{"requestState":{"request":{"headers":{"authorization":"Bearer sk-secret-123"}}},"reason":"sk-secret-123"}}`, "Bearer sk-secret-123")
	f.Add(`{"message":{"headers":{"cookie":["a=b; c=d"]}}}`, "x")
	f.Add(`{"a":"\u003c\"","headers":{"set-cookie":"id=1; Expires=Wed, 21 Oct 2015 07:28:00 GMT"}}`, "id=1")
	f.Add(`[[[{"headers":{"x-api-key":"`, "")
	f.Add(`{"effectivePolicy":{"apiKey":{"keys":[{"key":"sk-1"}]},"requestHeaderModifier":{"set":[["authorization","Bearer t"]]}}}`, "sk-secret-123")
	f.Add(`{"effectivePolicy":[{"backendAuth":{"key":"k"},"x":"redis://u:p@h:1","client_secret":["a","b"]}]}`, "p")
	r := New(Options{Key: testKey})
	f.Fuzz(func(t *testing.T, in, plant string) {
		ev := []byte(in)
		if plant != "" {
			// Plant the secret as a header value and elsewhere.
			if b, err := json.Marshal(map[string]any{"message": map[string]any{
				"headers": map[string]any{"x-api-key": plant}, "other": "before " + plant + " after", "raw": json.RawMessage(orNull(in)),
				"effectivePolicy": map[string]any{
					// a proxy that shows its config's credentials
					"apiKey":                map[string]any{"keys": []any{map[string]any{"key": plant}}},
					"backendAuth":           map[string]any{"key": plant},
					"basicAuth":             map[string]any{"htpasswd": plant},
					"requestHeaderModifier": map[string]any{"set": [][]string{{"authorization", plant}}, "add": map[string]any{"x-api-key": plant}},
					"other":                 json.RawMessage(orNull(in)),
				},
			}}); err == nil {
				ev = b
			}
		}
		var s Secrets
		out, _ := r.AppendEvent(nil, ev, &s)
		var s2 Secrets
		again, changed := r.AppendEvent(nil, out, &s2)
		if changed || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent:\n once  %s\n twice %s", out, again)
		}
		if json.Valid(ev) && !json.Valid(out) {
			t.Fatalf("valid in, invalid out:\n in  %s\n out %s", ev, out)
		}
		if plant == "" || !json.Valid(out) || IsMarker(plant) || HasMarker(plant) {
			return
		}
		walk(out, false, func(tk token) {
			v := tk.text(out)
			if v == plant || len(plant) >= MinSubstring && strings.Contains(markerRE.ReplaceAllString(v, "\x00"), plant) {
				t.Fatalf("secret %q left in %q of %s", plant, v, out)
			}
		})
	})
}

func orNull(s string) string {
	if json.Valid([]byte(s)) {
		return s
	}
	return "null"
}

// TestDefaultsDocumented: every default header has its reason.
func TestDefaultsDocumented(t *testing.T) {
	for _, h := range Defaults {
		if h.Name != strings.ToLower(h.Name) || h.Why == "" {
			t.Errorf("%+v: want a lower-case name and a reason", h)
		}
	}
	_ = trace.RequestFinished
}

func TestCollectEvent(t *testing.T) {
	r := New(Options{Key: testKey})
	var s Secrets
	ev := []byte(`{"message":{"requestState":{"request":{"headers":{"authorization":"Bearer sk-collected-1","cookie":"a=cookie-value-2","accept":"*/*"}}}}}`)
	r.CollectEvent(ev, &s)
	got := strings.Join(s.Values(), " ")
	for _, want := range []string{"sk-collected-1", "Bearer sk-collected-1", "cookie-value-2"} {
		if !strings.Contains(" "+got+" ", " "+want+" ") {
			t.Errorf("collected %q, want %q among them", got, want)
		}
	}
	if strings.Contains(got, "*/*") {
		t.Errorf("collected %q: accept is no credential", got)
	}
}

// TestEscapeHTMLWritesAsMarshal: with EscapeHTML, an event written by
// json.Marshal stays json.Marshal's bytes once scrubbed (the strings a
// scrub changes escaped as json.Marshal escapes them: <, > and &, \b, \f,
// control bytes, U+2028), so that a proxy holding its frames to
// json.Marshal can scrub them; without it, a marker reads as it is.
func TestEscapeHTMLWritesAsMarshal(t *testing.T) {
	const secret = "sk-<secret>&-0123"
	ev := map[string]any{"message": map[string]any{
		"reason":  "key " + secret + " refused <here> \b\f\x01\u2028 & \"q\"",
		"headers": map[string]any{"authorization": "Bearer " + secret, "accept": "<a&b>"},
		"other":   []any{"<untouched>", secret},
	}}
	in, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	r := New(Options{Key: testKey, EscapeHTML: true})
	var s Secrets
	got, changed := r.AppendEvent(nil, in, &s)
	if !changed {
		t.Fatalf("nothing scrubbed in %s", in)
	}
	var back any
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("%v: %s", err, got)
	}
	want, _ := json.Marshal(back)
	if string(got) != string(want) {
		t.Errorf("scrubbed with EscapeHTML\n got  %s\n json.Marshal writes\n      %s", got, want)
	}
	if strings.Contains(string(got), secret) || strings.Contains(string(got), "sk-\\u003csecret") {
		t.Errorf("secret left in %s", got)
	}
	plain, _ := New(Options{Key: testKey}).AppendEvent(nil, in, &Secrets{})
	if !strings.Contains(string(plain), `"<redacted:`) {
		t.Errorf("without EscapeHTML a marker reads as it is: %s", plain)
	}
}

// TestMarkerAllocatesNothing: a fingerprint costs no allocation (a proxy
// makes one per credential of every traced request).
func TestMarkerAllocatesNothing(t *testing.T) {
	r := New(Options{Key: testKey})
	b := make([]byte, 0, 64)
	secret := strings.Repeat("sk-secret-", 10)
	r.AppendMarker(b, secret)
	if n := testing.AllocsPerRun(100, func() { b = r.AppendMarker(b[:0], secret) }); n != 0 && !raceEnabled {
		t.Errorf("AppendMarker: %v allocations, want 0", n)
	}
	if string(b) != fp(secret) {
		t.Errorf("marker %s, want %s", b, fp(secret))
	}
}

// TestFingerprintsRemembered: a fingerprint remembered is the one an HMAC
// makes, for Redactors With makes too, and the memory is bounded.
func TestFingerprintsRemembered(t *testing.T) {
	r := New(Options{Key: testKey})
	w := r.With("x-more")
	for i := range maxFingerprints + 100 {
		s := "secret-" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strings.Repeat("y", i/26)
		first, again, with := r.MarkerOf(s), r.MarkerOf(s), w.MarkerOf(s)
		if i%97 == 0 && first != fp(s) || again != first || with != first {
			t.Fatalf("%q: %s, again %s, With's %s; the HMAC makes %s", s, first, again, with, fp(s))
		}
	}
	if n := len(r.made.m); n > maxFingerprints {
		t.Errorf("%d fingerprints remembered, want at most %d", n, maxFingerprints)
	}
}

// TestCredentialsOfBasic: a Basic credential's user:password and password,
// decoded, are secrets too: a basicAuth policy may quote them.
func TestCredentialsOfBasic(t *testing.T) {
	for _, tt := range []struct {
		name, value string
		want        []string
	}{
		{"authorization", "Basic YWxpY2U6cHctMTIz", []string{"YWxpY2U6cHctMTIz", "alice:pw-123", "pw-123", "Basic YWxpY2U6cHctMTIz"}},
		{"Proxy-Authorization", "basic YWxpY2U6cHctMTIz", []string{"YWxpY2U6cHctMTIz", "alice:pw-123", "pw-123", "basic YWxpY2U6cHctMTIz"}},
		{"authorization", "Bearer YWxpY2U6cHctMTIz", []string{"YWxpY2U6cHctMTIz", "Bearer YWxpY2U6cHctMTIz"}},
		{"authorization", "Basic not-base64!", []string{"not-base64!", "Basic not-base64!"}},
		{"x-api-key", "YWxpY2U6cHctMTIz", []string{"YWxpY2U6cHctMTIz"}},
	} {
		var got []string
		Credentials(tt.name, tt.value, func(s string) { got = append(got, s) })
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("Credentials(%q, %q) = %q, want %q", tt.name, tt.value, got, tt.want)
		}
	}
}

// TestShortCookiesAreNoSecrets: a short cookie value is redacted in its
// header, and is no secret elsewhere (it would hide every equal string).
func TestShortCookiesAreNoSecrets(t *testing.T) {
	var got []string
	Credentials("Cookie", "theme=dark; a=1; session=s3ss10n-value", func(s string) { got = append(got, s) })
	if strings.Join(got, "|") != "s3ss10n-value|theme=dark; a=1; session=s3ss10n-value" {
		t.Errorf("Credentials of a cookie: %q, want the long value and the whole header only", got)
	}
	r := New(Options{Key: testKey})
	if v := r.Value("cookie", "a=1"); v != "a="+fp("1") {
		t.Errorf("Value: %q, want the short value redacted in its header", v)
	}
	var s Secrets
	out, _ := r.AppendEvent(nil, []byte(`{"message":{"headers":{"cookie":"a=1","x-count":"1"}}}`), &s)
	if !strings.Contains(string(out), `"x-count":"1"`) {
		t.Errorf("%s: a short cookie value hid another header's value", out)
	}
}

// TestDeepNestingCostsNoMemory: a hostile event nested a million deep is
// walked in bounded memory, and still scrubbed of a request's secrets.
func TestDeepNestingCostsNoMemory(t *testing.T) {
	deep := []byte(`{"a":` + strings.Repeat("[", 1e6) + `"key sk-secret-0123456789"` + strings.Repeat("]", 1e6) + `}`)
	r := New(Options{Key: testKey})
	var s Secrets
	s.Add("sk-secret-0123456789")
	var out []byte
	allocated := testing.AllocsPerRun(1, func() { out, _ = r.AppendEvent(out[:0], deep, &s) })
	if bytes.Contains(out, []byte("sk-secret-0123456789")) {
		t.Error("the secret was left in a deeply nested string")
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	before := m.TotalAlloc
	r.CollectEvent(deep, &s)
	runtime.ReadMemStats(&m)
	if grew := m.TotalAlloc - before; grew > 1<<20 {
		t.Errorf("walking a million levels allocated %d bytes (%v allocations a scrub), want under 1 MiB", grew, allocated)
	}
}

// TestUnfingerprint: fingerprinted markers become the bare marker; what
// only looks like one (a prefix, other digits, cut short) stays.
func TestUnfingerprint(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":"Bearer <redacted:0123456789ab>","b":"<redacted:ffffffffffff>"}`: `{"a":"Bearer <redacted>","b":"<redacted>"}`,
		`<redacted> <redacted:xyz> <redacted:0123456789ABCDEF> <redacted:0123`: `<redacted> <redacted:xyz> <redacted:0123456789ABCDEF> <redacted:0123`,
		`no marker`: `no marker`,
	} {
		if got := string(Unfingerprint([]byte(in))); got != want {
			t.Errorf("Unfingerprint(%q) = %q, want %q", in, got, want)
		}
	}
}
