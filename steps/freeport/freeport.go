// Package freeport picks TCP ports for programs the suite starts and that
// bind the ports they are told (a proxy run as a process, the rate-limit
// service).
//
// A port is free when picked but not held: the program binds it later.
// Ports of the kernel's ephemeral range (net.ipv4.ip_local_port_range) are
// the wrong ones to pick: once freed, any listener on port 0 or outgoing
// connection of the machine may take one before the program binds it, and
// a readiness check that only dials then finds the wrong program ready
// (a parallel run did: requests to a proxy answered by another scenario's
// server). Pick takes ports below that range, which only those who name
// them take.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
)

// ErrNoFreePorts: Pick found too few free ports. It is the machine's
// state, not a program's fault: callers report it as the suite's
// environment (targets.Missing).
var ErrNoFreePorts = errors.New("no free ports")

// maxTries bounds the random draws of one Pick.
const maxTries = 200

// Pick returns n distinct ports free on host (an IP address), drawn at
// random from Range. They are held while Pick runs, so the n differ, and
// released when it returns.
func Pick(host string, n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	lo, hi := Range()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == maxTries {
			return nil, fmt.Errorf("%w: %d wanted on %s from %d to %d, none free in %d tries", ErrNoFreePorts, n, host, lo, hi, tries)
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(lo+rand.IntN(hi-lo+1))))
		if err != nil {
			continue // taken
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Range is the ports Pick draws from: from 10000 to the port before the
// ephemeral range (Linux's default starts at 32768).
func Range() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return rangeBelow(0)
	}
	var start, end int
	if _, err := fmt.Sscan(string(b), &start, &end); err != nil {
		return rangeBelow(0)
	}
	return rangeBelow(start)
}

// rangeBelow is the range below an ephemeral range starting at start (0:
// unknown); a range starting too low to leave a thousand ports above 10000
// is not trusted.
func rangeBelow(start int) (lo, hi int) {
	lo, hi = 10000, 32767
	if start-1 >= lo+1000 {
		hi = start - 1
	}
	return lo, hi
}
