// Command gwdiag is the gateway-proxy diagnostics client: it traces requests
// through a proxy, summarises its configuration and runs the conformance suite.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/gwdiag/gwdiag/cli/rootcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first Ctrl-C cancels ctx and lets commands clean up (the container
	// target removes its containers); a second one kills gwdiag at once.
	go func() { <-ctx.Done(); stop() }()
	err := rootcmd.New().ExecuteContext(ctx)
	interrupted := ctx.Err() != nil
	stop()
	if err != nil && interrupted {
		// Ctrl-C is how a user leaves a watch that waits too long: no error text.
		os.Exit(130)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(rootcmd.ExitCode(err))
	}
}
