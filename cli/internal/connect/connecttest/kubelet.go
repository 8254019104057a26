// Package connecttest provides an in-process stand-in for the kubelet side
// of a Kubernetes port-forward, so that the cluster connector's forwarding
// (client-go's PortForwarder over a real SPDY connection) can be tested
// where no kubelet runs.
package connecttest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	spdytransport "k8s.io/client-go/transport/spdy"
	streamhttp "k8s.io/streaming/pkg/httpstream"
)

// Kubelet serves the port-forward protocol (portforward.k8s.io, SPDY) the
// way a kubelet does for a pod, connecting each forwarded pod port to a
// local address instead of the pod's network namespace.
type Kubelet struct {
	ports map[int]string
	srv   *httptest.Server

	mu     sync.Mutex
	paths  []string
	served []string
	seen   []int
	conns  []httpstream.Connection
}

// NewKubelet starts a Kubelet that forwards pod port p to ports[p]. Stop it
// with Close.
func NewKubelet(ports map[int]string) *Kubelet {
	k := &Kubelet{ports: ports}
	// TLS, as a kubelet serves: an API server forwards to it over
	// https (without verifying it when given no kubelet CA).
	k.srv = httptest.NewTLSServer(http.HandlerFunc(k.serve))
	return k
}

// Endpoint returns the host and port the Kubelet listens on, for a Node's
// status.addresses and status.daemonEndpoints.kubeletEndpoint.
func (k *Kubelet) Endpoint() (string, int) {
	addr := k.srv.Listener.Addr().(*net.TCPAddr)
	return addr.IP.String(), addr.Port
}

// Close stops the server and drops open forward connections.
func (k *Kubelet) Close() {
	k.mu.Lock()
	for _, c := range k.conns {
		c.Close()
	}
	k.mu.Unlock()
	k.srv.Close()
}

// Dial is a connect.DialFunc: it ignores the API server of cfg and opens
// the forward to this Kubelet with client-go's SPDY dialer, recording the
// portforward URL the connector asked for.
func (k *Kubelet) Dial(_ *rest.Config, u *url.URL) (streamhttp.Dialer, error) {
	k.mu.Lock()
	k.paths = append(k.paths, u.Path)
	k.mu.Unlock()
	transport, upgrader, err := spdytransport.RoundTripperFor(&rest.Config{Host: k.srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		return nil, err
	}
	target, err := url.Parse(k.srv.URL + u.Path)
	if err != nil {
		return nil, err
	}
	return spdytransport.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, http.MethodPost, target), nil
}

// Direct returns a client config and URL that reach this Kubelet directly
// at path, for dialers under test. The Kubelet refuses websocket upgrades,
// as API servers before 1.30 do, and speaks SPDY only.
func (k *Kubelet) Direct(path string) (*rest.Config, *url.URL, error) {
	u, err := url.Parse(k.srv.URL + path)
	return &rest.Config{Host: k.srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, u, err
}

// Paths returns the portforward URL paths dialled so far through Dial, in
// order.
func (k *Kubelet) Paths() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.paths...)
}

// pair is the error and data stream of one forwarded connection.
type pair struct {
	errorStream, dataStream httpstream.Stream
}

type newStream struct {
	stream    httpstream.Stream
	replySent <-chan struct{}
}

// Ports returns the pod ports of the connections forwarded so far, in
// order.
func (k *Kubelet) Ports() []int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]int(nil), k.seen...)
}

// Served returns the paths of the port-forward requests this Kubelet has
// accepted (an API server asks for /portForward/<namespace>/<pod>).
func (k *Kubelet) Served() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.served...)
}

func (k *Kubelet) serve(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	k.served = append(k.served, r.URL.Path)
	k.mu.Unlock()
	if _, err := httpstream.Handshake(r, w, []string{portforward.PortForwardProtocolV1Name}); err != nil {
		return // Handshake has written the error response
	}
	streams := make(chan newStream, 16)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, replySent <-chan struct{}) error {
		streams <- newStream{s, replySent}
		return nil
	})
	if conn == nil {
		return
	}
	k.mu.Lock()
	k.conns = append(k.conns, conn)
	k.mu.Unlock()
	defer conn.Close()
	pairs := map[string]*pair{}
	for {
		select {
		case <-conn.CloseChan():
			return
		case ns := <-streams:
			<-ns.replySent
			h := ns.stream.Headers()
			id := h.Get(corev1.PortForwardRequestIDHeader)
			p := pairs[id]
			if p == nil {
				p = &pair{}
				pairs[id] = p
			}
			switch h.Get(corev1.StreamType) {
			case corev1.StreamTypeError:
				p.errorStream = ns.stream
			case corev1.StreamTypeData:
				p.dataStream = ns.stream
			default:
				ns.stream.Reset()
				continue
			}
			if p.errorStream != nil && p.dataStream != nil {
				delete(pairs, id)
				port, _ := strconv.Atoi(h.Get(corev1.PortHeader))
				go k.forward(p, port)
			}
		}
	}
}

// forward copies between one data stream and the local address of port,
// reporting failures on the error stream as a kubelet does.
func (k *Kubelet) forward(p *pair, port int) {
	k.mu.Lock()
	k.seen = append(k.seen, port)
	k.mu.Unlock()
	defer p.errorStream.Close()
	defer p.dataStream.Close()
	addr, ok := k.ports[port]
	if !ok {
		fmt.Fprintf(p.errorStream, "pod has no listener on port %d", port)
		return
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		fmt.Fprintf(p.errorStream, "failed to connect to port %d: %v", port, err)
		return
	}
	defer c.Close()
	done := make(chan struct{})
	go func() {
		// The client half-closes the data stream when its local side
		// is done sending; pass that on.
		io.Copy(c, p.dataStream)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		close(done)
	}()
	io.Copy(p.dataStream, c)
	p.dataStream.Close()
	<-done
}
