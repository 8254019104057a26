// Package connect finds the proxy a command talks to: a standalone proxy on
// this machine (--local), or a gateway's proxy pod in a cluster reached
// through port-forwards. Commands depend only on Connector, so cluster
// support slots in without changing them.
package connect

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Connector gives the addresses at which a proxy's admin server and
// listeners are reachable from this machine.
type Connector interface {
	// AdminURL returns the admin server's base URL (http://host:port).
	AdminURL(ctx context.Context) (string, error)
	// Listener returns host:port at which the proxy's listener port is
	// reachable (127.0.0.1:port standalone, a forwarded port in a cluster).
	Listener(ctx context.Context, port int) (string, error)
	// Close releases port-forwards and the like.
	Close() error
}

// AdminHint returns what a user should check when conn's admin URL does
// not answer, for connectors that know better than the standalone hint;
// otherwise "".
func AdminHint(conn Connector) string {
	if h, ok := conn.(interface{ AdminHint() string }); ok {
		return h.AdminHint()
	}
	return ""
}

// Local is a standalone proxy on this machine.
type Local struct {
	// Admin is the admin server's base URL.
	Admin string
}

// AdminURL returns l.Admin.
func (l Local) AdminURL(context.Context) (string, error) { return l.Admin, nil }

// Listener returns 127.0.0.1:port: standalone mode always sends there.
func (l Local) Listener(_ context.Context, port int) (string, error) {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// Close does nothing.
func (Local) Close() error { return nil }

// Resource is a cluster resource argument `type/name[.namespace]`.
type Resource struct {
	Kind      string // "gateway"
	Name      string
	Namespace string // "" when not given in the argument
}

// String returns the resource as the user writes it.
func (r Resource) String() string {
	s := r.Kind + "/" + r.Name
	if r.Namespace != "" {
		s += "." + r.Namespace
	}
	return s
}

// kinds maps the accepted spellings of a resource type to its kind.
var kinds = map[string]string{
	"gateway": "gateway", "gateways": "gateway", "gw": "gateway",
}

// ParseResource parses `type/name[.namespace]`, e.g. gateway/my-gw or
// gateway/my-gw.prod.
func ParseResource(s string) (Resource, error) {
	typ, rest, ok := strings.Cut(s, "/")
	if !ok || typ == "" || rest == "" {
		return Resource{}, fmt.Errorf("invalid resource %q: want type/name[.namespace], e.g. gateway/my-gateway", s)
	}
	kind, ok := kinds[strings.ToLower(typ)]
	if !ok {
		return Resource{}, fmt.Errorf("invalid resource %q: unsupported type %q (supported: gateway)", s, typ)
	}
	name, ns, _ := strings.Cut(rest, ".")
	if name == "" || strings.Contains(ns, "/") || strings.Contains(name, "/") {
		return Resource{}, fmt.Errorf("invalid resource %q: want type/name[.namespace], e.g. gateway/my-gateway", s)
	}
	return Resource{Kind: kind, Name: name, Namespace: ns}, nil
}
