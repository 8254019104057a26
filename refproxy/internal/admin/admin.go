// Package admin is the proxy's admin server (spec part 4): config_dump,
// logging, memory, pprof, tasks, trace and quitquitquit.
package admin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gwdiag/gwdiag/refproxy/internal/logfilter"
	"github.com/gwdiag/gwdiag/refproxy/internal/tracing"
)

// Backend is what the admin server needs from the proxy.
type Backend struct {
	// Dump returns the /config_dump document.
	Dump func() any
	// Status tells where the running config came from and the last refused
	// reload; /config_dump sends it as headers, so the document keeps the
	// reference schema. Nil sends none.
	Status func() ConfigStatus
	// Registry holds trace watchers.
	Registry *tracing.Registry
	// Logging is the live log filter.
	Logging *logfilter.Control
	// OTLP returns /debug/otlp's document: the OpenTelemetry export's
	// state and counts. Nil: the endpoint is not served.
	OTLP func() any
	// Quit starts a graceful shutdown; it must not block on the admin server.
	Quit func()
}

// ConfigStatus is the state of the proxy's config.
type ConfigStatus struct {
	// Source is the file (or "config") the running config came from.
	Source string
	// Rejected is the last reload the proxy refused, nil once a later one
	// was applied.
	Rejected *Rejection
}

// Rejection is a refused reload.
type Rejection struct {
	At  time.Time
	Err error
}

// configDump answers /config_dump: the document, with the config's status
// in X-Config-Source and, while the last reload stands refused,
// X-Config-Rejected ("<RFC 3339 time> <error>").
func (b Backend) configDump(w http.ResponseWriter, _ *http.Request) {
	if b.Status != nil {
		st := b.Status()
		w.Header().Set("X-Config-Source", headerSafe(st.Source))
		if r := st.Rejected; r != nil {
			w.Header().Set("X-Config-Rejected", r.At.UTC().Format(time.RFC3339)+" "+headerSafe(r.Err.Error()))
		}
	}
	writeJSON(w, b.Dump())
}

// headerSafe keeps a header value on one line of printable text.
func headerSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// Handler returns the admin mux.
func Handler(b Backend) http.Handler {
	mux := http.NewServeMux()
	handle := func(path string, h http.HandlerFunc, methods ...string) {
		allow := strings.Join(methods, ", ")
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			for _, m := range methods {
				if r.Method == m || (m == http.MethodGet && r.Method == http.MethodHead) {
					h(w, r)
					return
				}
			}
			w.Header().Set("Allow", allow)
			http.Error(w, fmt.Sprintf("method %s not allowed; allowed: %s", r.Method, allow), http.StatusMethodNotAllowed)
		})
	}
	handle("/config_dump", b.configDump, http.MethodGet)
	handle("/logging", b.logging, http.MethodGet, http.MethodPost)
	handle("/memory", memory, http.MethodGet)
	handle("/debug/pprof/profile", profile, http.MethodGet)
	handle("/debug/pprof/heap", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="heap"`)
		_ = pprof.Lookup("heap").WriteTo(w, 0)
	}, http.MethodGet)
	handle("/debug/tasks", tasks, http.MethodGet)
	handle("/debug/trace", tracing.Handler(b.Registry).ServeHTTP, http.MethodGet, http.MethodPost)
	if b.OTLP != nil {
		handle("/debug/otlp", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, b.OTLP()) }, http.MethodGet)
	}
	handle("/quitquitquit", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("shutdown now\n"))
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		b.Quit()
	}, http.MethodPost)
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "refproxy admin: /config_dump /logging /memory /debug/pprof/profile /debug/pprof/heap /debug/tasks /debug/trace /debug/otlp /quitquitquit\n")
	})
	return mux
}

// writeJSON answers v as indented JSON, <, > and & as they are (not
// \u003c...): the reference's dump reads "<redacted>" where it hides a
// secret, and so does refproxy's.
func writeJSON(w http.ResponseWriter, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		http.Error(w, "encode: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(buf.Bytes())
}

func (b Backend) logging(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		q := r.URL.Query()
		if !q.Has("level") {
			http.Error(w, "missing query parameter level (e.g. level=info or level=warn,refproxy::trace=debug)", http.StatusBadRequest)
			return
		}
		f, err := logfilter.Parse(q.Get("level"))
		if err != nil {
			http.Error(w, "invalid level: "+err.Error(), http.StatusBadRequest)
			return
		}
		b.Logging.Set(f)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "current log level is %s\n", b.Logging.Filter())
}

func memory(w http.ResponseWriter, r *http.Request) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	writeJSON(w, map[string]any{
		"allocator": map[string]any{
			"allocated": m.HeapAlloc, "active": m.HeapInuse, "resident": m.Sys - m.HeapReleased,
			"mapped": m.Sys, "retained": m.HeapIdle - m.HeapReleased, "heapObjects": m.HeapObjects,
			"totalAllocated": m.TotalAlloc, "mallocs": m.Mallocs, "frees": m.Frees,
			"gcCycles": m.NumGC, "gcPauseTotalNs": m.PauseTotalNs, "nextGC": m.NextGC,
			"stackInuse": m.StackInuse,
		},
		"process": map[string]any{"residentBytes": rss(), "goroutines": runtime.NumGoroutine()},
	})
}

// rss reads the process resident set size from /proc (0 where unavailable).
func rss() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// profileSlot allows one CPU profile at a time, as the runtime does: a
// request while another profiles waits its turn (or until its client
// gives up), as do the proxies of one process (in-process targets, tests).
var profileSlot = make(chan struct{}, 1)

func intParam(r *http.Request, name string, def, lo, hi int) (int, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s must be an integer from %d to %d, got %q", name, lo, hi, s)
	}
	return n, nil
}

func profile(w http.ResponseWriter, r *http.Request) {
	secs, err := intParam(r, "seconds", 10, 1, 300)
	hz := 100
	if err == nil {
		hz, err = intParam(r, "frequency", 100, 1, 1000)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	select {
	case profileSlot <- struct{}{}:
	case <-r.Context().Done():
		return
	}
	defer func() { <-profileSlot }()
	if hz != 100 {
		// The runtime takes the rate from the first call; StartCPUProfile
		// then keeps it (and notes on stderr that it could not reset it).
		runtime.SetCPUProfileRate(hz)
	}
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		http.Error(w, "start profile: "+err.Error(), http.StatusInternalServerError)
		return
	}
	t := time.NewTimer(time.Duration(secs) * time.Second)
	select {
	case <-t.C:
	case <-r.Context().Done():
		t.Stop()
	}
	pprof.StopCPUProfile()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="profile"`)
	_, _ = w.Write(buf.Bytes())
}

// taskGroup is goroutines sharing pprof labels.
type taskGroup struct {
	Labels map[string]string `json:"labels"`
	Count  int               `json:"count"`
	Stacks []taskStack       `json:"stacks"`
}

type taskStack struct {
	Count  int      `json:"count"`
	Frames []string `json:"frames"`
}

// tasks answers the live goroutine tree: goroutines grouped by their pprof
// labels (component, listener), each group with its distinct stacks.
func tasks(w http.ResponseWriter, r *http.Request) {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
	groups := map[string]*taskGroup{}
	total := 0
	for block := range strings.SplitSeq(buf.String(), "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		if len(lines) == 0 || lines[0] == "" || strings.HasPrefix(lines[0], "goroutine profile:") && len(lines) == 1 {
			continue
		}
		if strings.HasPrefix(lines[0], "goroutine profile:") {
			lines = lines[1:]
		}
		count, _, ok := strings.Cut(lines[0], " @ ")
		n, err := strconv.Atoi(count)
		if !ok || err != nil {
			continue
		}
		labels := map[string]string{}
		var frames []string
		for _, l := range lines[1:] {
			l = strings.TrimSpace(l)
			if rest, ok := strings.CutPrefix(l, "# labels: "); ok {
				_ = json.Unmarshal([]byte(rest), &labels)
				continue
			}
			if rest, ok := strings.CutPrefix(l, "#\t"); ok {
				f := strings.Fields(rest)
				if len(f) >= 2 {
					frames = append(frames, f[1])
				}
			}
		}
		keyParts := make([]string, 0, len(labels))
		for k, v := range labels {
			keyParts = append(keyParts, k+"="+v)
		}
		sort.Strings(keyParts)
		key := strings.Join(keyParts, ",")
		g, ok := groups[key]
		if !ok {
			g = &taskGroup{Labels: labels}
			groups[key] = g
		}
		g.Count += n
		g.Stacks = append(g.Stacks, taskStack{Count: n, Frames: frames})
		total += n
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*taskGroup, 0, len(keys))
	for _, k := range keys {
		out = append(out, groups[k])
	}
	writeJSON(w, map[string]any{"goroutines": total, "groups": out})
}

// Go runs fn in a goroutine that carries labels, and returns once it does,
// so that /debug/tasks lists it in its group from the moment Go returns. A
// plain go pprof.Do(...) sets the labels only when the new goroutine first
// runs: until the scheduler gets to it (on a loaded machine, a while), it
// carries its creator's labels and /debug/tasks shows it in another group.
func Go(labels pprof.LabelSet, fn func()) {
	started := make(chan struct{})
	go pprof.Do(context.Background(), labels, func(context.Context) {
		close(started)
		fn()
	})
	<-started
}

// CheckAddr refuses an admin address that is not loopback unless allowRemote.
func CheckAddr(addr string, allowRemote bool) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("admin address %q: %w", addr, err)
	}
	if allowRemote || Loopback(addr) {
		return nil
	}
	return fmt.Errorf("admin address %q is not loopback; the admin server has no authentication (pass --admin-allow-remote to bind it anyway)", addr)
}

// Loopback reports whether the admin address addr (host:port) listens on
// loopback only: localhost or a loopback IP; an empty host (every
// interface) or any other is beyond it.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
