package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/gwdiag/gwdiag/clusters/toolbin"
	"github.com/gwdiag/gwdiag/steps"
	"github.com/gwdiag/gwdiag/steps/procout"
)

// interruptSignals are the signals a run is cancelled with: Ctrl-C, and
// what CI systems send; each with the status a shell gives.
var interruptSignals = []struct {
	name string
	sig  syscall.Signal
	code int
}{
	{"SIGINT", syscall.SIGINT, 130},
	{"SIGTERM", syscall.SIGTERM, 143},
}

// TestConformanceInterrupt cancels a run of the reference proxy mid-way,
// on the in-process and the process targets, with each signal: gwdiag
// exits 128+n, the report and the JUnit file say interrupted (no scenario
// failed, the ones not run counted), the progress output ends saying so,
// and no process or file of the run is left.
func TestConformanceInterrupt(t *testing.T) {
	t.Parallel()
	targets := []struct {
		name string
		args func(t *testing.T) []string
	}{
		{"inprocess", func(*testing.T) []string { return []string{"--target", "inprocess"} }},
		{"process", func(t *testing.T) []string {
			return []string{"--target", "process", "--proxy-cmd", refproxyBin(t) + " -f {config}"}
		}},
	}
	for _, tg := range targets {
		for _, s := range interruptSignals {
			t.Run(tg.name+"/"+s.name, func(t *testing.T) {
				tmp := t.TempDir()
				run := startInterruptible(t, []string{"TMPDIR=" + tmp}, tg.args(t)...)
				children := descendants(run.cmd.Process.Pid)
				if tg.name == "process" {
					// Signal while a proxy process runs, so that the test
					// would see one left.
					deadline := time.Now().Add(time.Minute)
					for !strings.Contains(strings.Join(slices.Collect(maps.Values(children)), "\n"), "refproxy") {
						if time.Now().After(deadline) {
							t.Fatalf("no proxy process of the run within a minute (children %v)\n%s", children, run.output())
						}
						time.Sleep(20 * time.Millisecond)
						children = descendants(run.cmd.Process.Pid)
					}
				}
				run.interrupt(t, s.sig)
				checkInterrupted(t, run, s.name, s.code)
				for pid, cmdline := range children {
					if alive(pid, cmdline) {
						t.Errorf("process %d (%s) of the run is left after gwdiag exited", pid, cmdline)
					}
				}
				if left, _ := os.ReadDir(tmp); len(left) > 0 {
					t.Errorf("files of the run left in TMPDIR: %v", left)
				}
			})
		}
	}
}

// interruptedRun is a `gwdiag conformance run` under test.
type interruptedRun struct {
	cmd    *exec.Cmd
	dir    string // holds the report and the JUnit file
	done   chan struct{}
	err    error
	mu     sync.Mutex
	lines  []string
	result chan struct{} // closed at the first scenario result line
	stderr procout.Buffer
}

// startInterruptible starts gwdiag conformance run with a report and a
// JUnit file, and returns once a scenario has ended (others run then: the
// suite runs four at once) or fails the test after a bound.
func startInterruptible(t *testing.T, env []string, args ...string) *interruptedRun {
	t.Helper()
	r := &interruptedRun{dir: t.TempDir(), done: make(chan struct{}), result: make(chan struct{})}
	args = append([]string{"conformance", "run", "--report", filepath.Join(r.dir, "report.yaml"),
		"--junit", filepath.Join(r.dir, "junit.xml"), "--cucumber-json", filepath.Join(r.dir, "cucumber.json")}, args...)
	r.cmd = exec.Command(gwdiagBin, args...)
	r.cmd.Env = append(os.Environ(), env...)
	r.cmd.Stderr = &r.stderr
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		var once sync.Once
		for sc.Scan() {
			r.mu.Lock()
			r.lines = append(r.lines, sc.Text())
			r.mu.Unlock()
			if f := strings.Fields(sc.Text()); len(f) > 0 && (f[0] == "PASS" || f[0] == "FAIL" || f[0] == "UNSUPPORTED") {
				once.Do(func() { close(r.result) })
			}
		}
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			r.cmd.Process.Kill()
			<-r.done
		}
	})
	select {
	case <-r.result:
	case <-r.done:
		t.Fatalf("gwdiag ended before any scenario did: %v\n%s", r.err, r.output())
	case <-time.After(5 * time.Minute):
		t.Fatalf("no scenario ended within 5 minutes\n%s", r.output())
	}
	return r
}

// output is the progress output so far, then stderr.
func (r *interruptedRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n") + "\n" + r.stderr.String()
}

// progress is the progress output (stdout) so far.
func (r *interruptedRun) progress() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lines)
}

// interrupt sends sig and waits for gwdiag to exit (its clean-up bounded).
func (r *interruptedRun) interrupt(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("gwdiag did not exit within 3 minutes of %v\n%s", sig, r.output())
	}
}

// checkInterrupted checks the exit status, the progress output, the report
// and the JUnit file of a run interrupted by the signal named sig.
func checkInterrupted(t *testing.T, r *interruptedRun, sig string, code int) {
	t.Helper()
	out := r.output()
	var ee *exec.ExitError
	if !errors.As(r.err, &ee) || ee.ExitCode() != code {
		t.Errorf("gwdiag after %s: %v, want exit status %d\n%s", sig, r.err, code, out)
	}
	lines := r.progress()
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "run interrupted by "+sig+" after ") {
		t.Errorf("last line of the output: got %q, want it to say the run was interrupted by %s\n%s", last, sig, out)
	}
	if strings.Contains(out, "FAIL ") {
		t.Errorf("a scenario is reported failed:\n%s", out)
	}

	b, err := os.ReadFile(filepath.Join(r.dir, "report.yaml"))
	if err != nil {
		t.Fatalf("no report: %v\n%s", err, out)
	}
	var rep steps.ConformanceReport
	if err := yaml.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	s, in := rep.Summary, rep.Interrupted
	switch {
	case in == nil:
		t.Fatalf("report: no interrupted section\n%s", b)
	case in.Signal != sig:
		t.Errorf("report: interrupted by %q, want %q", in.Signal, sig)
	case s.Failed != 0:
		t.Errorf("report: %d failed, want none\n%s", s.Failed, b)
	case s.NotRun == 0 || in.Ran == 0:
		t.Errorf("report: %d ran, %d not run; want the signal mid-way (some of each)\n%s", in.Ran, s.NotRun, b)
	case in.Ran != s.Passed+s.Unsupported || in.CutShort+in.NotStarted != s.NotRun:
		t.Errorf("report: interrupted %+v does not add up with the summary %+v", *in, s)
	}
	for _, p := range rep.Profiles {
		if p.Core.Result != steps.Interrupted {
			t.Errorf("report: profile %s core %q, want %q", p.Name, p.Core.Result, steps.Interrupted)
		}
	}
	for _, f := range rep.Features {
		for _, sc := range f.Scenarios {
			if sc.Result == steps.Failed {
				t.Errorf("report: scenario %q failed: %s", sc.Name, sc.Message)
			}
		}
	}

	j, err := os.ReadFile(filepath.Join(r.dir, "junit.xml"))
	if err != nil {
		t.Fatalf("no JUnit file: %v", err)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Skipped  int `xml:"skipped,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Suites   []struct {
			Cases []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
				Skipped *struct {
					Message string `xml:"message,attr"`
				} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(j, &doc); err != nil {
		t.Fatalf("JUnit: %v", err)
	}
	notRun := 0
	for _, su := range doc.Suites {
		for _, c := range su.Cases {
			if c.Failure != nil {
				t.Errorf("JUnit: test case %q failed", c.Name)
			}
			if c.Skipped != nil && strings.Contains(c.Skipped.Message, "interrupted by "+sig) {
				notRun++
			}
		}
	}
	checkCucumber(t, r, sig, s.NotRun)
	total := s.Passed + s.Failed + s.Skipped + s.Unsupported + s.NotRun
	// godog's own skips (exempt, unsupported) stay <error type="skipped">,
	// so the skipped count is the scenarios not run.
	if doc.Failures != 0 || doc.Errors != 0 || notRun != s.NotRun || doc.Skipped != s.NotRun || doc.Tests != total {
		t.Errorf("JUnit: %d tests, %d skipped (%d interrupted by %s), %d failures, %d errors; want %d tests, %d skipped, all interrupted, none failed",
			doc.Tests, doc.Skipped, notRun, sig, doc.Failures, doc.Errors, total, s.NotRun)
	}
}

// checkCucumber checks the Cucumber JSON file of an interrupted run: no
// step failed, and each scenario not run says why on a skipped step.
func checkCucumber(t *testing.T, r *interruptedRun, sig string, notRun int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, "cucumber.json"))
	if err != nil {
		t.Fatalf("no Cucumber JSON file: %v", err)
	}
	var doc []struct {
		Elements []struct {
			Name  string `json:"name"`
			Steps []struct {
				Result struct {
					Status       string `json:"status"`
					ErrorMessage string `json:"error_message"`
				} `json:"result"`
			} `json:"steps"`
		} `json:"elements"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("Cucumber JSON: %v", err)
	}
	said := 0
	for _, f := range doc {
		for _, e := range f.Elements {
			for _, st := range e.Steps {
				switch {
				case st.Result.Status == "failed":
					t.Errorf("Cucumber JSON: a step of %q failed: %s", e.Name, st.Result.ErrorMessage)
				case st.Result.Status == "skipped" && strings.Contains(st.Result.ErrorMessage, "interrupted by "+sig):
					said++
				}
			}
		}
	}
	if said != notRun {
		t.Errorf("Cucumber JSON: %d scenarios say they were interrupted by %s, want %d (the report's not run)", said, sig, notRun)
	}
}

// descendants returns the processes below pid, by pid, with their command
// lines.
func descendants(pid int) map[int]string {
	parent := map[int]int{}
	cmdline := map[int]string{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so after the last ')'.
		rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
		f := strings.Fields(rest)
		p, _ := strconv.Atoi(filepath.Base(filepath.Dir(st)))
		if len(f) > 1 {
			parent[p], _ = strconv.Atoi(f[1])
			cl, _ := os.ReadFile(filepath.Join(filepath.Dir(st), "cmdline"))
			cmdline[p] = strings.TrimSpace(strings.ReplaceAll(string(cl), "\x00", " "))
		}
	}
	out := map[int]string{}
	for changed := true; changed; {
		changed = false
		for p, pp := range parent {
			_, seen := out[p]
			_, below := out[pp]
			if !seen && (pp == pid || below) {
				out[p] = cmdline[p]
				changed = true
			}
		}
	}
	return out
}

// alive reports whether pid still runs the same command line (a pid may
// be reused), waiting a little for one that is exiting.
func alive(pid int, cmdline string) bool {
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		zombie := strings.Contains(string(st), ") Z ")
		if err != nil || zombie || strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " ")) != cmdline {
			return false
		}
		if time.Now().After(deadline) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var (
	refproxyOnce sync.Once
	refproxyPath string
	refproxyErr  error
)

// refproxyBin builds the reference proxy, static, beside gwdiag (where the
// local node's --cluster local-node looks for it).
func refproxyBin(t *testing.T) string {
	t.Helper()
	refproxyOnce.Do(func() {
		refproxyPath = filepath.Join(filepath.Dir(gwdiagBin), "refproxy")
		refproxyErr = toolbin.BuildStatic(context.Background(), "", refproxyPath, "github.com/gwdiag/gwdiag/refproxy/cmd/refproxy")
	})
	if refproxyErr != nil {
		t.Fatal(refproxyErr)
	}
	return refproxyPath
}

// TestConformanceLocalNodeInterrupt cancels a run of the cluster profile on
// the local node (--cluster local-node, the reference proxy in pods) with
// a signal, once a scenario has ended: gwdiag takes the node down, exits
// 128+n, and its report and JUnit file say interrupted; nothing of the
// node is left (state directory, processes, bridge). It needs root, as the
// other local-node tests (make test runs them as root), and takes the
// machine's local-node lock through gwdiag.
//
// One signal a run, SIGINT and SIGTERM on alternate days (UTC; the test
// logs which): each costs a node start, and the local-node tests are one
// chain behind the machine's node lock, the longest of make test. Both
// signals are sent every run on the other targets (TestConformanceInterrupt,
// TestConformanceContainerInterrupt), and gwdiag handles them in one place;
// $GWDIAG_LOCALNODE_SIGNALS=all sends both here.
func TestConformanceLocalNodeInterrupt(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("skipped: the local node needs root (containerd, runc, a network bridge, cgroups); an interrupted local-node run is not tested")
	}
	refproxyBin(t) // beside gwdiag, where --cluster local-node packs its proxy image from
	signals := interruptSignals
	if os.Getenv("GWDIAG_LOCALNODE_SIGNALS") != "all" {
		day := time.Now().UTC().Unix() / 86400
		signals = signals[day%int64(len(signals)):][:1]
		t.Logf("local node: today's signal is %s (the signals alternate by day; $GWDIAG_LOCALNODE_SIGNALS=all sends each)", signals[0].name)
	}
	for _, s := range signals {
		t.Run(s.name, func(t *testing.T) {
			run := startInterruptible(t, nil, "--target", "cluster", "--cluster", "local-node")
			// The node's state directory: gwdiag holds the machine's lock,
			// so the only one is this run's.
			states, _ := filepath.Glob(filepath.Join(os.TempDir(), "gwdiag-localnode-*"))
			if len(states) == 0 {
				t.Errorf("no local node state directory when the signal was sent: the test would not see it left")
			}
			run.interrupt(t, s.sig)
			checkInterrupted(t, run, s.name, s.code)
			for _, st := range states {
				assertNodeGone(t, st)
			}
		})
	}
}
