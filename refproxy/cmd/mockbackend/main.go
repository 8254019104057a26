// Command mockbackend serves the mock backends of package refproxy/mock: an
// OpenAI-compatible chat completions server and an httpbin-like echo server,
// as separate processes: for trying refproxy and gwdiag by hand (the
// README's "Trace a request"). The conformance suite runs the same mocks in
// its own process. See the package documentation of refproxy/mock for the
// x-mock-* headers.
//
//	mockbackend --llm-addr 127.0.0.1:8001 --echo-addr 127.0.0.1:8000
//
// An empty address disables that server. Each server prints one line
// "<name> listening on <host:port>" once it accepts connections, so a
// harness can pass port 0 and read the chosen port.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gwdiag/gwdiag/refproxy/mock"
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
	fs := flag.NewFlagSet("mockbackend", flag.ContinueOnError)
	fs.SetOutput(out)
	llmAddr := fs.String("llm-addr", "127.0.0.1:8001", "address of the mock LLM (OpenAI chat completions); empty disables it")
	echoAddr := fs.String("echo-addr", "127.0.0.1:8000", "address of the echo backend (httpbin-like); empty disables it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *llmAddr == "" && *echoAddr == "" {
		return fmt.Errorf("both --llm-addr and --echo-addr are empty: nothing to serve")
	}
	var servers []*mock.Server
	defer func() {
		for _, s := range servers {
			_ = s.Close()
		}
	}()
	for _, b := range []struct {
		name, addr string
		h          http.Handler
	}{{"llm", *llmAddr, mock.NewLLM()}, {"echo", *echoAddr, mock.NewEcho()}} {
		if b.addr == "" {
			continue
		}
		s, err := mock.Listen(b.addr, b.h)
		if err != nil {
			return fmt.Errorf("--%s-addr: %w", b.name, err)
		}
		servers = append(servers, s)
		fmt.Fprintf(out, "%s listening on %s\n", b.name, s.Addr())
	}
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(shutdown)
	}
	return nil
}
