package proxy

import (
	"io"
	"net"
	"syscall"
	"time"
)

// aLongTimeAgo is a deadline that makes a blocked read return at once.
var aLongTimeAgo = time.Unix(1, 0)

// watchClient notices a client that goes away while a streamed response
// waits on its backend, and then closes the backend stream, so that the
// call ends (and an LLM stream is charged) without waiting for the backend
// to send more. The server itself only notices on its next write.
//
// It waits for the client's connection to become readable and peeks: end
// of stream or an error means the client is gone; bytes (a pipelined next
// request) are left where they are and end the watch. stopWatch ends it
// when the response is done; the server then sets the connection's read
// deadline again before it reads the next request.
func (c *call) watchClient(conn net.Conn, upstream io.Reader) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return // TLS: no watch
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	closer, ok := upstream.(interface{ CloseWithError(error) error })
	if !ok {
		return
	}
	c.conn = conn
	c.watching = make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		gone := false
		var buf [1]byte
		err := raw.Read(func(fd uintptr) bool {
			n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if err == syscall.EAGAIN || err == syscall.EINTR {
				return false // nothing yet: wait until readable
			}
			gone = err != nil || n == 0
			return true
		})
		if err == nil && gone {
			_ = closer.CloseWithError(errClientGone)
		}
	}(c.watching)
}

// stopWatch ends the watch of watchClient and waits for it.
func (c *call) stopWatch() {
	if c.watching == nil {
		return
	}
	_ = c.conn.SetReadDeadline(aLongTimeAgo)
	<-c.watching
}

type clientGoneError struct{}

func (clientGoneError) Error() string { return "client closed the connection" }

var errClientGone error = clientGoneError{}
