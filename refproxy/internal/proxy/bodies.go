// Response and request bodies on their way through: the read-ahead of a
// body of known length, the backend's body stream, the client's streamed
// request body.
package proxy

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/valyala/fasthttp"
)

// maxBufferedResponse is the largest response body forward reads whole
// before answering, and how much of a larger one of known length it reads
// ahead; bodies of unknown length stream through as they come.
const maxBufferedResponse = 16 << 10

// readBufs hold read-ahead bodies: one byte more than maxBufferedResponse,
// to read past a small body's end.
var readBufs = sync.Pool{New: func() any { return new([maxBufferedResponse + 1]byte) }}

// readAhead reads the first min(n, maxBufferedResponse) bytes of a body of
// length n into a pooled buffer; with whole (n fits), it reads on to the
// body's end, which also tells the backend's client that the connection can
// go back to the pool. On error the buffer is already returned.
func readAhead(body io.Reader, n int, whole bool) (buf *[maxBufferedResponse + 1]byte, k int, err error) {
	buf = readBufs.Get().(*[maxBufferedResponse + 1]byte)
	want := min(n, maxBufferedResponse)
	k, err = io.ReadFull(body, buf[:want])
	if err == io.EOF && want > 0 {
		err = io.ErrUnexpectedEOF
	}
	if err == nil && whole {
		if _, err = body.Read(buf[k : k+1]); err == io.EOF {
			err = nil
		} else if err == nil {
			err = errors.New("backend sent more than Content-Length")
		}
	}
	if err != nil {
		readBufs.Put(buf)
		return nil, 0, err
	}
	return buf, k, nil
}

// bodyError says what went wrong with a backend's body.
func bodyError(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return backendBodyError{fmt.Errorf("backend body cut short: %w", err)}
	}
	return backendBodyError{fmt.Errorf("backend body: %w", err)}
}

// backendBodyError marks a failure of the backend's body (bodyError), for
// the trace's cause.
type backendBodyError struct{ error }

func (e backendBodyError) Unwrap() error { return e.error }

// isBodyError reports whether err is a failure of the backend's body.
func isBodyError(err error) bool {
	var b backendBodyError
	return errors.As(err, &b)
}

// aheadBody is a body of known length whose first part was read ahead: it
// serves that part, then the rest, and returns the buffer on Close.
type aheadBody struct {
	buf    *[maxBufferedResponse + 1]byte
	off, n int
	rest   io.ReadCloser
}

func (a *aheadBody) Read(p []byte) (int, error) {
	if a.off < a.n {
		k := copy(p, a.buf[a.off:a.n])
		a.off += k
		return k, nil
	}
	return a.rest.Read(p)
}

func (a *aheadBody) Close() error {
	if a.buf != nil {
		readBufs.Put(a.buf)
		a.buf = nil
	}
	return a.rest.Close()
}

// upBody is the backend response's body stream; closing it returns the
// connection to the pool, or closes it when the body was not read to the end.
type upBody struct{ resp *fasthttp.Response }

func (b *upBody) Read(p []byte) (int, error) { return b.resp.BodyStream().Read(p) }

func (b *upBody) Close() error { return b.resp.CloseBodyStream() }

// clientBody is a client's streamed request body; it keeps the error
// reading it failed with.
type clientBody struct {
	r   io.Reader
	err error
}

func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// errReader is a body that fails with err: writing it aborts the response.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// readCloser reads from r and closes c.
type readCloser struct {
	io.Reader
	c io.Closer
}

func (rc readCloser) Close() error { return rc.c.Close() }
