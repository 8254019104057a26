// Package portforward forwards free loopback ports to ports of Kubernetes
// pods through the API server, with client-go's PortForwarder and kubectl's
// dialer (SPDY tunnelled over a websocket, plain SPDY as fallback). It is
// the one port-forward of the project: the CLI's cluster mode
// (cli/internal/connect) and the conformance suite's cluster target
// (steps/targets/cluster) both use it. It imports client-go only, nothing
// else of clusters/: the CLI imports no other package of clusters/.
package portforward

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	streamhttp "k8s.io/streaming/pkg/httpstream"
)

// DialFunc opens the streaming connection of a port-forward to the pod
// whose portforward subresource is at u. It is the seam between the
// forwarding logic (client-go's PortForwarder, which needs only a
// streaming Dialer) and the network, so tests can forward through an
// in-process server instead of an API server.
type DialFunc func(cfg *rest.Config, u *url.URL) (streamhttp.Dialer, error)

// DialKubernetes is kubectl 1.36's dialer: SPDY tunnelled over a websocket
// first, then plain SPDY when the server refuses the websocket upgrade (API
// servers older than 1.30, or proxies that do not pass websockets). Since
// client-go 0.36 the upgrade errors are k8s.io/streaming's: the fallback
// test must use that package (apimachinery's httpstream.IsUpgradeFailure
// never matches them, and the fallback would never happen).
func DialKubernetes(cfg *rest.Config, u *url.URL) (streamhttp.Dialer, error) {
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	spdyDialer := spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	wsDialer, err := portforward.NewSPDYOverWebsocketDialerForStreaming(u, cfg)
	if err != nil {
		return nil, err
	}
	return portforward.NewFallbackDialerForStreaming(wsDialer, spdyDialer, func(err error) bool {
		return streamhttp.IsUpgradeFailure(err) || streamhttp.IsHTTPSProxyError(err)
	}), nil
}

// Forward is one running port-forward: a listener on a free loopback port
// whose connections reach a port of a pod.
type Forward struct {
	addr string
	stop chan struct{}
	done chan error

	once sync.Once
}

// Addr is the forward's local end, 127.0.0.1:<port>.
func (f *Forward) Addr() string { return f.addr }

// Close stops the forward and waits until its listener is closed. It is
// safe to call twice.
func (f *Forward) Close() error {
	f.once.Do(func() {
		close(f.stop)
		<-f.done
	})
	return nil
}

// portForwardURL is the portforward subresource of pod namespace/name on the API
// server of cfg.
func portForwardURL(cfg *rest.Config, namespace, name string) (*url.URL, error) {
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("API server address %q: %w", cfg.Host, err)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/v1/namespaces/" + url.PathEscape(namespace) + "/pods/" + url.PathEscape(name) + "/portforward"
	return u, nil
}

// Start forwards a free loopback port to port of pod namespace/name,
// through the API server of cfg, and returns once the local listener is
// up. dial nil means DialKubernetes. ctx bounds the start only; the
// forward runs until Close (or until the pod or the tunnel goes away).
func Start(ctx context.Context, cfg *rest.Config, dial DialFunc, namespace, name string, port int) (*Forward, error) {
	what := fmt.Sprintf("pod %s/%s port %d", namespace, name, port)
	u, err := portForwardURL(cfg, namespace, name)
	if err != nil {
		return nil, fmt.Errorf("port-forward to %s: %w", what, err)
	}
	if dial == nil {
		dial = DialKubernetes
	}
	dialer, err := dial(cfg, u)
	if err != nil {
		return nil, fmt.Errorf("port-forward to %s: %w", what, err)
	}
	f := &Forward{stop: make(chan struct{}), done: make(chan error, 1)}
	ready := make(chan struct{})
	// client-go reports per-connection trouble on errOut; a user of the
	// forward sees the failure as its own connection's error, so it is
	// dropped here (the CLI's viewer owns the terminal).
	pf, err := portforward.NewOnAddressesForStreaming(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(port)}, f.stop, ready, io.Discard, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("port-forward to %s: %w", what, err)
	}
	go func() { f.done <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-f.done:
		return nil, fmt.Errorf("port-forward to %s through the API server at %s failed: %w (the API server must reach the kubelet of the pod's node)", what, strings.TrimSuffix(cfg.Host, "/"), err)
	case <-ctx.Done():
		// The dial itself cannot be cancelled: do not wait for it (done is
		// buffered, so the forwarding goroutine ends on its own).
		close(f.stop)
		return nil, fmt.Errorf("port-forward to %s: %w", what, ctx.Err())
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		f.Close()
		return nil, fmt.Errorf("port-forward to %s: no local port (%v)", what, err)
	}
	f.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local)))
	return f, nil
}
