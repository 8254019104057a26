//go:build linux

// Command peakrss is a test fixture: it runs a command and writes the
// command's peak resident memory, in KiB, to the file named by -o.
//
//	peakrss -o rss.txt gwdiag trace --local --raw
//
// The e2e tests cannot read that figure from the rusage of a child they
// start themselves: Go starts children with vfork, and Linux carries the
// parent's high-water mark across the exec into the child's ru_maxrss, so
// every gwdiag run measured from a race-enabled test binary "peaked" at the
// test binary's own 200 MiB. Started from this small program, the child's
// ru_maxrss is its own (or this program's few MiB, whichever is larger).
// The command's standard streams pass through; the exit status is the
// command's (128+n when a signal n ended it).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

func main() {
	out := flag.String("o", "", "file to write the command's peak RSS (KiB) to")
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: peakrss -o FILE COMMAND [ARG...]")
		os.Exit(2)
	}
	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// The test ends this program when its deadline passes: the command
	// must not outlive it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		fmt.Fprintln(os.Stderr, "peakrss:", err)
		os.Exit(127)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		if werr := os.WriteFile(*out, []byte(strconv.FormatInt(ru.Maxrss, 10)), 0o644); werr != nil {
			fmt.Fprintln(os.Stderr, "peakrss:", werr)
			os.Exit(127)
		}
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		os.Exit(128 + int(ws.Signal()))
	}
	os.Exit(cmd.ProcessState.ExitCode())
}
