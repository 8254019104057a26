package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// FuzzReader feeds arbitrary bytes to the frame reader: it must end (EOF or
// an error) without panicking, a frame's data must come from data lines,
// and reading one byte at a time must give the same frames as reading whole.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		": ready\n\ndata: {\"a\":1}\n\n",
		"event: x\r\nid: 1\r\ndata: 1\r\n\r\n",
		"data: a\ndata: b\n\n",
		"data: z",
		": keepalive\n\n: dropped 2 events\n\ndata:\n\n",
		"\n\n\n:\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		whole := readAll(t, bytes.NewReader(in))
		byByte := readAll(t, iotest.OneByteReader(bytes.NewReader(in)))
		if len(whole) != len(byByte) {
			t.Fatalf("whole read gave %d frames, byte-by-byte %d: %+v vs %+v", len(whole), len(byByte), whole, byByte)
		}
		dataLines := 0
		for i := range whole {
			if whole[i] != byByte[i] {
				t.Fatalf("frame %d: whole %+v, byte-by-byte %+v", i, whole[i], byByte[i])
			}
			// Each line of a frame's data comes from a data line (empty
			// data lines make empty lines: "data:\ndata:" is "\n"), never
			// from across the blank line that ends a frame.
			if !whole[i].IsComment {
				dataLines += strings.Count(whole[i].Data, "\n") + 1
			}
		}
		if n := bytes.Count(in, []byte("data:")); dataLines > n {
			t.Fatalf("frames carry %d data lines, the input has %d: %+v", dataLines, n, whole)
		}
	})
}

func readAll(t *testing.T, r io.Reader) []Frame {
	t.Helper()
	fr := NewReader(r)
	var frames []Frame
	for i := 0; ; i++ {
		f, err := fr.Next()
		if errors.Is(err, io.EOF) {
			return frames
		}
		if err != nil {
			t.Fatalf("reading from memory: %v", err)
		}
		if i > 1<<20 {
			t.Fatal("reader does not end")
		}
		frames = append(frames, f)
	}
}

// FuzzReadCapture feeds arbitrary saved traces to the capture reader: it
// must end without panicking, give the same events and bad lines read
// whole and one byte at a time, deliver only events whose raw JSON parses,
// on increasing lines, and name only lines that exist.
func FuzzReadCapture(f *testing.F) {
	for _, s := range []string{
		"{\"eventEnd\":1}\n{oops\n",
		": ready\n\ndata: {\"eventEnd\":1}\n\n: keepalive\n\n",
		"data: {\"a\":\ndata: 1}\n\n{\"b\":2}\r\n",
		"  \n[1]\nevent: x\n{}",
	} {
		f.Add([]byte(s))
	}
	type result struct {
		lines []int
		bad   []int
		err   string
	}
	read := func(t *testing.T, r io.Reader) result {
		var res result
		err := ReadCapture(r, "f", func(c Captured) error {
			if _, perr := decode(c.Raw); perr != nil {
				t.Fatalf("line %d delivered but does not parse: %v", c.Line, perr)
			}
			res.lines = append(res.lines, c.Line)
			return nil
		})
		var ce *CaptureError
		if errors.As(err, &ce) {
			for _, b := range ce.Bad {
				res.bad = append(res.bad, b.Line)
			}
		} else if err != nil {
			res.err = err.Error()
		}
		return res
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		whole := read(t, bytes.NewReader(in))
		byByte := read(t, iotest.OneByteReader(bytes.NewReader(in)))
		if fmt.Sprint(whole) != fmt.Sprint(byByte) {
			t.Fatalf("whole %+v, byte by byte %+v", whole, byByte)
		}
		if whole.err != "" {
			t.Fatalf("reading from memory: %s", whole.err)
		}
		lines := bytes.Count(in, []byte("\n")) + 1
		for i, l := range append(slices.Clone(whole.lines), whole.bad...) {
			if l < 1 || l > lines {
				t.Fatalf("line %d of %d lines", l, lines)
			}
			if i > 0 && i < len(whole.lines) && l <= whole.lines[i-1] {
				t.Fatalf("events on lines %v: not increasing", whole.lines)
			}
		}
	})
}

// errWouldWait is what the stream gives once a test's bytes are all read:
// a reader that asks for more would have waited for the proxy.
var errWouldWait = errors.New("would wait for the stream")

// waitsAfter gives its bytes in one read, then errWouldWait.
type waitsAfter struct{ b []byte }

func (w *waitsAfter) Read(p []byte) (int, error) {
	if len(w.b) == 0 {
		return 0, errWouldWait
	}
	n := copy(p, w.b)
	w.b = w.b[n:]
	return n, nil
}

// FuzzFrameBuffered: for every prefix of the input that the reader holds
// in its buffer, frameBuffered says the next frame is whole only when
// reading it asks the stream for nothing more and gives the frame that
// reading the whole input gives (what lets it read without a clock).
func FuzzFrameBuffered(f *testing.F) {
	for _, s := range []string{
		": ready\n\ndata: {\"a\":1}\n\n",
		"event: x\r\nid: 1\r\ndata: 1\r\n\r\n",
		"data: a\ndata: b\n\n",
		"\n\n: keepalive\n\ndata: 1\n\ndata: 2",
		"id: 1\n\ndata:\n\n:\n",
		"data: a\r\n\r\n: dropped 2 events\r\n",
		"retry: 5\nevent: e\n\n\ndata: x\n\rdata: y\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 4096 {
			return
		}
		want := readAll(t, bytes.NewReader(in))
		for n := 1; n <= len(in); n++ {
			r := NewReader(&waitsAfter{b: in[:n]})
			if _, err := r.r.Peek(1); err != nil {
				t.Fatalf("prefix %d: %v", n, err)
			}
			if !r.frameBuffered() {
				continue
			}
			got, err := r.Next()
			if err != nil {
				t.Fatalf("prefix %q: frameBuffered, but reading the frame: %v", in[:n], err)
			}
			if len(want) == 0 || got != want[0] {
				t.Fatalf("prefix %q: frameBuffered, frame %+v; the whole input's first frame %+v", in[:n], got, want)
			}
		}
	})
}
