package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/golden/trace"
)

// TestFollowRawAndCheck: `gwdiag trace --follow --raw --max-requests 3`
// prints three whole traces as JSON Lines, every event with its
// requestId, and exits when the proxy ends the stream; `gwdiag conformance
// check` takes the capture and checks each request's trace.
func TestFollowRawAndCheck(t *testing.T) {
	p := startProxy(t)
	r := watch(t, p, func(i int) string { return fmt.Sprintf("/followed/%d", i) },
		"trace", "--local", "--admin-url", p.adminURL, "--raw", "--follow", "--max-requests", "3")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	ids, byID := trace.ByRequest(parseRaw(t, r.stdout))
	if len(ids) != 3 {
		t.Fatalf("%d request ids %q, want 3", len(ids), ids)
	}
	for _, id := range ids {
		if id == "" {
			t.Fatal("events without a requestId")
		}
		checkTrace(t, byID[id])
	}
	capture := filepath.Join(t.TempDir(), "follow.jsonl")
	if err := os.WriteFile(capture, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	// Diff: two requests of the capture differ in their path; the capture
	// against itself is equal, request by request; a capture of three
	// against one request says how to pick one.
	d := gwdiag(t, nil, nil, "trace", "diff", capture+"#"+ids[0], capture+"#"+ids[1])
	if d.code != 1 || !strings.Contains(d.stdout, "request 1 ("+ids[0]+", lines 1-12 ↔ "+ids[1]+", lines 13-24)") || !strings.Contains(d.stdout, "/followed/") {
		t.Errorf("diff of two requests: exit %d\n%s%s", d.code, d.stdout, d.stderr)
	}
	if d := gwdiag(t, nil, nil, "trace", "diff", capture, capture); d.code != 0 {
		t.Errorf("diff of a capture with itself: exit %d\n%s%s", d.code, d.stdout, d.stderr)
	}
	if d := gwdiag(t, nil, nil, "trace", "diff", capture, capture+"#"+ids[2]); d.code != 2 || !strings.Contains(d.stderr, "has 3 requests and") {
		t.Errorf("diff of three requests with one: exit %d\n%s%s", d.code, d.stdout, d.stderr)
	}
	if d := gwdiag(t, nil, nil, "trace", "diff", capture+"#nosuch", capture); d.code != 2 || !strings.Contains(d.stderr, "has no request nosuch") {
		t.Errorf("diff naming a missing request: exit %d\n%s%s", d.code, d.stdout, d.stderr)
	}
	// Replayed, the capture shows the request list.
	s := newTmux(t, gwdiagBin+" trace -f "+capture)
	s.waitScreen("Requests (3)", ids[0], ids[2], "Events (12) of request "+ids[0])
	s.run("send-keys", "-t", "gw", "q")
	if code := s.waitExit(); code != 0 {
		t.Errorf("replay: exit %d", code)
	}

	// Unsplit, the capture would be one trace of three requests, and fail.
	c := gwdiag(t, nil, nil, "conformance", "check", capture)
	if c.code != 0 || !strings.Contains(c.stdout, "3 passed, 0 failed") {
		t.Errorf("check of the followed capture: exit %d\n%s%s", c.code, c.stdout, c.stderr)
	}
}

// TestFollowUsageErrors: follow flags that cannot work together are usage
// errors (exit 2) that say why.
func TestFollowUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-requests", "3"}, "--max-requests applies to --follow: add --follow"},
		{[]string{"--status", "5xx"}, "--status applies to --follow: add --follow"},
		{[]string{"--follow", "--status", "9xx"}, `--status "9xx": want a status code (429) or a class (1xx to 5xx)`},
		{[]string{"--follow", "--raw", "--max-requests", "0"}, "--max-requests 0: want 1 to 1000"},
		{[]string{"--follow", "--raw", "--duration", "11m"}, "--duration 11m0s: want more than 0s, up to 10m"},
		{[]string{"--follow", "--raw", "--duration", "-1s"}, "--duration -1s: want more than 0s, up to 10m"},
		// Compiled before any proxy is reached (the admin URL here has none).
		{[]string{"--follow", "--raw", "--outcome", "response.code >"}, `--outcome "response.code >": ERROR: <input>:1:17: Syntax error`},
		{[]string{"--follow", "--raw", "--status", "5xx", "--outcome", "latency > 5"}, `--outcome "latency > 5": ERROR: <input>:1:49: undeclared reference to 'latency' (did you mean 'latencyMicros'?)`},
		{[]string{"--follow", "--raw", "--port", "3000", "--", "http://x/"}, "cannot be combined with --port"},
	} {
		r := gwdiag(t, nil, nil, append([]string{"trace", "--local", "--admin-url", "http://127.0.0.1:1"}, tt.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("trace %v: exit %d, stderr %q; want 2 and %q", tt.args, r.code, r.stderr, tt.want)
		}
	}
}

// TestFollowTUIInTmux: the viewer in follow mode lists the requests as they
// come, with the events of the selected one below, in a real terminal.
func TestFollowTUIInTmux(t *testing.T) {
	p := startProxy(t)
	s := newTmux(t, fmt.Sprintf("%s trace --local --admin-url %s --follow --max-requests 2", gwdiagBin, p.adminURL))
	s.waitScreen("Requests (0)")
	p.get(t, "/first/tmux")
	p.get(t, "/second/tmux")
	scr := s.waitScreen("Requests (2)", "/first/tmux", "/second/tmux", "stream complete, press q to exit")
	for _, want := range []string{"Method", "Path", "Status", "Time", "GET", "200", "Events (12) of request", "Request Start"} {
		if !strings.Contains(scr, want) {
			t.Errorf("screen lacks %q:\n%s", want, scr)
		}
	}
	// The second request's events, after moving down the request list.
	var second string
	for _, l := range strings.Split(scr, "\n") {
		if f := strings.Fields(l); strings.Contains(l, "/second/tmux") && len(f) > 2 {
			second = f[1]
		}
	}
	if second == "" || strings.Contains(scr, "of request "+second) {
		t.Fatalf("want the second request's id in the list, and the first request selected:\n%s", scr)
	}
	s.run("send-keys", "-t", "gw", "Down", "Tab", "Down", "s")
	s.waitScreen("Events (12) of request "+second, "Snapshot (YAML) · event 2 of 12", "initial request (requestSnapshot)")
	s.run("send-keys", "-t", "gw", "q")
	if code := s.waitExit(); code != 0 {
		t.Errorf("exit status %d after q, want 0; screen:\n%s", code, s.screen())
	}
}
