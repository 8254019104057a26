package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// FuzzReader feeds arbitrary bytes to the frame reader: it must end (EOF or
// an error) without panicking, every frame must be a comment or carry data,
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
		for i := range whole {
			if whole[i] != byByte[i] {
				t.Fatalf("frame %d: whole %+v, byte-by-byte %+v", i, whole[i], byByte[i])
			}
			if !whole[i].IsComment && strings.Contains(whole[i].Data, "\n\n") {
				t.Fatalf("frame %d data spans a frame boundary: %q", i, whole[i].Data)
			}
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
