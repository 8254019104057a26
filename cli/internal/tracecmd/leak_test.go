package tracecmd

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// Credentials planted in requests, each with a stem found nowhere else:
// a test searches every byte gwdiag wrote for the stems.
const (
	plantBearer     = "sk-live-7f3a9c1e2b4d"     // Authorization: Bearer
	plantCookie     = "ck-91ab27ef5d06"          // Cookie: session=
	plantAPIKey     = "xk-5c8e0d13aa72"          // X-Api-Key, and again in a policy's reason
	plantProxyAuth  = "pa-b8d3e0f41c29"          // Proxy-Authorization: Basic
	plantBackendSid = "backend-sid-44d2c7f0e9a1" // the backend's Set-Cookie
	plantUser       = "alice"
	plantPassword   = "pw-0d5e3f7a81bc" // -u alice:pw-...
	// The config's own, in the route's effectivePolicy: another client's
	// key of the apiKey policy, the key a header modifier sends the
	// backend, a basicAuth htpasswd.
	plantClientKey = "ck2-3e9b71d0a4f6"
	plantUpstream  = "sk-up-a61c0e93d7b2"
	plantHtpasswd  = "htpw-58d2f1e7c03a"
)

// plantedStems are the planted credentials as they may show: each whole,
// and the Basic credential of -u as curl and the built-in client send it.
func plantedStems() []string {
	return []string{plantBearer, plantCookie, plantAPIKey, plantProxyAuth, plantBackendSid, plantPassword,
		base64.StdEncoding.EncodeToString([]byte(plantUser + ":" + plantPassword)),
		plantClientKey, plantUpstream, plantHtpasswd}
}

// leaks are the planted credentials found in out, also base64-encoded as
// an OSC 52 copy to the clipboard carries them.
func leaks(out string) []string {
	hay := out + "\n" + decodeOSC52(out)
	var found []string
	for _, s := range plantedStems() {
		if strings.Contains(hay, s) {
			found = append(found, s)
		}
	}
	return found
}

var osc52 = regexp.MustCompile("\x1b]52;c;([A-Za-z0-9+/=]*)\a")

// decodeOSC52 is the text of every clipboard copy in out.
func decodeOSC52(out string) string {
	var b strings.Builder
	for _, m := range osc52.FindAllStringSubmatch(out, -1) {
		d, _ := base64.StdEncoding.DecodeString(m[1])
		b.Write(d)
		b.WriteByte('\n')
	}
	return b.String()
}

// leakyProxy stands in for a proxy that does not redact its traces (the
// real one today): its data plane answers every request 200 with a
// backend's session cookie, and /debug/trace streams the next request's
// trace with its headers in clear, in the request snapshots and in a
// route's reason, its config's keys in the route's effectivePolicy (a
// client's, the backend's, a htpasswd), its API key (or Basic
// user:password, decoded) again in a later policy event, the cookie in the response snapshot, and comments
// quoting the authorization and, asked by the request (X-Leak-Prose), its
// key in prose before any event. A
// follow stream (follow=true) sends max recorded traces at once, each with
// credentials of its request (every other one Basic) and a request id,
// and ends.
type leakyProxy struct {
	adminURL string
	dataPort int
	mu       sync.Mutex
	watchers []chan http.Header
	// registered receives a value each time a one-shot stream is open.
	registered chan struct{}
	follows    int
}

func startLeakyProxy(t *testing.T) *leakyProxy {
	t.Helper()
	p := &leakyProxy{registered: make(chan struct{}, 16)}
	admin := httptest.NewServer(http.HandlerFunc(p.trace))
	t.Cleanup(admin.Close)
	data := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		ws := p.watchers
		p.watchers = nil
		p.mu.Unlock()
		for _, c := range ws {
			c <- r.Header.Clone()
		}
		w.Header().Set("Set-Cookie", "sid="+plantBackendSid+"; Path=/; HttpOnly")
		io.WriteString(w, "ok\n")
	}))
	t.Cleanup(data.Close)
	p.adminURL = admin.URL
	p.dataPort = data.Listener.Addr().(*net.TCPAddr).Port
	return p
}

func (p *leakyProxy) trace(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/debug/trace" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, ": ready\n\n")
	w.(http.Flusher).Flush()
	q := r.URL.Query()
	if q.Get("follow") == "true" {
		n, _ := strconv.Atoi(q.Get("max"))
		p.mu.Lock()
		first := p.follows
		p.follows += n
		p.mu.Unlock()
		for i := range n {
			id := fmt.Sprintf("r%d", first+i)
			// each request's credentials its own, with the planted stems
			h := http.Header{}
			h.Set("Authorization", "Bearer "+plantBearer+"-"+id)
			if i%2 == 1 {
				h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(plantUser+":"+plantPassword+"-"+id)))
			}
			h.Set("Cookie", "session="+plantCookie+"-"+id+"; theme=dark")
			h.Set("X-Api-Key", plantAPIKey+"-"+id)
			h.Set("Accept", "*/*")
			writeLeakyTrace(w, h, id, 200+i%2*300)
		}
		return
	}
	c := make(chan http.Header, 1)
	p.mu.Lock()
	p.watchers = append(p.watchers, c)
	p.mu.Unlock()
	p.registered <- struct{}{}
	select {
	case h := <-c:
		writeLeakyTrace(w, h, "", 200)
	case <-r.Context().Done():
	}
}

// writeLeakyTrace writes the trace of a request with headers h, as a
// proxy that redacts nothing would.
func writeLeakyTrace(w io.Writer, h http.Header, id string, status int) {
	headers := map[string]string{}
	for k, vs := range h {
		headers[strings.ToLower(k)] = strings.Join(vs, ", ")
	}
	auth := headers["authorization"]
	if auth == "" {
		auth = "none"
	}
	if a := headers["proxy-authorization"]; a != "" {
		fmt.Fprintf(w, ": the proxy saw Proxy-Authorization: %s\n\n", a)
	}
	fmt.Fprintf(w, ": checking authorization: %s\n\n", auth)
	if headers["x-leak-prose"] != "" {
		// Before any event: only the credentials gwdiag sent itself
		// (inject mode) are known to be secrets here.
		fmt.Fprintf(w, ": key %s seen\n\n", headers["x-api-key"])
	}
	policy := map[string]any{"type": "policy", "kind": "apiKey", "result": "applied", "reason": "key " + headers["x-api-key"] + " accepted"}
	if b, ok := strings.CutPrefix(auth, "Basic "); ok {
		userPass, _ := base64.StdEncoding.DecodeString(b)
		policy = map[string]any{"type": "policy", "kind": "basicAuth", "result": "applied", "reason": "user:password " + string(userPass) + " accepted"}
	}
	msgs := []map[string]any{
		{"type": "requestStarted"},
		{"type": "requestSnapshot", "stage": "initial request", "requestState": map[string]any{"request": map[string]any{"method": "GET", "path": "/headers", "headers": headers}}},
		{"type": "routeSelection", "selectedRoute": "default/r", "evaluatedRoutes": []string{"default/r"},
			"reasons": []any{map[string]any{"route": "default/r", "result": "selected", "reason": fmt.Sprintf("header authorization is %q", auth)}}},
		{"type": "policySelection", "effectivePolicy": map[string]any{"authorization": nil, "jwt": nil,
			"apiKey":                map[string]any{"keys": []any{map[string]any{"key": headers["x-api-key"]}, map[string]any{"key": plantClientKey, "metadata": map[string]any{"user": "bob"}}}, "mode": "strict"},
			"basicAuth":             map[string]any{"htpasswd": "alice:$apr1$" + plantHtpasswd, "realm": "gw"},
			"requestHeaderModifier": map[string]any{"set": [][]string{{"authorization", "Bearer " + plantUpstream}}}}},
		policy,
		{"type": "requestSnapshot", "stage": "final request", "requestState": map[string]any{"request": map[string]any{"method": "GET", "path": "/headers", "headers": headers}}},
		{"type": "backendCallStart", "target": "127.0.0.1:8000"},
		{"type": "backendCallResult", "status": status, "error": nil},
		{"type": "responseSnapshot", "stage": "final response", "requestState": map[string]any{"response": map[string]any{"code": status,
			"headers": map[string]string{"content-type": "text/plain", "set-cookie": "sid=" + plantBackendSid + "; Path=/; HttpOnly"}}}},
		{"type": "requestFinished"},
	}
	for i, m := range msgs {
		ev := map[string]any{"eventStart": nil, "eventEnd": 10 * (i + 1), "severity": "info", "message": m}
		if id != "" {
			ev["requestId"] = id
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false) // as the real proxy writes its strings
		enc.Encode(ev)
		fmt.Fprintf(w, "data: %s\n", b.Bytes())
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// syncBuffer is a buffer written by a viewer's goroutine and read by the
// test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// gwdiagRun is one run of a trace command in process, its input, output
// and files.
type gwdiagRun struct {
	stdout, stderr syncBuffer
	err            error
}

// startTrace runs `trace <args>` in a goroutine with stdin; done is
// closed when it returns.
func startTrace(t *testing.T, stdin io.Reader, args ...string) (*gwdiagRun, <-chan struct{}) {
	t.Helper()
	run, done := &gwdiagRun{}, make(chan struct{})
	root := &cobra.Command{Use: "gwdiag", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(NewCommand())
	root.SetOut(&run.stdout)
	root.SetErr(&run.stderr)
	root.SetIn(stdin)
	root.SetArgs(append([]string{"trace"}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	go func() {
		defer close(done)
		defer cancel()
		run.err = root.ExecuteContext(ctx)
	}()
	return run, done
}

// wait waits for done, failing past a deadline.
func wait(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(40 * time.Second):
		t.Fatalf("%s did not end", what)
	}
}

// sendPlanted sends a request carrying the planted credentials to the
// stand-in's data plane once a one-shot stream waits.
func (p *leakyProxy) sendPlanted(t *testing.T) {
	t.Helper()
	select {
	case <-p.registered:
	case <-time.After(20 * time.Second):
		t.Fatal("no trace stream opened")
	}
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/headers", p.dataPort), nil)
	req.Header.Set("Authorization", "Bearer "+plantBearer)
	req.Header.Set("Cookie", "session="+plantCookie)
	req.Header.Set("X-Api-Key", plantAPIKey)
	req.Header.Set("Proxy-Authorization", "Basic "+plantProxyAuth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// injectArgs are curl arguments planting the credentials in the request
// gwdiag sends; with curl, -v too, whose output gwdiag passes on.
func injectArgs(p *leakyProxy) []string {
	args := []string{"--local", "--admin-url", p.adminURL, "--port", strconv.Itoa(p.dataPort), "--", "http://example.com/headers",
		"-H", "Authorization: Bearer " + plantBearer, "-H", "Cookie: session=" + plantCookie, "-H", "X-Api-Key: " + plantAPIKey,
		"-H", "Proxy-Authorization: Basic " + plantProxyAuth, "-H", "X-Leak-Prose: 1"}
	if _, err := exec.LookPath("curl"); err == nil {
		args = append(args, "-v")
	}
	return args
}

// saveCapture writes, for the replays, what a proxy that does not redact
// sends: an SSE capture of two requests, and its events as JSON Lines.
func saveCapture(t *testing.T) (sseFile, jsonlFile string) {
	t.Helper()
	dir := t.TempDir()
	var sseB, jsonl bytes.Buffer
	sseB.WriteString(": ready\n\n")
	for i, id := range []string{"a", "b"} {
		h := http.Header{}
		h.Set("Authorization", "Bearer "+plantBearer)
		h.Set("Cookie", "session="+plantCookie)
		h.Set("X-Api-Key", plantAPIKey)
		h.Set("Proxy-Authorization", "Basic "+plantProxyAuth)
		h.Set("X-Run", strconv.Itoa(i))
		writeLeakyTrace(&sseB, h, id, 200)
	}
	for _, l := range strings.Split(sseB.String(), "\n") {
		if d, ok := strings.CutPrefix(l, "data: "); ok {
			jsonl.WriteString(d + "\n")
		}
	}
	sseFile, jsonlFile = filepath.Join(dir, "capture.sse"), filepath.Join(dir, "capture.jsonl")
	for f, b := range map[string][]byte{sseFile: sseB.Bytes(), jsonlFile: jsonl.Bytes()} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if leaks(sseB.String()) == nil {
		t.Fatal("the capture holds no planted credential")
	}
	return sseFile, jsonlFile
}

// TestNothingLeaks plants unique credentials in requests through a proxy
// that does not redact, and searches every byte gwdiag writes (stdout,
// stderr, the files it saves, the clipboard copies the viewer makes) on
// every path that prints or saves events: live one-shot (watch and inject,
// curl's -v output among it), follow (one stream, chained streams past
// the proxy's ceiling, with an outcome filter), replay (JSON Lines, SSE,
// stdin), trace diff, trace explain (live and saved, -v, -o json) and trace
// redact. Each case also runs with --redact=false, which must show them:
// the stand-in does leak, and the search can find a leak.
func TestNothingLeaks(t *testing.T) {
	defer func(n int) { followChunk = n }(followChunk)
	followChunk = 2
	sseFile, jsonlFile := saveCapture(t)
	sseBytes, _ := os.ReadFile(sseFile)
	for _, tt := range []struct {
		name string
		// run runs the case with extra flags and returns what it wrote
		run func(t *testing.T, p *leakyProxy, extra []string) string
		// shows is what a run must show besides (a sign the events came)
		shows string
	}{
		{"watch --raw", func(t *testing.T, p *leakyProxy, extra []string) string {
			r, done := startTrace(t, strings.NewReader(""), append([]string{"--local", "--admin-url", p.adminURL, "--raw"}, extra...)...)
			p.sendPlanted(t)
			wait(t, done, "watch")
			return must(t, r)
		}, `"type":"requestFinished"`},
		{"inject --raw (curl -v when installed)", func(t *testing.T, p *leakyProxy, extra []string) string {
			r, done := startTrace(t, strings.NewReader(""), append(append([]string{"--raw"}, extra...), injectArgs(p)...)...)
			wait(t, done, "inject")
			return must(t, r)
		}, `"type":"requestFinished"`},
		{"inject -u, the built-in client's Basic too", func(t *testing.T, p *leakyProxy, extra []string) string {
			r, done := startTrace(t, strings.NewReader(""), append(append([]string{"--raw", "--local", "--admin-url", p.adminURL, "--port", strconv.Itoa(p.dataPort)}, extra...),
				"--", "http://example.com/", "-u", plantUser+":"+plantPassword)...)
			wait(t, done, "inject -u")
			return must(t, r)
		}, `"type":"requestFinished"`},
		{"follow --raw", func(t *testing.T, p *leakyProxy, extra []string) string {
			r, done := startTrace(t, strings.NewReader(""), append([]string{"--local", "--admin-url", p.adminURL, "--raw", "--follow", "--max-requests", "2", "--duration", "1m"}, extra...)...)
			wait(t, done, "follow")
			return must(t, r)
		}, `"requestId":"r1"`},
		{"follow --raw on chained streams past the proxy's ceiling", func(t *testing.T, p *leakyProxy, extra []string) string {
			r, done := startTrace(t, strings.NewReader(""), append([]string{"--local", "--admin-url", p.adminURL, "--raw", "--follow", "--max-requests", "5", "--duration", "1m"}, extra...)...)
			wait(t, done, "chained follow")
			return must(t, r)
		}, `"requestId":"r4"`},
		{"follow --raw --status 2xx (the held traces)", func(t *testing.T, p *leakyProxy, extra []string) string {
			r, done := startTrace(t, strings.NewReader(""), append([]string{"--local", "--admin-url", p.adminURL, "--raw", "--follow", "--max-requests", "2", "--duration", "1m", "--status", "2xx"}, extra...)...)
			wait(t, done, "filtered follow")
			return r.stdout.String() + r.stderr.String() // r1 (500) fails the filter the proxy ignored: an error
		}, `"requestId":"r0"`},
		{"replay SSE --raw", func(t *testing.T, p *leakyProxy, extra []string) string {
			return runAll(t, "", append([]string{"-f", sseFile, "--raw"}, extra...)...)
		}, `"requestId":"b"`},
		{"replay JSON Lines --raw", func(t *testing.T, p *leakyProxy, extra []string) string {
			return runAll(t, "", append([]string{"-f", jsonlFile, "--raw"}, extra...)...)
		}, `"requestId":"b"`},
		{"replay stdin --raw", func(t *testing.T, p *leakyProxy, extra []string) string {
			return runAll(t, string(sseBytes), append([]string{"-f", "-", "--raw"}, extra...)...)
		}, `"requestId":"b"`},
		{"diff", func(t *testing.T, p *leakyProxy, extra []string) string {
			// a's credentials against b's: they differ, and so do the
			// fingerprints, which is all the diff shows
			other := filepath.Join(t.TempDir(), "other.jsonl")
			b, _ := os.ReadFile(jsonlFile)
			os.WriteFile(other, []byte(strings.NewReplacer(plantCookie, plantCookie+"-other").Replace(string(b))), 0o600)
			return runAll(t, "", append([]string{"diff", jsonlFile, other}, extra...)...)
		}, "cookie"},
		{"explain -f -v", func(t *testing.T, p *leakyProxy, extra []string) string {
			return runAll(t, "", append([]string{"explain", "-f", sseFile, "-v"}, extra...)...)
		}, "200 from route default/r"},
		{"explain -o json", func(t *testing.T, p *leakyProxy, extra []string) string {
			return runAll(t, "", append([]string{"explain", "-f", jsonlFile, "-o", "json", "-v"}, extra...)...)
		}, `"status":200`},
		{"explain inject -v", func(t *testing.T, p *leakyProxy, extra []string) string {
			args := injectArgs(p)
			r, done := startTrace(t, strings.NewReader(""), append(append([]string{"explain", "-v"}, extra...), args...)...)
			wait(t, done, "explain")
			return must(t, r)
		}, "200 from route default/r"},
		{"an error quoting a header", func(t *testing.T, p *leakyProxy, extra []string) string {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "no trace for you: Authorization: Bearer "+plantBearer, http.StatusBadGateway)
			}))
			defer srv.Close()
			return runAll(t, "", append([]string{"--local", "--admin-url", srv.URL, "--raw"}, extra...)...)
		}, "502 Bad Gateway"},
		{"redact -o FILE", func(t *testing.T, p *leakyProxy, extra []string) string {
			out := filepath.Join(t.TempDir(), "out.sse")
			all := runAll(t, "", append([]string{"redact", sseFile, "-o", out}, extra...)...)
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			return all + string(b)
		}, "data: "},
		{"redact stdin", func(t *testing.T, p *leakyProxy, extra []string) string {
			return runAll(t, string(sseBytes), append([]string{"redact", "-"}, extra...)...)
		}, "data: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := tt.run(t, startLeakyProxy(t), nil)
			if !strings.Contains(out, tt.shows) {
				t.Fatalf("the run shows no %q: did the events come?\n%s", tt.shows, out)
			}
			if !strings.Contains(out, "<redacted:") && !strings.Contains(out, `\u003credacted:`) {
				t.Errorf("nothing redacted shows:\n%s", out)
			}
			if l := leaks(out); l != nil {
				t.Errorf("gwdiag wrote planted credentials %q:\n%s", l, out)
			}
			if strings.HasPrefix(tt.name, "redact") {
				return // --redact=false has nothing to redact with: a usage error
			}
			clear := tt.run(t, startLeakyProxy(t), []string{"--redact=false"})
			if len(leaks(clear)) == 0 || !strings.Contains(clear, "credentials (authorization, cookie, API-key headers, ...) are shown in clear") {
				t.Errorf("--redact=false: want the credentials in clear, and the warning:\n%s", clear)
			}
		})
	}
}

// must is what a run wrote, failing on its error.
func must(t *testing.T, r *gwdiagRun) string {
	t.Helper()
	if r.err != nil {
		t.Fatalf("%v\nstderr:\n%s", r.err, r.stderr.String())
	}
	return r.stdout.String() + r.stderr.String()
}

// runAll runs `trace <args>` with stdin and returns stdout, stderr and
// the error's text together.
func runAll(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r, done := startTrace(t, strings.NewReader(stdin), args...)
	wait(t, done, strings.Join(args, " "))
	out := r.stdout.String() + r.stderr.String()
	if r.err != nil {
		out += "\nError: " + r.err.Error()
	}
	return out
}

// keys drives a viewer through its stdin: each write is read as one key
// (a pipe hands a read one write), and the viewer takes keys in order, so
// a copy (c) copies what the keys before it chose.
type keys struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *syncBuffer
	run  *gwdiagRun      // shown when a wait fails
	done <-chan struct{} // closed when gwdiag returned
}

func (k keys) send(ks ...string) {
	for _, key := range ks {
		if _, err := io.WriteString(k.in, key); err != nil {
			k.t.Fatal(err)
		}
	}
}

// waitFor waits until the viewer's output holds want n times.
func (k keys) waitFor(want string, n int) {
	k.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(k.out.String(), want) < n {
		if time.Now().After(deadline) {
			out, ended := k.out.String(), "gwdiag still runs"
			select {
			case <-k.done:
				ended = fmt.Sprintf("gwdiag returned %v", k.run.err)
			default:
			}
			k.t.Fatalf("the viewer's output never held %q %d times (%d); %s; its stderr: %q; the last of its output:\n%q",
				want, n, strings.Count(out, want), ended, k.run.stderr.String(), out[max(0, len(out)-3000):])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// copyEverything shows each of the events of the selected request in
// each detail mode (e, s, d) and format (YAML, JSON: f), copying each to
// the clipboard (OSC 52): 6*events copies.
func (k keys) copyEverything(events int) {
	for range 2 {
		for _, mode := range []string{"e", "s", "d"} {
			k.send(mode)
			for i := range events {
				k.send("c")
				if i < events-1 {
					k.send("j")
				}
			}
			for range events - 1 {
				k.send("k")
			}
		}
		k.send("f")
	}
}

const osc52Start = "\x1b]52;c;"

// TestViewerLeaksNothing drives the interactive viewer (watch, inject,
// follow, replay of a capture) through every event of every request in
// every detail mode and format, copying each to the clipboard, and
// searches all it drew and copied; with --redact=false the credentials
// show, in the same places.
func TestViewerLeaksNothing(t *testing.T) {
	sseFile, _ := saveCapture(t)
	for _, tt := range []struct {
		name     string
		args     func(p *leakyProxy) []string
		send     bool // the test sends the request (watch)
		requests int  // a request list (follow, or a capture of several)
	}{
		{"watch", func(p *leakyProxy) []string { return []string{"--local", "--admin-url", p.adminURL} }, true, 0},
		{"inject", func(p *leakyProxy) []string { return injectArgs(p) }, false, 0},
		{"follow", func(p *leakyProxy) []string {
			return []string{"--local", "--admin-url", p.adminURL, "--follow", "--max-requests", "2", "--duration", "1m"}
		}, false, 2},
		{"replay", func(*leakyProxy) []string { return []string{"-f", sseFile} }, false, 2},
	} {
		for _, redacted := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s redact=%v", tt.name, redacted), func(t *testing.T) {
				p := startLeakyProxy(t)
				in, keyIn := io.Pipe()
				t.Cleanup(func() { keyIn.Close() })
				args := tt.args(p)
				if !redacted {
					args = append([]string{"--redact=false"}, args...)
				}
				r, done := startTrace(t, in, args...)
				if tt.send {
					p.sendPlanted(t)
				}
				k := keys{t: t, in: keyIn, out: &r.stdout, run: r, done: done}
				k.waitFor("stream complete", 1)
				copies := 6 * 9
				if tt.requests == 0 {
					k.copyEverything(9)
				} else {
					copies *= tt.requests
					for req := range tt.requests {
						if req > 0 {
							k.send("\t", "\t", "j") // back to the requests, the next one
						}
						k.send("\t") // to its events
						k.copyEverything(9)
					}
				}
				k.waitFor(osc52Start, copies)
				k.send("q")
				wait(t, done, "the viewer")
				out := r.stdout.String() + r.stderr.String()
				if r.err != nil {
					out += r.err.Error()
				}
				found := leaks(out)
				if redacted && found != nil {
					t.Errorf("the viewer wrote planted credentials %q", found)
				}
				if redacted && !strings.Contains(decodeOSC52(out), "<redacted:") {
					t.Error("no copy shows a redacted value")
				}
				if !redacted && len(found) < 4 {
					t.Errorf("--redact=false: the viewer showed %q of the credentials, want them in clear", found)
				}
			})
		}
	}
}
