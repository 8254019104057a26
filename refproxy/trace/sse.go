package trace

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// KeepaliveInterval is how often an idle stream gets a `: keepalive` comment.
var KeepaliveInterval = time.Second

// Handler serves /debug/trace: it registers a watcher (optionally filtered by
// ?expression=<CEL>), streams the trace of the request it gets as SSE data
// frames, and ends the stream after requestFinished.
func Handler(reg *Registry) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			w.Header().Set("Allow", "GET, POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		var watcher *Watcher
		if expr := r.URL.Query().Get("expression"); expr != "" {
			prg, err := Compile(expr)
			if err != nil {
				http.Error(w, "invalid expression: "+err.Error(), http.StatusBadRequest)
				return
			}
			watcher = reg.Watch(prg)
		} else {
			watcher = reg.Watch(nil)
		}
		defer watcher.Cancel()
		serve(w, r, watcher)
	})
}

func serve(w http.ResponseWriter, r *http.Request, watcher *Watcher) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(b []byte) bool {
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write([]byte(": ready\n\n")) {
		return
	}
	tick := time.NewTicker(KeepaliveInterval)
	defer tick.Stop()
	var buf bytes.Buffer
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
			if !write([]byte(": keepalive\n\n")) {
				return
			}
		case <-watcher.notify:
			events, dropped, final := watcher.Drain()
			buf.Reset()
			for _, e := range events {
				frame(&buf, e)
			}
			if dropped > 0 {
				buf.WriteString(": dropped " + strconv.Itoa(dropped) + " events\n\n")
			}
			if final != nil {
				frame(&buf, *final)
			}
			if buf.Len() > 0 && !write(buf.Bytes()) {
				return
			}
			if final != nil {
				return
			}
		}
	}
}

func frame(buf *bytes.Buffer, e Event) {
	b, err := json.Marshal(e)
	if err != nil {
		// Event fields are built by the proxy from JSON-safe values; a failure
		// here is a bug, reported in-band rather than killing the stream.
		buf.WriteString(": cannot encode event: " + err.Error() + "\n\n")
		return
	}
	buf.WriteString("data: ")
	buf.Write(b)
	buf.WriteString("\n\n")
}
