package kube

import (
	"fmt"
	"math/rand/v2"
	"net"
)

// LoopbackAddr picks a loopback address for a control plane (etcd, the
// API server and its controllers) in 127.64.0.0/10: clear of 127.0.0.1,
// where the machine's outgoing connections and port-0 listeners take
// ports of the kernel's ephemeral range at any moment, and of the low
// addresses tests pick by hand. All of 127.0.0.0/8 is on lo, and a
// connection to such an address still leaves from 127.0.0.1, so only the
// control plane binds ports on it.
func LoopbackAddr() string {
	n := rand.Uint32()
	return fmt.Sprintf("127.%d.%d.%d", 64+n%64, (n>>8)%256, 1+(n>>16)%254)
}

// FreePorts picks n distinct ports that nothing listens on at host (an
// address from LoopbackAddr). All n are held until the last is picked,
// so they differ, and released when it returns: the caller's programs
// bind them next.
func FreePorts(host string, n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
