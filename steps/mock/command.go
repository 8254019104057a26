package mock

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Command serves the mock backends the way the mockbackend binary does,
// until ctx ends: one server per --llm-addr and per --echo-addr, each with
// a counter of its own. Each server prints one line "<kind> listening on
// <host:port>" to out once it accepts connections, so that a harness can
// pass port 0 and read the chosen port, or wait for the lines. The
// conformance suite's container target runs it as the entrypoint of its
// mock-backend image, one container per scenario.
//
//	--llm-addr 127.0.0.1:8001 --echo-addr 127.0.0.1:8000   (the defaults)
//	--echo-addr :8000 --echo-addr :8002 --llm-addr ''       (two echo servers)
//
// An empty address disables that kind.
func Command(ctx context.Context, name string, args []string, out io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	var llm, echo addrList
	fs.Var(&llm, "llm-addr", "address of a mock LLM (OpenAI chat completions); repeat for several, empty disables (default 127.0.0.1:8001)")
	fs.Var(&echo, "echo-addr", "address of an echo backend (httpbin-like); repeat for several, empty disables (default 127.0.0.1:8000)")
	poolAddr := fs.String("pool-addr", "", "address of a pool's control API, which starts mock backends on demand (POST /__pool/echo); with it, --llm-addr and --echo-addr default to none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if !llm.set && *poolAddr == "" {
		llm.addrs = []string{"127.0.0.1:8001"}
	}
	if !echo.set && *poolAddr == "" {
		echo.addrs = []string{"127.0.0.1:8000"}
	}
	if len(llm.addrs) == 0 && len(echo.addrs) == 0 && *poolAddr == "" {
		return fmt.Errorf("both --llm-addr and --echo-addr are empty: nothing to serve")
	}
	var servers []*Server
	defer func() {
		for _, s := range servers {
			_ = s.Close()
		}
	}()
	if *poolAddr != "" {
		host, _, err := net.SplitHostPort(*poolAddr)
		if err != nil {
			return fmt.Errorf("--pool-addr: %w", err)
		}
		pool := NewPool(host)
		defer pool.Close()
		s, err := Listen(*poolAddr, pool)
		if err != nil {
			return fmt.Errorf("--pool-addr: %w", err)
		}
		servers = append(servers, s)
		fmt.Fprintf(out, "pool listening on %s\n", s.Addr())
	}
	type backend struct {
		kind, addr string
		h          http.Handler
	}
	var backends []backend
	for _, a := range llm.addrs {
		backends = append(backends, backend{"llm", a, NewLLM()})
	}
	for _, a := range echo.addrs {
		backends = append(backends, backend{"echo", a, NewEcho()})
	}
	for _, b := range backends {
		s, err := Listen(b.addr, b.h)
		if err != nil {
			return fmt.Errorf("--%s-addr: %w", b.kind, err)
		}
		servers = append(servers, s)
		fmt.Fprintf(out, "%s listening on %s\n", b.kind, s.Addr())
	}
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(shutdown)
	}
	return nil
}

// addrList is a repeatable address flag; an empty value clears it.
type addrList struct {
	addrs []string
	set   bool
}

func (l *addrList) String() string { return fmt.Sprint(l.addrs) }

func (l *addrList) Set(v string) error {
	l.set = true
	if v != "" {
		l.addrs = append(l.addrs, v)
	}
	return nil
}
