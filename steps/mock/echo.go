package mock

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxDelay caps /delay so a typo cannot hang a test run.
const maxDelay = 60 * time.Second

// Echo is the httpbin-like echo backend. The zero value is not usable; use NewEcho.
type Echo struct {
	Counter
	mux *http.ServeMux
}

// NewEcho returns an echo backend with a count of 0.
func NewEcho() *Echo {
	e := &Echo{mux: http.NewServeMux()}
	e.mux.HandleFunc("/headers", e.headers)
	e.mux.HandleFunc("/status/{code}", e.status)
	e.mux.HandleFunc("/delay/{ms}", e.delay)
	e.mux.HandleFunc("/cut/{sent}", e.cut)
	e.mux.HandleFunc("/", e.anything)
	return e
}

// ServeHTTP counts the request (control endpoints aside) and answers it.
func (e *Echo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if e.serveControl(w, r) {
		return
	}
	e.n.Add(1)
	setCookies(w, r)
	e.mux.ServeHTTP(w, r)
}

// flatHeaders joins repeated values with ", " as httpbin does, and includes Host.
func flatHeaders(r *http.Request) map[string]string {
	h := make(map[string]string, len(r.Header)+1)
	for k, v := range r.Header {
		h[k] = strings.Join(v, ", ")
	}
	h["Host"] = r.Host
	return h
}

func (e *Echo) headers(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"headers": flatHeaders(r)})
}

func (e *Echo) status(w http.ResponseWriter, r *http.Request) {
	code, err := strconv.Atoi(r.PathValue("code"))
	if err != nil || code < 100 || code > 999 {
		http.Error(w, "status: want an integer HTTP status code, got "+strconv.Quote(r.PathValue("code")), http.StatusBadRequest)
		return
	}
	w.WriteHeader(code)
}

// cutLength is the Content-Length /cut/{sent} announces.
const cutLength = 100000

// cut announces a body of cutLength bytes, sends the first {sent} of them
// and closes the connection: a backend that cuts its body short.
func (e *Echo) cut(w http.ResponseWriter, r *http.Request) {
	sent, err := strconv.Atoi(r.PathValue("sent"))
	if err != nil || sent < 0 || sent >= cutLength {
		http.Error(w, "cut: want a byte count from 0 to "+strconv.Itoa(cutLength-1)+", got "+strconv.Quote(r.PathValue("sent")), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(cutLength))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(strings.Repeat("x", sent)))
	_ = http.NewResponseController(w).Flush()
	if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = c.Close()
	}
}

func (e *Echo) delay(w http.ResponseWriter, r *http.Request) {
	ms, err := strconv.Atoi(r.PathValue("ms"))
	if err != nil || ms < 0 {
		http.Error(w, "delay: want milliseconds >= 0, got "+strconv.Quote(r.PathValue("ms")), http.StatusBadRequest)
		return
	}
	t := time.NewTimer(min(time.Duration(ms)*time.Millisecond, maxDelay))
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		return
	}
	e.anything(w, r)
}

func (e *Echo) anything(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "reading body: "+err.Error(), http.StatusBadRequest)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"method":  r.Method,
		"url":     r.URL.String(),
		"path":    r.URL.Path,
		"query":   r.URL.Query(),
		"headers": flatHeaders(r),
		"body":    string(body),
	})
}
