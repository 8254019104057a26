package llm

import (
	"fmt"
	"io"
	"sync"
)

// mode is how a response body is scanned.
type mode uint8

const (
	modeSniff mode = iota // decided by the first non-blank byte
	modeJSON
	modeSSE
)

// watcher is the resp.Body installed by WatchResponse.
type watcher struct {
	body io.ReadCloser
	done func(Usage, error)

	// gz decodes a gzip body on its own goroutine, which then owns the
	// scanners; unsupported is a Content-Encoding that cannot be scanned.
	gz          *gzipTap
	unsupported string

	mu       sync.Mutex // Read and Close may race when the client goes away
	finished bool
	mode     mode
	js       jsonScanner
	sse      sseScanner
}

func (w *watcher) Read(p []byte) (int, error) {
	n, err := w.body.Read(p)
	if n == 0 && err == nil {
		return 0, nil
	}
	if w.gz != nil || w.unsupported != "" {
		if w.gz != nil && n > 0 {
			w.gz.write(p[:n])
		}
		if err != nil {
			w.finish(err == io.EOF)
		}
		return n, err
	}
	w.mu.Lock()
	if w.finished {
		w.mu.Unlock()
		return n, err
	}
	w.feed(p[:n])
	ended := (w.mode == modeJSON && (w.js.complete || w.js.notObject)) || (w.mode == modeSSE && w.sse.doneEvent)
	w.mu.Unlock()
	if err != nil || ended {
		// Finishing before these bytes go on means the charge is in place
		// before the client can see the end of the response and send more.
		w.finish(ended || err == io.EOF)
	}
	return n, err
}

func (w *watcher) Close() error {
	w.finish(false)
	return w.body.Close()
}

// feed scans p. w.mu must be held, or feed runs on the gzip goroutine.
func (w *watcher) feed(p []byte) {
	if w.mode == modeSniff {
		i := 0
		for i < len(p) && isSpace(p[i]) {
			i++
		}
		if i == len(p) {
			return
		}
		if p[i] == '{' || p[i] == '[' {
			w.mode = modeJSON
		} else {
			w.mode = modeSSE
		}
		p = p[i:]
	}
	if w.mode == modeJSON {
		w.js.feed(p)
	} else {
		w.sse.feed(p)
	}
}

// finish calls done once, with what was found; eof tells a complete body
// from one that was closed or failed early.
func (w *watcher) finish(eof bool) {
	w.mu.Lock()
	if w.finished {
		w.mu.Unlock()
		return
	}
	w.finished = true
	w.mu.Unlock()
	var gzErr error
	if w.gz != nil {
		gzErr = w.gz.close(eof) // after this, the scanners are ours again
	}
	w.mu.Lock()
	var (
		u   Usage
		err error
	)
	switch w.mode {
	case modeSniff:
		if eof {
			err = fmt.Errorf("%w: empty body", errNoUsage)
		} else {
			err = fmt.Errorf("%w: body closed before any data", errTruncated)
		}
	case modeJSON:
		u, err = w.js.bodyUsage(eof)
	case modeSSE:
		u, err = w.sse.streamUsage(eof)
	}
	switch {
	case w.unsupported != "":
		err = fmt.Errorf("%w: %q", errUnsupportedEncoding, w.unsupported)
	case gzErr != nil:
		// Whatever was decoded before the damage is not to be trusted.
		err = fmt.Errorf("%w: gzip body: %v", errTruncated, gzErr)
	}
	w.mu.Unlock()
	if err != nil {
		u = Usage{}
	}
	if w.done != nil {
		w.done(u, err)
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// trimSpace trims JSON whitespace only: bytes.TrimSpace also takes Unicode
// spaces (U+0085, U+00A0), which are not JSON and would let a malformed
// value through.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}
