package tracecmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
)

// oneShotProxy stands in for the real proxy's newest release: /debug/trace
// answers `: ready`, one trace of a request answered with status, then
// ends the stream, whatever the query (it ignores follow, max and
// outcome). With keepOpen it does not end the stream, as older proxies may
// not. ids tags the events with request ids, one trace per id, each
// answered with the status at the same index, as a proxy that follows but
// ignores the filter would.
type oneShotProxy struct {
	status   []int
	ids      []string
	keepOpen bool
}

func (p oneShotProxy) start(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/trace" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ": ready\n\n")
		for i, status := range p.status {
			id := ""
			if i < len(p.ids) {
				id = p.ids[i]
			}
			for _, ev := range oneTrace(status, id) {
				fmt.Fprintf(w, "data: %s\n\n", ev)
			}
		}
		w.(http.Flusher).Flush()
		if p.keepOpen {
			<-r.Context().Done()
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// oneTrace is a short trace of a request the proxy answered with status.
func oneTrace(status int, id string) []string {
	msgs := []map[string]any{
		{"type": "requestStarted"},
		{"type": "routeSelection", "selectedRoute": "default/default/bind/3000/listener0/default/httpbin", "evaluatedRoutes": []string{"default/default/bind/3000/listener0/default/httpbin"}},
		{"type": "backendCallStart", "target": "127.0.0.1:8000"},
		{"type": "backendCallResult", "status": status, "error": nil},
		{"type": "responseSnapshot", "stage": "final response", "requestState": map[string]any{"response": map[string]any{"code": status}}},
		{"type": "requestFinished"},
	}
	var out []string
	for i, m := range msgs {
		ev := map[string]any{"eventStart": nil, "eventEnd": 100 * (i + 1), "severity": "info", "message": m}
		if id != "" {
			ev["requestId"] = id
		}
		b, _ := json.Marshal(ev)
		out = append(out, string(b))
	}
	return out
}

// runTrace runs `trace <args>` with stdout and stderr apart.
func runTrace(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := &cobra.Command{Use: "gwdiag", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(NewCommand())
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetIn(strings.NewReader(""))
	root.SetArgs(append([]string{"trace"}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = root.ExecuteContext(ctx)
	return out.String(), errb.String(), err
}

// TestFollowAgainstAProxyThatCannotFollow: the proxy's answer is checked,
// not trusted. A trace that fails the filter is never printed; a proxy that
// does not follow is named; the exit status is 1 unless exactly one
// request was asked for and the one trace matches.
func TestFollowAgainstAProxyThatCannotFollow(t *testing.T) {
	tests := []struct {
		name       string
		proxy      oneShotProxy
		args       []string
		traces     int // traces printed
		printed    []int
		code       int
		errWant    []string
		stderrWant string
	}{
		{"one 200 against --status 5xx: nothing printed", oneShotProxy{status: []int{200}},
			[]string{"--status", "5xx", "--max-requests", "5"}, 0, nil, 1,
			[]string{"the proxy does not follow: it ignored follow=true (its events carry no requestId) and sent 1 trace",
				"it ignored the filter (--status 5xx): 1 trace failing it not shown (status 200 after 600µs)", "run without --follow"}, ""},
		{"one trace, five asked", oneShotProxy{status: []int{200}},
			[]string{"--max-requests", "5"}, 1, []int{200}, 1, []string{"the proxy does not follow"}, ""},
		{"one trace, one asked: printed with a warning", oneShotProxy{status: []int{200}},
			[]string{"--max-requests", "1"}, 1, []int{200}, 0, nil, "warning: the proxy does not follow"},
		{"one matching trace, one asked", oneShotProxy{status: []int{503}},
			[]string{"--status", "5xx", "--max-requests", "1"}, 1, []int{503}, 0, nil, "warning: the proxy does not follow"},
		{"a proxy that keeps the stream open after its trace", oneShotProxy{status: []int{200}, keepOpen: true},
			[]string{"--slower-than", "1s"}, 0, nil, 1, []string{"does not follow", "--slower-than 1s"}, ""},
		{"a proxy that follows but ignores the filter", oneShotProxy{status: []int{200, 503, 502}, ids: []string{"a", "b", "c"}},
			[]string{"--status", "5xx", "--max-requests", "3"}, 2, []int{503, 502}, 1,
			[]string{"it ignored the filter (--status 5xx): 1 trace failing it not shown (status 200 after 600µs)"}, ""},
		{"a proxy that follows and filters", oneShotProxy{status: []int{503, 500}, ids: []string{"a", "b"}},
			[]string{"--status", "5xx", "--max-requests", "2"}, 2, []int{503, 500}, 0, nil, ""},
		{"a following proxy that ends after one request", oneShotProxy{status: []int{200}, ids: []string{"a"}},
			[]string{"--max-requests", "5"}, 1, []int{200}, 1, []string{"the proxy may not follow: it ended the stream after one request"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := tt.proxy.start(t)
			args := append([]string{"--local", "--admin-url", u, "--raw", "--follow"}, tt.args...)
			stdout, stderr, err := runTrace(t, args...)
			if code := exitcode.Code(err); code != tt.code {
				t.Fatalf("exit %d (%v), want %d; stdout:\n%s", code, err, tt.code, stdout)
			}
			var printed []int
			for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
				if line == "" {
					continue
				}
				var ev struct {
					Message struct {
						Type   string `json:"type"`
						Status int    `json:"status"`
					} `json:"message"`
				}
				if err := json.Unmarshal([]byte(line), &ev); err != nil {
					t.Fatalf("stdout line %q: %v", line, err)
				}
				if ev.Message.Type == "backendCallResult" {
					printed = append(printed, ev.Message.Status)
				}
			}
			if fmt.Sprint(printed) != fmt.Sprint(tt.printed) || len(printed) != tt.traces {
				t.Errorf("printed traces of statuses %v, want %v", printed, tt.printed)
			}
			for _, w := range tt.errWant {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if !strings.Contains(stderr, tt.stderrWant) {
				t.Errorf("stderr lacks %q:\n%s", tt.stderrWant, stderr)
			}
		})
	}
}

// followingProxy follows as the reference proxy does, within the query's
// max: each stream sends max traces of new request ids, then ends; with
// short, a stream sends one trace fewer than its max and ends (as at its
// duration). It records the max each stream asked for.
type followingProxy struct {
	short bool
	mu    sync.Mutex
	asked []string
	next  int
}

func (p *followingProxy) start(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		n, err := strconv.Atoi(q.Get("max"))
		if r.URL.Path != "/debug/trace" || q.Get("follow") != "true" || err != nil || q.Get("duration") == "" {
			http.Error(w, "want a follow stream with max and duration", http.StatusBadRequest)
			return
		}
		p.mu.Lock()
		p.asked = append(p.asked, q.Get("max"))
		if p.short {
			n--
		}
		first := p.next
		p.next += n
		p.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ": ready\n\n")
		for i := range n {
			for _, ev := range oneTrace(200, fmt.Sprintf("r%d", first+i)) {
				fmt.Fprintf(w, "data: %s\n\n", ev)
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestFollowRawPastTheProxysCeiling: with --raw, --max-requests beyond
// what one stream gives is followed on consecutive streams, each asked for
// what is left, every trace printed once; a stream that ends short of its
// max (its duration) ends the following. Without --raw it is a usage
// error.
func TestFollowRawPastTheProxysCeiling(t *testing.T) {
	defer func(n int) { followChunk = n }(followChunk)
	followChunk = 3
	for _, tt := range []struct {
		short      bool
		want       int
		wantAsked  string
		wantStderr string
	}{
		{false, 7, "[3 3 1]", "note: the proxy ends a follow stream at 3 traces; following on new streams until 7 traces"},
		{true, 2, "[3]", ""},
	} {
		p := &followingProxy{short: tt.short}
		url := p.start(t)
		stdout, stderr, err := runTrace(t, "--local", "--admin-url", url, "--follow", "--raw", "--max-requests", "7", "--duration", "1m")
		if err != nil {
			t.Fatalf("short %v: %v\n%s", tt.short, err, stderr)
		}
		ids := map[string]bool{}
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		for _, l := range lines {
			var ev struct {
				RequestID string `json:"requestId"`
			}
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			ids[ev.RequestID] = true
		}
		if len(ids) != tt.want || len(lines) != 6*tt.want {
			t.Errorf("short %v: %d traces in %d lines, want %d in %d", tt.short, len(ids), len(lines), tt.want, 6*tt.want)
		}
		if got := fmt.Sprint(p.asked); got != tt.wantAsked {
			t.Errorf("short %v: streams asked for max %s, want %s", tt.short, got, tt.wantAsked)
		}
		if !strings.Contains(stderr, tt.wantStderr) || tt.wantStderr == "" && stderr != "" {
			t.Errorf("short %v: stderr %q, want %q", tt.short, stderr, tt.wantStderr)
		}
	}
	_, _, err := runTrace(t, "--local", "--admin-url", "http://127.0.0.1:1", "--follow", "--max-requests", "1001")
	if err == nil || exitcode.Code(err) != 2 || !strings.Contains(err.Error(), "add --raw, which follows on consecutive streams") {
		t.Errorf("--max-requests past a stream without --raw: %v", err)
	}
}
