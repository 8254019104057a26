// Package procout collects what a child process writes while it runs (the
// proxy of the process target, the rate-limit service and Redis, gwdiag in
// end-to-end tests), for error messages and reports: one writer safe for
// the child's output goroutines and a reader at once.
package procout

import (
	"bytes"
	"io"
	"strings"
	"sync"
)

// Buffer is an io.Writer collecting output. The zero value is ready.
type Buffer struct {
	// Tee, when set, also receives everything written.
	Tee io.Writer
	// Max bounds what is kept: past it the buffer starts over with the
	// newest writes (0: unbounded).
	Max int

	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Tee != nil {
		l.Tee.Write(p)
	}
	if l.Max > 0 && l.b.Len()+len(p) > l.Max {
		l.b.Reset()
	}
	return l.b.Write(p)
}

// String returns what was kept.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Tail returns the last n lines kept.
func (l *Buffer) Tail(n int) string {
	lines := strings.Split(strings.TrimRight(l.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
