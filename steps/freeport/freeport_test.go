package freeport

import (
	"errors"
	"net"
	"strconv"
	"testing"
)

func TestPickIsBelowTheEphemeralRange(t *testing.T) {
	lo, hi := Range()
	ports, err := Pick("127.0.0.1", 5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p < lo || p > hi {
			t.Errorf("port %d outside %d-%d", p, lo, hi)
		}
		if seen[p] {
			t.Errorf("port %d picked twice in %v", p, ports)
		}
		seen[p] = true
		// Released: the caller's program can bind it.
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d not released: %v", p, err)
			continue
		}
		l.Close()
	}
}

func TestRangeBelow(t *testing.T) {
	for _, tt := range []struct{ start, lo, hi int }{
		{32768, 10000, 32767}, // Linux's default
		{49152, 10000, 49151}, // IANA's
		{0, 10000, 32767},     // unknown
		{10500, 10000, 32767}, // too low to trust
	} {
		if lo, hi := rangeBelow(tt.start); lo != tt.lo || hi != tt.hi {
			t.Errorf("rangeBelow(%d) = %d, %d; want %d, %d", tt.start, lo, hi, tt.lo, tt.hi)
		}
	}
}

// TestNoFreePortsIsErrNoFreePorts: an address where nothing can listen
// (TEST-NET-1, not this machine's) gives no port, and says so as
// ErrNoFreePorts, which callers report as the suite's environment.
func TestNoFreePortsIsErrNoFreePorts(t *testing.T) {
	_, err := Pick("192.0.2.1", 1)
	if !errors.Is(err, ErrNoFreePorts) {
		t.Fatalf("Pick on an address not of this machine: %v, want ErrNoFreePorts", err)
	}
}
