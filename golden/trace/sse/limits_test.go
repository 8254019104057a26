package sse

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/refproxy/config"
)

// endless repeats a pattern forever after a prefix, counting what was
// taken from it: a proxy that never ends a frame, a trace or a body.
type endless struct {
	prefix  string
	pattern string
	read    int64
}

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(e.prefix) > 0 {
			c := copy(p[n:], e.prefix)
			e.prefix = e.prefix[c:]
			n += c
			continue
		}
		n += copy(p[n:], e.pattern)
	}
	e.read += int64(n)
	return n, nil
}

// TestReaderBounds: each hostile stream ends the reading with the bound it
// went past, having taken from the proxy at most the bound and one buffer.
func TestReaderBounds(t *testing.T) {
	small := Limits{EventBytes: 1000, TraceEvents: 5, TraceBytes: 10000}
	event := `{"type":"requestStarted","time":"t"}`
	tests := []struct {
		name   string
		stream *endless
		want   string
	}{
		{"endless data line", &endless{prefix: ": ready\n\ndata: ", pattern: "a"}, "trace event exceeds 1000 bytes (proxy sent at least"},
		{"endless frame of short data lines", &endless{prefix: ": ready\n\n", pattern: "data: aaaaaaaaaa\n"}, "trace event exceeds 1000 bytes (proxy sent at least 1011 bytes in one frame)"},
		{"endless comment line", &endless{pattern: ":"}, "trace event exceeds 1000 bytes"},
		{"events that never finish the trace", &endless{pattern: "data: " + event + "\n\n"}, "trace exceeds 5 events (proxy sent at least 6)"},
		{"keepalives without end", &endless{pattern: ": keepalive\n\n"}, "trace exceeds 9 KiB"},
		{"blank lines without end", &endless{pattern: "\n"}, "trace exceeds 9 KiB"},
	}
	small.TraceBytes = 9 << 10
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReaderLimits(tt.stream, small)
			var err error
			for i := 0; i < 100000 && err == nil; i++ {
				_, err = r.Next()
			}
			var le *LimitError
			if !errors.As(err, &le) {
				t.Fatalf("got %v, want a *LimitError", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %q, want it to contain %q", err, tt.want)
			}
			if max := small.TraceBytes + 64<<10; tt.stream.read > max {
				t.Errorf("read %d bytes from the proxy, want at most %d", tt.stream.read, max)
			}
			if _, again := r.Next(); again != err {
				t.Errorf("Next after the bound: got %v, want the same error", again)
			}
		})
	}
}

// TestEventBoundIsInclusive: an event of exactly EventBytes is read; one
// byte more is named, as the message the issue quotes.
func TestEventBoundIsInclusive(t *testing.T) {
	l := Limits{EventBytes: 1 << 20}
	ok := strings.Repeat("a", 1<<20)
	f, err := NewReaderLimits(strings.NewReader("data: "+ok+"\n\n"), l).Next()
	if err != nil || len(f.Data) != 1<<20 {
		t.Fatalf("event of exactly the bound: got %d bytes, %v; want %d bytes, nil", len(f.Data), err, 1<<20)
	}
	_, err = NewReaderLimits(strings.NewReader("data: "+ok+"\ndata:\n\n"), l).Next()
	want := "trace event exceeds 1 MiB (proxy sent at least 1048577 bytes in one frame)"
	if err == nil || err.Error() != want {
		t.Errorf("one byte past the bound: got %v, want %q", err, want)
	}
}

// TestFrameTime: a frame dripped one byte at a time ends the reading after
// FrameTime, closing the stream; an idle stream does not.
func TestFrameTime(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		pw.Write([]byte(": ready\n\n"))
		for _, b := range []byte("data: {\"type\":") {
			if _, err := pw.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	r := NewReaderLimits(pr, Limits{FrameTime: config.Duration(100 * time.Millisecond)})
	r.CloseOnStall(pr)
	if f, err := r.Next(); err != nil || f.Comment != "ready" {
		t.Fatalf("first frame: got %+v, %v; want the ready comment", f, err)
	}
	start := time.Now()
	_, err := r.Next()
	if !IsLimit(err) || !strings.Contains(err.Error(), "trace event took longer than 100ms to arrive") {
		t.Fatalf("dripped frame: got %v, want the frame-time bound", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the bound took %s to end the reading", d)
	}
}

// TestBodyBound: ReadBody reads a body of exactly the bound and names one
// past it.
func TestBodyBound(t *testing.T) {
	for _, tt := range []struct {
		name string
		size int
		want string
	}{
		{"at the bound", 100, ""},
		{"past the bound", 101, "config dump exceeds 100 bytes (proxy sent at least 101 bytes)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := &endless{pattern: "x"}
			b, err := ReadBody(io.LimitReader(src, int64(tt.size)), 100, "config dump")
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want || len(b) > 100 {
				t.Errorf("got %d bytes, %q; want at most 100, %q", len(b), got, tt.want)
			}
		})
	}
}

// TestRealTracesUnderDefaults: every trace the real implementation
// produced reads whole under the default bounds, live and as a capture.
func TestRealTracesUnderDefaults(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "agentgateway", "*"))
	for _, path := range files {
		if strings.HasSuffix(path, ".md") {
			continue
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			err := ReadCaptureFile(path, nil, func(Captured) error { return nil })
			if IsLimit(err) {
				t.Errorf("capture: %v", err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := ReadTrace(NewReaderLimits(f, Limits{})); IsLimit(err) {
				t.Errorf("live: %v", err)
			}
		})
	}
}
