package local

import (
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
)

// ReservePort's socket holds the port against connections and against
// other programs, and is not inherited by a program started meanwhile.
func TestReservePort(t *testing.T) {
	fd, port, err := ReservePort()
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("a connection to the reserved port %d was accepted", port)
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("another socket could listen on the reserved port %d", port)
	}
	// test(1) opens no file of its own: /dev/fd/N exists in it only if
	// the socket was inherited.
	if err := exec.Command("test", "!", "-e", "/dev/fd/"+strconv.Itoa(fd)).Run(); err != nil {
		t.Fatalf("a started program inherited the reserved socket (fd %d): %v", fd, err)
	}
}
