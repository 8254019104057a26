package llm

import (
	"compress/gzip"
	"errors"
	"io"
)

// gzipTap decodes a copy of a gzip body for the scanners while the encoded
// bytes pass through untouched. The decoding runs on its own goroutine,
// fed through a pipe, so the pass-through never waits for it.
type gzipTap struct {
	pw   *io.PipeWriter
	done chan struct{}
	err  error // decoding error, set before done is closed
}

// errTapEnded lets writes go on (and be ignored) once decoding stopped.
var errTapEnded = errors.New("gzip decoding ended")

func newGzipTap(feed func([]byte)) *gzipTap {
	pr, pw := io.Pipe()
	g := &gzipTap{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		zr, err := gzip.NewReader(pr)
		if err == nil {
			buf := make([]byte, 4096)
			for {
				n, rerr := zr.Read(buf)
				feed(buf[:n])
				if rerr != nil {
					err = rerr
					break
				}
			}
		}
		if err != io.EOF {
			g.err = err
		}
		// Corrupt data must not block the pass-through: later writes fail at once.
		pr.CloseWithError(errTapEnded)
	}()
	return g
}

// write hands encoded bytes to the decoder; it returns as soon as they are taken.
func (g *gzipTap) write(p []byte) { _, _ = g.pw.Write(p) }

// close ends the input (at EOF, or early with errTruncated) and waits for
// the decoder to finish.
func (g *gzipTap) close(eof bool) error {
	if eof {
		_ = g.pw.Close()
	} else {
		_ = g.pw.CloseWithError(errTruncated)
	}
	<-g.done
	return g.err
}
