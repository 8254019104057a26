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
	err := rootcmd.New().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(rootcmd.ExitCode(err))
	}
}
