package mock

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace/sse"
)

func start(t *testing.T, h http.Handler) *Server {
	t.Helper()
	s, err := Listen("127.0.0.1:0", h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func do(t *testing.T, method, url, body string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp, string(b) + "<read error: " + err.Error() + ">"
	}
	return resp, string(b)
}

func TestEcho(t *testing.T) {
	e := NewEcho()
	s := start(t, e)
	tests := []struct {
		name, method, path, body string
		wantStatus               int
		wantIn                   string
	}{
		{"headers", "GET", "/headers", "", 200, `"X-Test":"yes"`},
		{"status", "GET", "/status/418", "", 418, ""},
		{"bad status", "GET", "/status/abc", "", 400, "want an integer HTTP status code"},
		{"bad cut", "GET", "/cut/many", "", 400, "want a byte count"},
		{"delay", "GET", "/delay/10", "", 200, `"path":"/delay/10"`},
		{"anything", "POST", "/anything/x?a=1", "hello", 200, `"body":"hello"`},
		{"anything method", "PUT", "/anything", "", 200, `"method":"PUT"`},
		{"any path", "GET", "/get", "", 200, `"path":"/get"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, tt.method, s.URL()+tt.path, tt.body, map[string]string{"X-Test": "yes"})
			if resp.StatusCode != tt.wantStatus || !strings.Contains(body, tt.wantIn) {
				t.Errorf("got %d %q, want %d containing %q", resp.StatusCode, body, tt.wantStatus, tt.wantIn)
			}
		})
	}
	if got, want := e.Count(), int64(len(tests)); got != want {
		t.Errorf("Count() = %d, want %d", got, want)
	}
	_, body := do(t, "GET", s.URL()+"/__count", "", nil)
	if want := fmt.Sprintf(`{"count":%d}`, len(tests)); strings.TrimSpace(body) != want {
		t.Errorf("GET /__count = %q, want %q", body, want)
	}
	if resp, _ := do(t, "POST", s.URL()+"/__reset", "", nil); resp.StatusCode != 204 {
		t.Errorf("POST /__reset = %d, want 204", resp.StatusCode)
	}
	if got := e.Count(); got != 0 {
		t.Errorf("Count() after reset = %d, want 0 (control endpoints are not counted)", got)
	}
}

// completion is the part of a non-streaming response the tests check.
type completion struct {
	Choices []struct {
		Message struct{ Content string } `json:"message"`
	} `json:"choices"`
	Usage json.RawMessage `json:"usage"`
}

func TestLLMComplete(t *testing.T) {
	l := NewLLM()
	s := start(t, l)
	tests := []struct {
		name       string
		hdr        map[string]string
		wantStatus int
		wantUsage  string // raw JSON of usage; "" when absent; "!" when the body must not parse
	}{
		{"defaults", nil, 200, `{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}`},
		{"set usage", map[string]string{HeaderPromptTokens: "30", HeaderCompletionTokens: "9"}, 200, `{"prompt_tokens":30,"completion_tokens":9,"total_tokens":39}`},
		{"missing", map[string]string{HeaderUsage: UsageMissing}, 200, ``},
		{"malformed", map[string]string{HeaderUsage: UsageMalformed}, 200, `"lots"`},
		{"garbage", map[string]string{HeaderUsage: UsageGarbage}, 200, "!"},
		{"truncated", map[string]string{HeaderUsage: UsageTruncated}, 200, "!"},
		{"status", map[string]string{headerStatus: "503"}, 503, ``},
		{"bad header", map[string]string{HeaderChunks: "0"}, 400, ``},
		{"bad usage mode", map[string]string{HeaderUsage: "weird"}, 400, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, "POST", s.URL()+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, tt.hdr)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d (%s), want %d", resp.StatusCode, body, tt.wantStatus)
			}
			if tt.wantStatus != 200 {
				return
			}
			var c completion
			err := json.Unmarshal([]byte(body), &c)
			if tt.wantUsage == "!" {
				if err == nil {
					t.Errorf("body %q parses, want a broken body", body)
				}
				return
			}
			if err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if string(c.Usage) != tt.wantUsage {
				t.Errorf("usage = %s, want %s", c.Usage, tt.wantUsage)
			}
		})
	}
}

func TestLLMGzipWhenAccepted(t *testing.T) {
	s := start(t, NewLLM())
	for _, accept := range []bool{false, true} {
		req, _ := http.NewRequest("POST", s.URL()+"/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
		if accept {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		gz := len(b) > 2 && b[0] == 0x1f && b[1] == 0x8b
		if ce := resp.Header.Get("Content-Encoding"); (ce == "gzip") != accept || gz != accept {
			t.Errorf("Accept-Encoding gzip %v: Content-Encoding %q, gzip body %v; want both %v", accept, ce, gz, accept)
		}
	}
}

func TestLLMAbortDropsConnection(t *testing.T) {
	s := start(t, NewLLM())
	req, _ := http.NewRequest("POST", s.URL()+"/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
	req.Header.Set(HeaderUsage, usageAbort)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("reading an aborted body succeeded, want an error")
	}
}

// sseData returns the data payloads of an SSE body, in order.
func sseData(body string) []string {
	var out []string
	_ = sse.EachData(strings.NewReader(body), sse.Limits{}, func(d string) { out = append(out, d) })
	return out
}

func TestLLMStream(t *testing.T) {
	s := start(t, NewLLM())
	const streamUsage = `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`
	tests := []struct {
		name      string
		body      string
		hdr       map[string]string
		wantN     int    // data frames
		wantLast  string // substring of the last data frame
		wantUsage string // substring of the usage frame, "" when none
	}{
		{"usage requested", streamUsage, map[string]string{HeaderChunks: "4", HeaderPromptTokens: "1", HeaderCompletionTokens: "8"}, 4 + 1 + 1 + 1, "[DONE]", `"usage":{"prompt_tokens":1,"completion_tokens":8,"total_tokens":9}`},
		{"usage not requested", `{"model":"m","stream":true}`, nil, 3 + 1 + 1, "[DONE]", ""},
		{"missing", streamUsage, map[string]string{HeaderUsage: UsageMissing}, 3 + 1 + 1, "[DONE]", ""},
		{"malformed", streamUsage, map[string]string{HeaderUsage: UsageMalformed}, 3 + 1 + 1 + 1, "[DONE]", `"usage":"lots"`},
		{"truncated", streamUsage, map[string]string{HeaderUsage: UsageTruncated}, 3 + 1 + 1, `"usage":{"prompt_tok`, `"usage":{"prompt_tok`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, "POST", s.URL()+"/v1/chat/completions", tt.body, tt.hdr)
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("Content-Type = %q, want text/event-stream", ct)
			}
			frames := sseData(body)
			if len(frames) != tt.wantN || !strings.Contains(frames[len(frames)-1], tt.wantLast) {
				t.Fatalf("got %d frames ending %q, want %d ending with %q:\n%s", len(frames), frames[len(frames)-1], tt.wantN, tt.wantLast, body)
			}
			usage := ""
			for _, f := range frames {
				if strings.Contains(f, `"usage"`) {
					usage = f
				}
			}
			if (tt.wantUsage == "") != (usage == "") || !strings.Contains(usage, tt.wantUsage) {
				t.Errorf("usage frame = %q, want one containing %q", usage, tt.wantUsage)
			}
		})
	}
}

func TestLLMHold(t *testing.T) {
	l := NewLLM()
	s := start(t, l)
	req, _ := http.NewRequest("POST", s.URL()+"/v1/chat/completions", strings.NewReader(`{"model":"m","stream":true}`))
	req.Header.Set(HeaderHold, "k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil || !strings.Contains(first, `"role":"assistant"`) {
		t.Fatalf("first line = %q, %v; want the first chunk", first, err)
	}
	done := make(chan string)
	go func() {
		rest, _ := io.ReadAll(br)
		done <- string(rest)
	}()
	select {
	case rest := <-done:
		t.Fatalf("stream finished while held: %q", rest)
	case <-time.After(50 * time.Millisecond): // a held stream must not progress; this only bounds the check
	}
	l.Release("k")
	if rest := <-done; !strings.HasSuffix(rest, "data: [DONE]\n\n") {
		t.Errorf("rest after release = %q, want it to end with [DONE]", rest)
	}
}

// TestEchoCut: /cut/{sent} announces cutLength bytes, sends {sent} and
// closes: the client reads a 200 head, then an unexpected EOF.
func TestEchoCut(t *testing.T) {
	s, err := Listen("127.0.0.1:0", NewEcho())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Get("http://" + s.Addr() + "/cut/1000")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.ContentLength != cutLength || len(body) != 1000 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("got %d, length %d, %d bytes, %v; want 200, %d, 1000 bytes, unexpected EOF", resp.StatusCode, resp.ContentLength, len(body), err, cutLength)
	}
}

// TestSetCookieAndAuthorizationSeen: both backends set the cookies asked
// for; the LLM tells the Authorization it got by its hash alone.
func TestSetCookieAndAuthorizationSeen(t *testing.T) {
	for name, h := range map[string]http.Handler{"echo": NewEcho(), "llm": NewLLM()} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[]}`))
			req.Header.Add(HeaderSetCookie, "a")
			req.Header.Add(HeaderSetCookie, "b")
			req.Header.Set("Authorization", "Bearer k")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			cookie := regexp.MustCompile(`^[ab]=[0-9a-f]{24}; Path=/; HttpOnly$`)
			if got := resp.Header.Values("Set-Cookie"); len(got) != 2 || !cookie.MatchString(got[0]) || !strings.HasPrefix(got[0], "a=") ||
				!cookie.MatchString(got[1]) || !strings.HasPrefix(got[1], "b=") || got[0][2:] == got[1][2:] {
				t.Errorf("Set-Cookie: got %q, want a and b with random values", got)
			}
			want := ""
			if name == "llm" {
				want = AuthorizationSHA256("Bearer k")
			}
			if got := resp.Header.Get(HeaderAuthorizationSHA256); got != want || strings.Contains(got, "Bearer") {
				t.Errorf("%s: got %q, want %q", HeaderAuthorizationSHA256, got, want)
			}
		})
	}
}
