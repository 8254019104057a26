package specminimal

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"
)

// adminHandler serves the endpoints of spec part 4.
func (p *Proxy) adminHandler(cfg Config) http.Handler {
	mux := http.NewServeMux()
	only := func(method string, h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Method != method {
				w.Header().Set("Allow", method)
				http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("/debug/trace", only(http.MethodGet, p.serveTrace))
	mux.HandleFunc("/config_dump", only(http.MethodGet, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, configDump(cfg, p.listeners))
	}))
	mux.HandleFunc("/logging", p.logging)
	mux.HandleFunc("/debug/pprof/profile", only(http.MethodGet, p.profile))
	mux.HandleFunc("/debug/pprof/heap", only(http.MethodGet, func(w http.ResponseWriter, _ *http.Request) {
		_ = pprof.Lookup("heap").WriteTo(w, 0)
	}))
	mux.HandleFunc("/memory", only(http.MethodGet, func(w http.ResponseWriter, _ *http.Request) {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		writeJSON(w, map[string]any{"heapAlloc": m.HeapAlloc, "sys": m.Sys, "numGC": m.NumGC})
	}))
	mux.HandleFunc("/debug/tasks", only(http.MethodGet, func(w http.ResponseWriter, _ *http.Request) {
		_ = pprof.Lookup("goroutine").WriteTo(w, 1)
	}))
	mux.HandleFunc("/quitquitquit", only(http.MethodPost, func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "shutting down")
		if cfg.IgnoreQuit {
			return
		}
		go p.Close() // Shutdown lets this answer finish
	}))
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// configDump lists the categories of spec 2.2, listeners at the top level.
func configDump(cfg Config, addrs map[string]string) map[string]any {
	binds, listeners, routes, backends, policies := []any{}, []any{}, []any{}, []any{}, []any{}
	for _, l := range cfg.Listeners {
		_, port := splitAddr(addrs[l.Name])
		binds = append(binds, map[string]any{"port": port})
		var names []string
		for _, rt := range l.Routes {
			names = append(names, rt.Name)
			routes = append(routes, map[string]any{"name": rt.Name, "listener": l.Name, "pathPrefix": rt.PathPrefix, "backends": []string{rt.Backend}})
			backends = append(backends, map[string]any{"host": rt.Backend})
			if len(rt.Limits) > 0 {
				policies = append(policies, map[string]any{"route": rt.Name, "localRateLimit": effectivePolicy(rt)["localRateLimit"]})
			}
		}
		listeners = append(listeners, map[string]any{"name": l.Name, "bind": port, "protocol": "HTTP", "routes": names})
	}
	return map[string]any{"binds": binds, "listeners": listeners, "routes": routes, "backends": backends,
		"workloads": []any{}, "services": []any{}, "policies": policies}
}

// logLevel is the log filter /logging reports and sets.
type logLevel struct {
	mu     sync.Mutex
	filter string
}

var levels = map[string]bool{"error": true, "warn": true, "info": true, "debug": true, "trace": true, "off": true}

// checkFilter checks the Rust log-filter syntax: comma-separated
// directives, each a level or target=level (levels in any case); empty
// directives are skipped, as Rust's filters do, but one must remain.
func checkFilter(f string) error {
	n := 0
	for _, d := range strings.Split(f, ",") {
		if d = strings.TrimSpace(d); d == "" {
			continue
		}
		n++
		target, level, hasEq := strings.Cut(d, "=")
		if !hasEq {
			level, target = target, ""
		} else if target == "" {
			return fmt.Errorf("directive %q has no target", d)
		}
		if !levels[strings.ToLower(level)] {
			return fmt.Errorf("directive %q: %q is not a level", d, level)
		}
	}
	if n == 0 {
		return fmt.Errorf("empty filter")
	}
	return nil
}

func (p *Proxy) logging(w http.ResponseWriter, r *http.Request) {
	l := &p.logLevel
	switch r.Method {
	case http.MethodGet:
	case http.MethodPost:
		f := r.URL.Query().Get("level")
		if err := checkFilter(f); err != nil {
			http.Error(w, "bad filter: "+err.Error(), http.StatusUnprocessableEntity)
			return
		}
		l.mu.Lock()
		l.filter = f
		l.mu.Unlock()
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(w, "current log level is %s", l.filter)
}

// profile serves a CPU profile of 1 to 300 seconds (default 10), cut short
// when the client leaves or the proxy stops.
func (p *Proxy) profile(w http.ResponseWriter, r *http.Request) {
	secs := 10
	if s := r.URL.Query().Get("seconds"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 300 {
			http.Error(w, "seconds: want an integer from 1 to 300", http.StatusUnprocessableEntity)
			return
		}
		secs = n
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if err := pprof.StartCPUProfile(w); err != nil {
		http.Error(w, "cpu profile: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	timer := time.NewTimer(time.Duration(secs) * time.Second)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-r.Context().Done():
	case <-p.stopping:
	}
	pprof.StopCPUProfile()
}
