// Command mockbackend serves the mock backends of package steps/mock: an
// OpenAI-compatible chat completions server and an httpbin-like echo server,
// as separate processes: for trying refproxy and gwdiag by hand (the
// README's "Trace a request"). The conformance suite runs the same mocks in
// its own process. See the package documentation of steps/mock for the
// x-mock-* headers.
//
//	mockbackend --llm-addr 127.0.0.1:8001 --echo-addr 127.0.0.1:8000
//
// Each flag may be repeated for several servers of a kind, each with its
// own counter; an empty address disables that kind. Each server prints one
// line "<kind> listening on <host:port>" once it accepts connections, so a
// harness can pass port 0 and read the chosen port (mock.Command).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/gwdiag/gwdiag/steps/mock"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mockbackend:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends (a signal in main), printing the listening
// addresses to out.
func run(ctx context.Context, args []string, out io.Writer) error {
	return mock.Command(ctx, "mockbackend", args, out)
}
