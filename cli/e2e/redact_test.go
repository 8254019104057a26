package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// credentialsProxy stands in for a proxy that does not redact (the real one
// today): /debug/trace sends the trace of the next data-plane request with
// its headers and query in clear, and the API key again in a policy's
// reason. (refproxy
// redacts; this is what gwdiag must not leak.)
func credentialsProxy(t *testing.T) (adminURL string, dataPort int) {
	t.Helper()
	headers := make(chan *http.Request, 1)
	data := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers <- r.Clone(context.Background())
		w.Write([]byte("ok\n"))
	}))
	t.Cleanup(data.Close)
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ": ready\n\n")
		w.(http.Flusher).Flush()
		var req *http.Request
		select {
		case req = <-headers:
		case <-r.Context().Done():
			return
		}
		h := req.Header
		var hs []string
		for k, vs := range h {
			hs = append(hs, strconv.Quote(strings.ToLower(k))+":"+strconv.Quote(strings.Join(vs, ", ")))
		}
		for i, m := range []string{
			`{"type":"requestStarted"}`,
			`{"type":"requestSnapshot","stage":"initial request","requestState":{"request":{"method":"GET","path":"/","pathAndQuery":` + strconv.Quote(req.URL.RequestURI()) + `,"headers":{` + strings.Join(hs, ",") + `}}}}`,
			`{"type":"policy","kind":"apiKey","reason":"key ` + h.Get("X-Api-Key") + ` accepted"}`,
			`{"type":"responseSnapshot","stage":"final response","requestState":{"response":{"code":200,"headers":{"set-cookie":"sid=e2e-backend-sid-8c1f; Path=/"}}}}`,
			`{"type":"requestFinished"}`,
		} {
			fmt.Fprintf(w, "data: {\"eventStart\":null,\"eventEnd\":%d,\"severity\":\"info\",\"message\":%s}\n\n", i+1, m)
		}
	}))
	t.Cleanup(admin.Close)
	return admin.URL, data.Listener.Addr().(*net.TCPAddr).Port
}

// e2ePlanted are the credentials the tests below plant.
// The last two are in the request's query (Gemini's ?key=, an OAuth
// access_token too short to be found inside a string but as a value).
var e2ePlanted = []string{"e2e-bearer-3a9d0c7f", "e2e-key-51be2a90", "e2e-cookie-7d04e6b2", "e2e-backend-sid-8c1f", "AIzaE2eQueryKey40d7", "Qz_9"}

func leaked(out string) []string {
	var found []string
	for _, p := range e2ePlanted {
		if strings.Contains(out, p) {
			found = append(found, p)
		}
	}
	return found
}

// TestRedactedByDefault: the built binary writes no credential a proxy that
// does not redact shows it (trace --raw, curl's -v output included when curl
// is installed), and writes them with a warning under --redact=false.
func TestRedactedByDefault(t *testing.T) {
	for _, redactFlag := range []string{"", "--redact=false"} {
		adminURL, port := credentialsProxy(t)
		args := []string{"trace", "--local", "--admin-url", adminURL, "--raw", "--port", strconv.Itoa(port)}
		if redactFlag != "" {
			args = append(args, redactFlag)
		}
		args = append(args, "--", "http://example.com/?key="+e2ePlanted[4]+"&access_token="+e2ePlanted[5], "-H", "Authorization: Bearer "+e2ePlanted[0], "-H", "X-Api-Key: "+e2ePlanted[1],
			"-H", "Cookie: session="+e2ePlanted[2])
		if _, err := exec.LookPath("curl"); err == nil {
			args = append(args, "-v")
		}
		r := gwdiag(t, nil, nil, args...)
		out := r.stdout + r.stderr
		if r.code != 0 || !strings.Contains(r.stdout, `"type":"requestFinished"`) {
			t.Fatalf("%v: exit %d\n%s", args, r.code, out)
		}
		if redactFlag == "" {
			if l := leaked(out); l != nil || !strings.Contains(r.stdout, `"authorization":"Bearer <redacted:`) {
				t.Errorf("gwdiag wrote %q (or no fingerprint):\n%s", l, out)
			}
		} else if len(leaked(out)) != len(e2ePlanted) || !strings.Contains(r.stderr, "warning: --redact=false: credentials") {
			t.Errorf("--redact=false: want every credential in clear and the warning:\n%s", out)
		}
	}
}

// TestTraceRedactKey: gwdiag trace redact writes the golden of a real
// trace with credentials planted when GWDIAG_REDACT_KEY is the goldens'
// key, from a file and from stdin; without it each run draws its own key.
func TestTraceRedactKey(t *testing.T) {
	const dir = "../../golden/trace/redact/testdata/agentgateway/"
	in := dir + "k8s-latest.DERIVED-credentials.sse"
	golden, err := os.ReadFile(in + ".redacted")
	if err != nil {
		t.Fatal(err)
	}
	key := []string{"GWDIAG_REDACT_KEY=gwdiag redaction golden key"}
	out := filepath.Join(t.TempDir(), "out.sse")
	if r := gwdiag(t, key, nil, "trace", "redact", in, "-o", out); r.code != 0 || !strings.Contains(r.stderr, "15 events read, 7 redacted") {
		t.Errorf("trace redact -o: exit %d, stderr %q", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(out); string(b) != string(golden) {
		t.Errorf("trace redact -o wrote\n%s\nwant\n%s", b, golden)
	}
	f, _ := os.Open(in)
	defer f.Close()
	if r := gwdiag(t, key, f, "trace", "redact", "-"); r.code != 0 || r.stdout != string(golden) {
		t.Errorf("trace redact -: exit %d\n%s", r.code, r.stdout)
	}
	a, b := gwdiag(t, nil, nil, "trace", "redact", in), gwdiag(t, nil, nil, "trace", "redact", in)
	if a.stdout == b.stdout || a.stdout == string(golden) || strings.Count(a.stdout, "<redacted:") != strings.Count(string(golden), "<redacted:") {
		t.Error("without GWDIAG_REDACT_KEY: want the same redactions under a key of each run's own")
	}
}

// TestViewerRedactedInTmux: the viewer in a real terminal shows a planted
// capture's credentials as fingerprints, and never in clear, on the screen
// or in its history.
func TestViewerRedactedInTmux(t *testing.T) {
	in := "../../golden/trace/redact/testdata/agentgateway/k8s-latest.DERIVED-credentials.sse"
	s := newTmux(t, fmt.Sprintf("%s trace -f %s", gwdiagBin, in))
	s.waitScreen("stream complete, press q to exit")
	// Tall enough for a snapshot's headers in the detail pane.
	s.run("resize-window", "-t", "gw", "-x", "140", "-y", "80")
	s.waitScreen("Request Done")
	s.run("send-keys", "-t", "gw", "Down")
	s.waitScreen("Raw event (YAML) · event 2 of", "authorization: Bearer <redacted:", "cookie: session=<redacted:")
	s.run("send-keys", "-t", "gw", "s")
	s.waitScreen("Snapshot (YAML) · event 2 of", "x-api-key: <redacted:")
	for range 10 {
		s.run("send-keys", "-t", "gw", "Down")
	}
	s.waitScreen("Snapshot (YAML) · event 12 of", "set-cookie: backend_session=<redacted:")
	s.run("send-keys", "-t", "gw", "q")
	if code := s.waitExit(); code != 0 {
		t.Errorf("exit %d", code)
	}
	for _, p := range []string{"sk-golden-4f1e9a0c7d3b", "golden-ck-2b8e5d71", "golden-xk-a6c0f3e19d52", "golden-bs-7d20c4e8b1f6"} {
		if strings.Contains(s.history(), p) {
			t.Errorf("the terminal showed %s", p)
		}
	}
}
