// Command hostileproxy is a test fixture: a proxy that speaks the admin and
// data-plane protocols badly on purpose, one way per -case, so that the
// tests can check gwdiag's CLI and suite survive what they validate
// (cli/e2e/hostile_test.go). Never a proxy to run.
//
//	hostileproxy -case endless-frame -f config.yaml
//
// It reads config.adminAddr and binds[].port from the standalone config the
// suite writes (or -admin), serves /debug/trace and /config_dump the
// hostile way, and answers every data-plane request 200 {}.
package main

import (
	"bytes"
	_ "embed"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"
)

// cases are the ways a proxy can be hostile, by name.
var cases = map[string]struct {
	trace, dump func(w http.ResponseWriter, r *http.Request)
	// data answers the data plane; nil answers 200 {}.
	data func(w http.ResponseWriter, r *http.Request)
}{
	// One data line (or one dump) that never ends.
	"endless-frame": {ready(endless("data: ", "a")), endless(`{"binds":"`, "a"), nil},
	// A dump that never ends, of valid-looking items; the trace stream
	// says it is ready, then sends keepalives without end.
	"endless-dump": {ready(endless("", ": keepalive\n\n")), endless(`{"binds":[`, `{"port":1,"listeners":[]},`), nil},
	// A trace that never finishes but keeps sending events.
	"endless-trace": {ready(endless("", `data: {"severity":"info","message":{"type":"routeSelection"}}`+"\n\n")), endless(`{"routes":[`, `{"name":"r"},`), nil},
	// One byte a second, of a frame and of a dump.
	"drip": {ready(drip(`data: {"severity":"info","message":{"type":"requestStarted"}}` + "\n\n")), drip(`{"binds":[]}`), nil},
	// Half a frame, then the connection reset.
	"reset": {ready(reset(`data: {"severity":"info","mess`)), reset(`{"binds":[{"po`), nil},
	// Bytes that are not UTF-8 inside the JSON strings of a whole trace
	// and dump.
	"invalid-utf8": {ready(finite(`data: {"severity":"info","message":{"type":"requestStarted","x":"` + "\xff\xfe" + `"}}` + "\n\n" +
		`data: {"severity":"info","message":{"type":"requestFinished"}}` + "\n\n")), finite(`{"binds":[{"key":"` + "\xc3\x28" + `"}]}`), nil},
	// JSON nested a million deep.
	"deep-json": {ready(finite("data: " + strings.Repeat("[", 1e6) + strings.Repeat("]", 1e6) + "\n\n")), finite(`{"binds":` + strings.Repeat("[", 1e6) + strings.Repeat("]", 1e6) + "}"), nil},
	// A trace whose event times restart: requestStarted again after
	// requestFinished's time went back, then the end.
	"restart": {ready(finite(event("requestStarted", 5) + event("routeSelection", 9) + event("requestStarted", 1) + event("routeSelection", 2) + event("requestFinished", 3))), finite(`{"binds":[]}`), nil},
	// A data-plane answer that never ends; the trace and dump are whole.
	"endless-body": {ready(finite(event("requestStarted", 1) + event("requestFinished", 2))), finite(`{"binds":[]}`), endless("", "x")},
	// Control sequences in the strings of a whole trace and dump: a
	// refusal's trace (cli/internal/tui/testdata/terminal-escapes.jsonl,
	// with an event type planted too) and the real standalone dump
	// (shared/real-world/agentgateway/configdump/standalone-docs.dump.json),
	// DERIVED: the clipboard (OSC 52), line erases, a C1 CSI, a
	// right-to-left override and a lone CR planted in their names.
	"terminal-escapes": {ready(finite(sse(escapesTrace))), finite(escapesDump), nil},
	// Header blocks of 1 MiB on every answer.
	"huge-headers": {bigHeader(ready(finite(event("requestStarted", 1)))), bigHeader(finite(`{"binds":[]}`)), bigHeader(finite("{}"))},
}

var (
	//go:embed terminal-escapes.jsonl
	escapesTrace string
	//go:embed terminal-escapes-dump.json
	escapesDump string
)

// sse frames each line of a JSON Lines trace as an event of the stream.
func sse(jsonl string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(jsonl), "\n") {
		b.WriteString("data: " + line + "\n\n")
	}
	return b.String()
}

// bigHeader sends a 1 MiB header block before h's answer.
func bigHeader(h func(w http.ResponseWriter, r *http.Request)) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Huge", strings.Repeat("h", 1<<20))
		h(w, r)
	}
}

func event(typ string, end int) string {
	return fmt.Sprintf(`data: {"eventStart":null,"eventEnd":%d,"severity":"info","message":{"type":%q}}`+"\n\n", end, typ)
}

// ready answers the trace stream's headers and ": ready", then serves body.
func ready(body func(w http.ResponseWriter, r *http.Request)) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(": ready\n\n"))
		w.(http.Flusher).Flush()
		body(w, r)
	}
}

func endless(prefix, pattern string) func(w http.ResponseWriter, r *http.Request) {
	chunk := bytes.Repeat([]byte(pattern), 64<<10/len(pattern)+1)
	return func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(prefix))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}
}

func drip(s string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; r.Context().Err() == nil; i++ {
			if _, err := w.Write([]byte{s[i%len(s)]}); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(time.Second):
			}
		}
	}
}

func reset(s string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(s))
		w.(http.Flusher).Flush()
		c, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		buf.Flush()
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) // RST, not FIN
		}
		c.Close()
	}
}

func finite(s string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(s)) }
}

func main() {
	name := flag.String("case", os.Getenv("HOSTILE_CASE"), "how to be hostile: one of the Cases (default $HOSTILE_CASE, as a container gets it)")
	bindHost := flag.String("bind-host", "127.0.0.1", "host the listeners bind (0.0.0.0 in a container)")
	file := flag.String("f", "", "standalone config: config.adminAddr and binds[].port")
	admin := flag.String("admin", os.Getenv("ADMIN_ADDR"), "admin address (default: the config's, then $ADMIN_ADDR)")
	flag.Parse()
	c, ok := cases[*name]
	if !ok {
		fmt.Fprintf(os.Stderr, "hostileproxy: unknown -case %q\n", *name)
		os.Exit(2)
	}
	var cfg struct {
		Config struct {
			AdminAddr string `json:"adminAddr"`
		} `json:"config"`
		Binds []struct {
			Port int `json:"port"`
		} `json:"binds"`
	}
	if *file != "" {
		b, err := os.ReadFile(*file)
		if err == nil {
			err = yaml.Unmarshal(b, &cfg)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "hostileproxy:", err)
			os.Exit(1)
		}
		if cfg.Config.AdminAddr != "" {
			*admin = cfg.Config.AdminAddr
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/trace", c.trace)
	mux.HandleFunc("/config_dump", c.dump)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("{}")) })
	// The tests start it on port 0 and read the address here.
	fmt.Printf("admin %s\n", serve(*admin, mux))
	for _, b := range cfg.Binds {
		data := c.data
		if data == nil {
			data = func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte("{}"))
			}
		}
		serve(net.JoinHostPort(*bindHost, fmt.Sprint(b.Port)), http.HandlerFunc(data))
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
}

func serve(addr string, h http.Handler) string {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostileproxy:", err)
		os.Exit(1)
	}
	go http.Serve(l, h)
	return l.Addr().String()
}
