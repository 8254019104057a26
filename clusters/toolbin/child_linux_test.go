package toolbin

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A parent that starts `sleep` and is then killed: with DieWithParent
// the sleep is gone or dying as soon as the parent has been reaped; with
// no attributes it lives on, which shows the test can tell them apart.
func TestDieWithParent(t *testing.T) {
	if mode := os.Getenv("TOOLBIN_TEST_PARENT"); mode != "" {
		parent(mode)
		return
	}
	for _, tt := range []struct {
		mode     string
		wantDead bool
	}{
		{"tied", true},
		{"tied-group", true},
		{"untied", false},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			p := exec.Command(os.Args[0], "-test.run=^TestDieWithParent$")
			p.Env = append(os.Environ(), "TOOLBIN_TEST_PARENT="+tt.mode)
			out, err := p.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil {
				p.Process.Kill()
				p.Wait()
				t.Fatalf("the parent wrote no child's pid: %v", err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(line))
			if err != nil {
				t.Fatalf("the parent wrote %q, not a pid", line)
			}
			t.Cleanup(func() { unix.Kill(pid, unix.SIGKILL) })
			// A pidfd turns readable when the process ends: its end is
			// awaited as an event.
			fd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				t.Fatalf("pidfd of the child %d: %v", pid, err)
			}
			defer unix.Close(fd)
			if ended(t, fd, 0) {
				t.Fatalf("the child %d is not running before its parent is killed", pid)
			}
			p.Process.Kill()
			p.Wait()
			if !tt.wantDead {
				if ended(t, fd, 0) {
					t.Fatalf("the child %d died with its parent though nothing tied it", pid)
				}
				return
			}
			// The signal is sent as the parent exits; the child takes a
			// moment to die.
			if !ended(t, fd, 10*time.Second) {
				t.Fatalf("the child %d still runs 10 s after its parent was killed", pid)
			}
		})
	}
}

// parent is the helper process: it starts a sleep as mode says, writes
// its pid and waits to be killed.
func parent(mode string) {
	c := exec.Command("sleep", "60")
	switch mode {
	case "tied":
		DieWithParent(c, false)
	case "tied-group":
		DieWithParent(c, true)
	}
	if err := c.Start(); err != nil {
		os.Exit(3)
	}
	os.Stdout.WriteString(strconv.Itoa(c.Process.Pid) + "\n")
	time.Sleep(time.Minute)
	os.Exit(4)
}

// ended waits up to wait for the process of pidfd to end, and reports
// whether it did.
func ended(t *testing.T, pidfd int, wait time.Duration) bool {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(wait.Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatalf("poll of a pidfd: %v", err)
		}
		return n > 0
	}
}
