package redact

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/golden/trace/sse/ssetest"
)

// TestCapture: a capture is copied byte for byte but for the values it
// redacts; the SSE framing and comments stay, and so do lines that are no
// event, redacted all the same.
func TestCapture(t *testing.T) {
	auth := `{"message":{"type":"requestSnapshot","requestState":{"request":{"headers":{"authorization":"Bearer sk-secret-123","accept":"*/*"}}}}}`
	authRed := `{"message":{"type":"requestSnapshot","requestState":{"request":{"headers":{"authorization":"Bearer ` + fp("sk-secret-123") + `","accept":"*/*"}}}}}`
	later := `{"message":{"type":"policy","reason":"key sk-secret-123 refused"}}`
	laterRed := `{"message":{"type":"policy","reason":"key ` + fp("sk-secret-123") + ` refused"}}`
	done := `{"message":{"type":"requestFinished"}}`
	for _, tt := range []struct {
		name, in, want string
		stats          CaptureStats
	}{
		{"JSON Lines", auth + "\n" + later + "\n" + done + "\n" + later + "\n",
			authRed + "\n" + laterRed + "\n" + done + "\n" + later + "\n", CaptureStats{Events: 4, Redacted: 2}},
		{"CRLF, no last newline", auth + "\r\n" + done, authRed + "\r\n" + done, CaptureStats{Events: 2, Redacted: 1}},
		{"SSE as curl saves it", ": ready\n\n: keepalive\n\ndata: " + auth + "\n\ndata: " + later + "\n\n",
			": ready\n\n: keepalive\n\ndata: " + authRed + "\n\ndata: " + laterRed + "\n\n", CaptureStats{Events: 2, Redacted: 2, Other: 6}},
		{"SSE without the space, a frame of three lines, a comment inside",
			"data:{\"message\":{\"type\":\"requestSnapshot\",\ndata:\"requestState\":{\"request\":{\"headers\":{\"cookie\":\"a=one-cookie\"}}}}}\n: keepalive\ndata: \n\n",
			"data: {\"message\":{\"type\":\"requestSnapshot\",\ndata: \"requestState\":{\"request\":{\"headers\":{\"cookie\":\"a=" + fp("one-cookie") + "\"}}}}}\n: keepalive\ndata: \n\n",
			CaptureStats{Events: 1, Redacted: 1, Other: 2}},
		{"a docs page's elided line", `{"message":{"requestState":{"request":{"headers":{"x-api-key":"abc", ...},...}}}` + "\n",
			`{"message":{"requestState":{"request":{"headers":{"x-api-key":"` + fp("abc") + `", ...},...}}}` + "\n", CaptureStats{Other: 1, OtherChanged: 1}},
		{"text", "$ curl -v -H 'Authorization: Basic dXNlcjpwYXNz' ...\n> Authorization: Basic dXNlcjpwYXNz\n",
			"$ curl -v -H 'Authorization: Basic " + fp("dXNlcjpwYXNz") + "' ...\n> Authorization: Basic " + fp("dXNlcjpwYXNz") + "\n", CaptureStats{Other: 2, OtherChanged: 2}},
		{"nothing to redact", ": ready\n\nevent: trace\nid: 1\ndata: " + done + "\n\n", ": ready\n\nevent: trace\nid: 1\ndata: " + done + "\n\n", CaptureStats{Events: 1, Other: 5}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			st := NewStream(New(Options{Key: testKey}))
			stats, err := st.Capture(&out, strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Errorf("Capture\n in   %q\n got  %q\n want %q", tt.in, out.String(), tt.want)
			}
			if stats != tt.stats {
				t.Errorf("stats %+v, want %+v", stats, tt.stats)
			}
		})
	}
}

// TestCaptureErrors: a line past the bound stops the copy with its
// number; read and write errors are returned.
func TestCaptureErrors(t *testing.T) {
	st := NewStream(New(Options{}))
	long := strings.Repeat("x", MaxCaptureLine+1)
	_, err := st.Capture(io.Discard, strings.NewReader("{}\n"+long+"\n"))
	var le *LineError
	if !errors.As(err, &le) || le.Line != 2 || !errors.Is(err, ErrLineTooLong) {
		t.Errorf("a line too long: %v, want line 2 too long", err)
	}
	_, err = st.Capture(io.Discard, strings.NewReader("data: "+long[:MaxCaptureLine/2]+"\ndata: "+long[:MaxCaptureLine/2]+"\n\n"))
	if !errors.Is(err, ErrLineTooLong) {
		t.Errorf("a frame too long: %v", err)
	}
	boom := errors.New("boom")
	if _, err := st.Capture(io.Discard, io.MultiReader(strings.NewReader("{}\n"), errReader{boom})); !errors.Is(err, boom) {
		t.Errorf("read error: %v", err)
	}
	if _, err := st.Capture(errWriter{boom}, strings.NewReader("{}\n")); !errors.Is(err, boom) {
		t.Errorf("write error: %v", err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

type errWriter struct{ err error }

func (e errWriter) Write([]byte) (int, error) { return 0, e.err }

// leash is a capture that Capture must not read far ahead of what it
// has written: Read fails when more than ahead bytes were read than
// written. It checks the copy streams, holding a bounded part of the
// capture whatever its length, without a clock.
type leash struct {
	r       io.Reader
	read    int64
	written *int64
	ahead   int64
}

func (l *leash) Read(p []byte) (int, error) {
	if l.read-*l.written > l.ahead {
		return 0, fmt.Errorf("read %d bytes and wrote %d: more than %d held", l.read, *l.written, l.ahead)
	}
	n, err := l.r.Read(p)
	l.read += int64(n)
	return n, err
}

type counter struct{ n *int64 }

func (c counter) Write(p []byte) (int, error) { *c.n += int64(len(p)); return len(p), nil }

// TestCaptureStreams: a capture of 100 000 events (ssetest's, each
// request carrying a credential, 40 MB) is redacted holding at most a few
// hundred KiB of it at once.
func TestCaptureStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("a million events")
	}
	lines, err := ssetest.Template()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() {
		// ssetest's capture, with a credential of its own in each request.
		bw := bufio.NewWriterSize(pw, 64<<10)
		for i := 0; i*len(lines) < 100_000; i++ {
			for _, l := range lines {
				fmt.Fprintf(bw, `{"requestId":"%016x",%s`+"\n", i, strings.Replace(l[1:], `"headers":{`, fmt.Sprintf(`"headers":{"authorization":"Bearer sk-%016x",`, i), 1))
			}
		}
		pw.CloseWithError(bw.Flush())
	}()
	var written int64
	st := NewStream(New(Options{}))
	stats, err := st.Capture(counter{&written}, &leash{r: pr, written: &written, ahead: 512 << 10})
	pr.Close()
	if err != nil {
		t.Fatal(err)
	}
	if stats.Events < 100_000 || stats.Redacted < stats.Events/4 {
		t.Errorf("stats %+v: want 100 000 events, a quarter redacted at least", stats)
	}
}

// FuzzCapture: whatever the capture, Capture does not fail below its
// bound, and what it wrote needs no redaction again (the framing it
// writes reads as it was read).
func FuzzCapture(f *testing.F) {
	f.Add(": ready\n\ndata: {\"message\":{\"headers\":{\"cookie\":\"a=b\"}}}\n\n")
	f.Add("data:{\"headers\":\ndata:{\"authorization\":\"Bearer x\"}}\r\n: c\r\ndata: \r\n\r\n")
	f.Add("{\"headers\":{\"x-api-key\":\"abc\", ...}}\n> Cookie: a=b\nerror: abc\n")
	f.Fuzz(func(t *testing.T, in string) {
		r := New(Options{Key: testKey})
		var once bytes.Buffer
		if _, err := NewStream(r).Capture(&once, strings.NewReader(in)); err != nil {
			t.Fatal(err)
		}
		var twice bytes.Buffer
		stats, err := NewStream(r).Capture(&twice, bytes.NewReader(once.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if twice.String() != once.String() {
			t.Fatalf("not idempotent:\n in    %q\n once  %q\n twice %q (%+v)", in, once.String(), twice.String(), stats)
		}
	})
}
