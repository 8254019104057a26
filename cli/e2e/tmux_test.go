package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/cli/internal/connect/connecttest"
)

// tmuxSession drives the real binary in a real terminal: a private tmux
// server (its own socket, no user config) with one 80x24 window.
type tmuxSession struct {
	t          *testing.T
	socket     string
	statusFile string
}

func newTmux(t *testing.T, command string) *tmuxSession {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed: the real-terminal test of the trace viewer cannot run")
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "tmux.conf")
	// remain-on-exit keeps the pane after gwdiag exits, so its exit status
	// can be read.
	if err := os.WriteFile(conf, []byte("set -g remain-on-exit on\nset -g status off\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &tmuxSession{t: t, socket: filepath.Join(dir, "sock"), statusFile: filepath.Join(dir, "status")}
	// The shell writes the exit status to a file: tmux can mark a pane dead
	// when its terminal closes, before it has reaped the process, and then
	// never report the status.
	s.run("-f", conf, "new-session", "-d", "-s", "gw", "-x", "80", "-y", "24",
		command+"; echo $? > "+s.statusFile+".tmp && mv "+s.statusFile+".tmp "+s.statusFile)
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", s.socket, "kill-server").Run() })
	return s
}

func (s *tmuxSession) run(args ...string) string {
	s.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", s.socket}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (s *tmuxSession) screen() string { return s.run("capture-pane", "-p", "-t", "gw") }

// history is the screen and what scrolled off it, wrapped lines joined.
func (s *tmuxSession) history() string {
	return s.run("capture-pane", "-p", "-J", "-S", "-", "-t", "gw")
}

// waitScreen polls the screen until it contains every want, or fails after
// a deadline showing the last screen.
func (s *tmuxSession) waitScreen(want ...string) string {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		scr := s.screen()
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(scr, w)
		}
		if ok {
			return scr
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("screen never showed %q; last screen:\n%s", want, scr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitExit polls until the command has exited and returns its status.
func (s *tmuxSession) waitExit() int {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if b, err := os.ReadFile(s.statusFile); err == nil {
			status, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				s.t.Fatalf("exit status file: %v", err)
			}
			return status
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("gwdiag did not exit; screen:\n%s", s.screen())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTUIInTmux(t *testing.T) {
	p := startProxy(t)
	cmd := fmt.Sprintf("%s trace --local --admin-url %s --port %d -- http://tmux.example/anything/tui -H 'x-from: tmux'",
		gwdiagBin, p.adminURL, p.port)
	s := newTmux(t, cmd)

	scr := s.waitScreen("stream complete, press q to exit")
	for _, want := range []string{"#", "Type", "Summary", "Request Start", "Snapshot", "Route", "Policies", "Backend Start", "Backend Result",
		`selected "default/default/bind/`, "status=200", "Raw event (YAML) · event 1 of"} {
		if !strings.Contains(scr, want) {
			t.Errorf("screen lacks %q:\n%s", want, scr)
		}
	}
	if n := len(strings.Split(strings.TrimRight(scr, "\n"), "\n")); n > 24 {
		t.Errorf("screen has %d lines, want at most 24", n)
	}
	got := p.backend.requests()
	if len(got) != 1 || got[0].Header.Get("x-from") != "tmux" || got[0].Host != "tmux.example" {
		t.Errorf("backend saw %+v, want one request with x-from: tmux and Host tmux.example", got)
	}

	s.run("send-keys", "-t", "gw", "Down", "s")
	s.waitScreen("Snapshot (YAML) · event 2 of", "initial request (requestSnapshot)", "x-from: tmux")

	s.run("send-keys", "-t", "gw", "d")
	s.waitScreen("Snapshot diff · event 2 of", "first snapshot: nothing to compare with")

	s.run("send-keys", "-t", "gw", "e")
	s.waitScreen("Raw event (YAML) · event 2 of")

	// f shows the details as JSON, and back; c copies them (OSC 52) and
	// says so.
	s.run("send-keys", "-t", "gw", "f")
	s.waitScreen("Raw event (JSON) · event 2 of", `"eventStart": null,`)
	s.run("send-keys", "-t", "gw", "c")
	s.waitScreen("details copied (")
	s.run("send-keys", "-t", "gw", "f")
	s.waitScreen("Raw event (YAML) · event 2 of")

	// A taller window shows the whole list, down to Request Done.
	s.run("resize-window", "-t", "gw", "-x", "100", "-y", "32")
	s.waitScreen("Request Done", "request finished")

	// Still open after the stream completed, until q.
	if strings.Contains(s.run("display-message", "-p", "-t", "gw", "#{pane_dead}"), "1") {
		t.Fatalf("gwdiag exited before q; screen:\n%s", s.screen())
	}
	s.run("send-keys", "-t", "gw", "q")
	if code := s.waitExit(); code != 0 {
		t.Errorf("exit status %d after q, want 0; screen:\n%s", code, s.screen())
	}
}

// TestTUIErrorsInTmux checks the viewer's error paths in a real terminal: an
// unreachable admin server is reported plainly (no screen flashes by), and a
// stream that breaks is shown on the status line until q.
func TestTUIErrorsInTmux(t *testing.T) {
	t.Run("unreachable admin", func(t *testing.T) {
		url := closedURL(t)
		s := newTmux(t, gwdiagBin+" trace --local --admin-url "+url)
		if code := s.waitExit(); code != 1 {
			t.Errorf("exit status %d, want 1", code)
		}
		if h := s.history(); !strings.Contains(h, "Error: cannot reach the admin server at "+url+" (is the proxy running?") {
			t.Errorf("terminal lacks the error:\n%s", h)
		}
	})
	t.Run("stream breaks", func(t *testing.T) {
		broken := fakeAdmin(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, ": ready\n\ndata: {\"eventStart\":null,\"eventEnd\":1,\"severity\":\"info\",\"message\":{\"type\":\"requestStarted\"}}\n\n")
		})
		s := newTmux(t, gwdiagBin+" trace --local --admin-url "+broken)
		s.waitScreen("Request Start", "stream failed, press q to exit: trace stream ended before requestFinished")
		s.run("send-keys", "-t", "gw", "q")
		if code := s.waitExit(); code != 1 {
			t.Errorf("exit status %d, want 1 (the trace failed)", code)
		}
		if h := s.history(); !strings.Contains(h, "Error: trace failed: trace stream ended before requestFinished (after 1 events)") {
			t.Errorf("terminal lacks the error after the viewer closed:\n%s", h)
		}
	})
	t.Run("replay", func(t *testing.T) {
		s := newTmux(t, gwdiagBin+" trace -f testdata/trace.jsonl")
		s.waitScreen("testdata/trace.jsonl", "Events (12)", "stream complete, press q to exit")
		s.run("send-keys", "-t", "gw", "q")
		if code := s.waitExit(); code != 0 {
			t.Errorf("exit status %d, want 0", code)
		}
	})
	t.Run("replay from stdin", func(t *testing.T) {
		s := newTmux(t, gwdiagBin+" trace -f - < testdata/trace.jsonl")
		s.waitScreen("stdin", "Events (12)", "stream complete, press q to exit")
		s.run("send-keys", "-t", "gw", "s")
		s.waitScreen("Snapshot (YAML) · event 1 of 12")
		s.run("send-keys", "-t", "gw", "q")
		if code := s.waitExit(); code != 0 {
			t.Errorf("exit status %d, want 0", code)
		}
	})
}

// TestTUIWatchInTmux runs watch mode in a real terminal: the viewer waits,
// then shows the next request that reaches the proxy.
func TestTUIWatchInTmux(t *testing.T) {
	p := startProxy(t)
	s := newTmux(t, gwdiagBin+" trace --local --admin-url "+p.adminURL)
	s.waitScreen("waiting for the next request to reach the proxy")
	// The screen shows once the stream is open; a request sent now could
	// still race the watcher's registration on a proxy that opens the
	// stream first, so keep sending until the trace completes.
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; !strings.Contains(s.screen(), "stream complete, press q to exit"); i++ {
		if time.Now().After(deadline) {
			t.Fatalf("watch never completed; screen:\n%s", s.screen())
		}
		p.get(t, fmt.Sprintf("/watched/%d", i))
	}
	s.waitScreen("Request Start", "initial request: GET /watched/")
	s.run("send-keys", "-t", "gw", "q")
	if code := s.waitExit(); code != 0 {
		t.Errorf("exit status %d after q, want 0", code)
	}
}

// TestClusterTUIInTmux runs the viewer in cluster mode in a real terminal:
// the pod is found through a real API server and both forwards go through
// it to the in-process kubelet of the pod's node.
func TestClusterTUIInTmux(t *testing.T) {
	f := connecttest.StartFixture(t)
	s := newTmux(t, fmt.Sprintf("KUBECONFIG=%s %s trace gateway/gw.%s --port 8080 -- http://tmux.cluster/tui -H 'x-from: tmux'",
		f.Kubeconfig, gwdiagBin, f.Namespace))
	s.waitScreen("stream complete, press q to exit", "Request Start", "status=200")
	s.run("send-keys", "-t", "gw", "Down", "s")
	s.waitScreen("initial request (requestSnapshot)", "host: tmux.cluster", "podName: "+f.Pod)
	s.run("send-keys", "-t", "gw", "q")
	if code := s.waitExit(); code != 0 {
		t.Errorf("exit status %d after q, want 0; screen:\n%s", code, s.screen())
	}
	if got := f.Kubelet.Served(); len(got) != 2 {
		t.Errorf("kubelet served %v, want two port-forwards (admin and listener)", got)
	}
}
