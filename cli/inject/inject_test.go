package inject

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantURL  string
		wantArgs []string
		wantErr  string
	}{
		{"url only", []string{"http://example.com/get"}, "http://example.com/get", []string{}, ""},
		{"url after options", []string{"-X", "POST", "https://h:8443/p", "-d", "x"}, "https://h:8443/p", []string{"-X", "POST", "-d", "x"}, ""},
		{"url-looking header value is not the url", []string{"-H", "http://not-url", "http://real/"}, "http://real/", []string{"-H", "http://not-url"}, ""},
		{"no url", []string{"-X", "GET", "example.com"}, "", nil, "request args after -- must include at least one http:// or https:// URL"},
		{"empty", nil, "", nil, "request args after -- must include at least one http:// or https:// URL"},
		{"url without host", []string{"http:///x"}, "", nil, `invalid request URL "http:///x": want http://host[:port]/path`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseArgs(tt.args)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error:\ngot  %v\nwant %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.URL.String() != tt.wantURL || strings.Join(r.Args, "|") != strings.Join(tt.wantArgs, "|") {
				t.Errorf("got url %q args %q, want %q %q", r.URL, r.Args, tt.wantURL, tt.wantArgs)
			}
		})
	}
}

func TestCurlCommand(t *testing.T) {
	tests := []struct {
		name string
		url  string
		args []string
		want string
	}{
		{"default port", "http://example.com/get", []string{"-H", "a: b"},
			"curl --silent --show-error --output /dev/null -H a: b http://example.com/get --connect-to example.com:80:127.0.0.1:3000"},
		{"https default port", "https://example.com/", nil,
			"curl --silent --show-error --output /dev/null https://example.com/ --connect-to example.com:443:127.0.0.1:3000"},
		{"explicit port", "http://h.local:8080/x?y=1", []string{"-X", "PUT"},
			"curl --silent --show-error --output /dev/null -X PUT http://h.local:8080/x?y=1 --connect-to h.local:8080:127.0.0.1:3000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseArgs(append(append([]string(nil), tt.args...), tt.url))
			if err != nil {
				t.Fatal(err)
			}
			argv, err := curl{Path: "curl"}.Command(r, "127.0.0.1:3000")
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(argv, " "); got != tt.want {
				t.Errorf("command:\ngot  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// seen is what the listener received.
type seen struct {
	method, host, path, body string
	header                   http.Header
}

// listener stands in for a proxy listener on 127.0.0.1 and records requests.
func listener(t *testing.T) (*httptest.Server, <-chan seen) {
	t.Helper()
	ch := make(chan seen, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- seen{r.Method, r.Host, r.URL.RequestURI(), string(b), r.Header.Clone()}
		w.WriteHeader(http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	return srv, ch
}

func TestSend(t *testing.T) {
	senders := map[string]Sender{"builtin": Builtin{}}
	if p, err := exec.LookPath("curl"); err == nil {
		senders["curl"] = curl{Path: p}
	} else {
		t.Log("curl not on PATH: testing the built-in client only")
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:secret"))
	tests := []struct {
		name       string
		args       []string
		wantMethod string
		wantBody   string
		wantHeader map[string]string
	}{
		{"plain GET", []string{"http://never-resolved.invalid:8080/get?x=1"}, "GET", "", nil},
		{"method header body", []string{"-X", "PUT", "-H", "x-test: one", "-d", "a=b", "http://never-resolved.invalid:8080/put"}, "PUT", "a=b",
			map[string]string{"X-Test": "one", "Content-Type": "application/x-www-form-urlencoded"}},
		{"data implies POST, joined with &", []string{"--data", "a=1", "--data-raw", "@b", "http://never-resolved.invalid:8080/post"}, "POST", "a=1&@b", nil},
		{"json", []string{"--json", `{"k":1}`, "http://never-resolved.invalid:8080/post"}, "POST", `{"k":1}`,
			map[string]string{"Content-Type": "application/json", "Accept": "application/json"}},
		{"user and agent", []string{"-u", "alice:secret", "-A", "agent/1", "http://never-resolved.invalid:8080/"}, "GET", "",
			map[string]string{"Authorization": basic, "User-Agent": "agent/1"}},
		{"inline forms", []string{"-XDELETE", "-Hx-a: b", "http://never-resolved.invalid:8080/"}, "DELETE", "",
			map[string]string{"X-A": "b"}},
	}
	for sname, sender := range senders {
		for _, tt := range tests {
			t.Run(sname+"/"+tt.name, func(t *testing.T) {
				srv, ch := listener(t)
				r, err := ParseArgs(tt.args)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := sender.Send(context.Background(), r, srv.Listener.Addr().String()); err != nil {
					t.Fatalf("Send: %v", err)
				}
				got := <-ch
				if got.method != tt.wantMethod || got.body != tt.wantBody {
					t.Errorf("got %s body %q, want %s body %q", got.method, got.body, tt.wantMethod, tt.wantBody)
				}
				if got.host != "never-resolved.invalid:8080" {
					t.Errorf("Host = %q, want never-resolved.invalid:8080 (the URL's host, not the listener)", got.host)
				}
				if want := r.URL.RequestURI(); got.path != want {
					t.Errorf("path = %q, want %q", got.path, want)
				}
				for k, v := range tt.wantHeader {
					if got.header.Get(k) != v {
						t.Errorf("header %s = %q, want %q", k, got.header.Get(k), v)
					}
				}
			})
		}
	}
}

func TestBuiltinRefusesUnknownOptions(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"verbose", []string{"-v", "http://h/"}, "curl is not installed and the built-in client does not support option -v (it supports -X, -H, -d/--data/--data-raw/--data-binary, --json, -u, -A); install curl to use it"},
		{"long option", []string{"--compressed", "http://h/"}, "does not support option --compressed"},
		{"missing value", []string{"http://h/", "-H"}, "curl option -H needs a value"},
		{"bad header", []string{"-H", "nocolon", "http://h/"}, `invalid header "nocolon": want 'Name: value'`},
		{"bad header, its value not quoted", []string{"-H", "Authorization Bearer sk-not-shown", "http://h/"}, `invalid header "Authorization ...": want 'Name: value'`},
		{"second url", []string{"http://h/", "http://g/"}, `takes one URL; unexpected argument "http://g/"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseArgs(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Builtin{}.Send(context.Background(), r, "127.0.0.1:1")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error:\ngot  %v\nwant one containing %s", err, tt.want)
			}
		})
	}
}

func TestCurlFailureIsReported(t *testing.T) {
	p, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not on PATH")
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.Listener.Addr().String()
	srv.Close()
	r, _ := ParseArgs([]string{"http://h/"})
	_, err = curl{Path: p}.Send(context.Background(), r, addr)
	if err == nil || !strings.Contains(err.Error(), "sending the request with curl failed") || !strings.Contains(err.Error(), "curl: (7)") {
		t.Fatalf("error = %v, want curl's connection failure", err)
	}
}

// TestCredentials: the headers and secrets a request's arguments send,
// as curl sends them, so that gwdiag can keep them out of what it prints.
func TestCredentials(t *testing.T) {
	r, err := ParseArgs([]string{"-X", "POST", "-H", "Authorization: Bearer sk-1", "-Hx-api-key:k2", "-u", "user:pw-3",
		"--cookie", "sid=c4", "-b", "cookies.txt", "--oauth2-bearer", "t5", "--proxy-user", "p:pw-6", "-d", "a=b", "http://ui:pw-7@h/"})
	if err != nil {
		t.Fatal(err)
	}
	headers, secrets := r.Credentials()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	want := []header{{"Authorization", "Basic " + b64("ui:pw-7")}, {"Authorization", "Bearer sk-1"}, {"x-api-key", "k2"},
		{"Authorization", "Basic " + b64("user:pw-3")}, {"Cookie", "sid=c4"}, {"Authorization", "Bearer t5"}, {"Proxy-Authorization", "Basic " + b64("p:pw-6")}}
	if !slices.Equal(headers, want) {
		t.Errorf("headers\n got  %q\n want %q", headers, want)
	}
	if wantS := []string{"ui:pw-7", "pw-7", "user:pw-3", "pw-3", "p:pw-6", "pw-6"}; !slices.Equal(secrets, wantS) {
		t.Errorf("secrets %q, want %q", secrets, wantS)
	}
}
