// Command gwdiag is the gateway-proxy diagnostics client: it traces requests
// through a proxy, summarises its configuration and runs the conformance suite.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/gwdiag/gwdiag/cli/internal/rootcmd"
	"github.com/gwdiag/gwdiag/cli/internal/startenv"
	"github.com/gwdiag/gwdiag/golden/termtext"
	"github.com/gwdiag/gwdiag/steps/interrupt"
)

func main() {
	startenv.Restore()
	// The first SIGINT or SIGTERM cancels ctx and lets commands clean up
	// (a conformance run ends its scenarios and removes what it started);
	// a second one says what may be left behind and exits at once.
	ctx, stop := interrupt.Context(context.Background(), os.Stderr, os.Exit)
	// Everything printed is shown, never obeyed: a control character a
	// client, proxy or backend put in a string is escaped (termtext).
	stdout, stderr := termtext.NewWriter(os.Stdout), termtext.NewWriter(os.Stderr)
	root := rootcmd.New()
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	sig, interrupted := interrupt.Of(ctx)
	stop()
	code := 0
	switch {
	case err != nil && interrupted:
		// 128+n, as shells report a process a signal ended, so CI tells a
		// cancel from a failure. No error text: Ctrl-C is how a user leaves
		// a watch that waits too long, and an interrupted conformance run
		// has said so in its progress output.
		code = sig.ExitCode()
	case err != nil:
		fmt.Fprintln(stderr, "Error:", err)
		code = rootcmd.ExitCode(err)
	}
	// What the last writes held back (a character cut between two).
	stdout.Flush()
	stderr.Flush()
	os.Exit(code)
}
