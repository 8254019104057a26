package redact

import (
	"strings"
	"testing"
)

func TestAppendText(t *testing.T) {
	r := New(Options{Key: testKey, Extra: []string{"x-tenant-token"}})
	for _, tt := range []struct{ name, in, want string }{
		{"curl -v", "* Connected\r\n> GET / HTTP/1.1\r\n> Authorization: Bearer sk-secret-123\r\n> Cookie: a=b; c=dd\r\n< HTTP/1.1 200 OK\r\n< set-cookie: id=abc; Path=/; HttpOnly\r\n",
			"* Connected\r\n> GET / HTTP/1.1\r\n> Authorization: Bearer " + fp("sk-secret-123") + "\r\n> Cookie: a=" + fp("b") + "; c=" + fp("dd") + "\r\n< HTTP/1.1 200 OK\r\n< set-cookie: id=" + fp("abc") + "; Path=/; HttpOnly\r\n"},
		{"a command line", `curl -H 'Authorization: Bearer sk-secret-123' -H "x-api-key: k-1" http://x/`,
			`curl -H 'Authorization: Bearer ` + fp("sk-secret-123") + `' -H "x-api-key: ` + fp("k-1") + `" http://x/`},
		{"YAML", "request:\n  headers:\n    authorization: Basic dXNlcjpwYXNz\n    accept: '*/*'\n    x-tenant-token: 't0k'\n",
			"request:\n  headers:\n    authorization: Basic " + fp("dXNlcjpwYXNz") + "\n    accept: '*/*'\n    x-tenant-token: '" + fp("t0k") + "'\n"},
		{"JSON a line at a time", "{\n  \"headers\": {\n    \"cookie\": \"a=one-cookie\",\n    \"Proxy-Authorization\": \"Basic cHJveHk6cHc=\"\n  },\n  \"authorization\": {\"rules\": []},\n  \"x-api-key\": null\n}",
			"{\n  \"headers\": {\n    \"cookie\": \"a=" + fp("one-cookie") + "\",\n    \"Proxy-Authorization\": \"Basic " + fp("cHJveHk6cHc=") + "\"\n  },\n  \"authorization\": {\"rules\": []},\n  \"x-api-key\": null\n}"},
		{"the credential again, later", "x-api-key: key-of-the-run\nerror: key-of-the-run refused\n", "x-api-key: " + fp("key-of-the-run") + "\nerror: " + fp("key-of-the-run") + " refused\n"},
		{"other names, and words", "x-api-keys: v\nmy-cookie: v\nauthorization required\nthe cookie: eaten\n", "x-api-keys: v\nmy-cookie: v\nauthorization required\nthe cookie: " + fp("eaten") + "\n"},
		{"nothing", ": ready\n\ndata: {}\n", ": ready\n\ndata: {}\n"},
		{"already redacted", "Authorization: Bearer " + fp("x") + "\n", "Authorization: Bearer " + fp("x") + "\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var s Secrets
			got, changed := r.AppendText([]byte("prefix:"), []byte(tt.in), &s)
			if string(got) != "prefix:"+tt.want {
				t.Errorf("AppendText\n in   %q\n got  %q\n want %q", tt.in, got, "prefix:"+tt.want)
			}
			if changed != (tt.in != tt.want) {
				t.Errorf("changed = %v", changed)
			}
			if again := r.Text(string(got[len("prefix:"):]), &Secrets{}); again != tt.want {
				t.Errorf("redacted twice: %q", again)
			}
		})
	}
}

// FuzzAppendText: a credential header's value never survives in a line,
// and redacting twice changes nothing.
func FuzzAppendText(f *testing.F) {
	f.Add("> Authorization: Bearer ", "sk-secret-123", "\r\n")
	f.Add(`-H 'cookie: `, "a=b", `' x`)
	f.Add(`"x-api-key": "`, "k\\\"ey", `",`)
	f.Add("> GET /x?a=1&key=", "AIzaSyPlanted", " HTTP/1.1")
	r := New(Options{Key: testKey})
	f.Fuzz(func(t *testing.T, before, secret, after string) {
		in := before + secret + after
		var s Secrets
		out := r.Text(in, &s)
		if again := r.Text(out, &Secrets{}); again != out {
			t.Fatalf("not idempotent:\n once  %q\n twice %q", out, again)
		}
		// A plain line "X-Api-Key: <secret>" never keeps the secret.
		if strings.ContainsAny(secret, "\r\n\"'") || strings.TrimSpace(secret) != secret || secret == "" || HasMarker(secret) {
			return
		}
		if got := strings.TrimPrefix(r.Text("X-Api-Key: "+secret+"\n", &Secrets{}), "X-Api-Key: "); strings.Contains(got, secret) && !strings.Contains(fp(secret)+"\n", secret) {
			t.Fatalf("secret %q left in %q", secret, got)
		}
		// Nor a URL "?key=<secret>" with a secret that is one value.
		if !strings.ContainsAny(secret, "&# \t<>") {
			if got, want := r.Text("GET /?key="+secret+" HTTP/1.1", &Secrets{}), "GET /?key="+fp(secret)+" HTTP/1.1"; got != want {
				t.Fatalf("query secret %q: got %q, want %q", secret, got, want)
			}
		}
	})
}
