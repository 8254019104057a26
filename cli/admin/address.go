// Package admin is the CLI's client for a proxy's admin server: where to find
// it (flags, environment, standalone config file), the /debug/trace SSE
// stream and /config_dump.
package admin

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// DefaultPort is the admin server port of spec part 4.
const DefaultPort = 15000

// addrEnv overrides config.adminAddr on the proxy, so the CLI honours it too.
const addrEnv = "ADMIN_ADDR"

// Options are the ways a user can name a standalone admin server, highest
// precedence first: URL, Port (when set explicitly), the ADMIN_ADDR
// environment variable, ConfigFile's config.adminAddr, then 127.0.0.1:Port.
type Options struct {
	URL        string // --admin-url
	Port       int    // --proxy-admin-port
	PortSet    bool   // whether --proxy-admin-port was given
	ConfigFile string // --config
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
}

// ResolveURL returns the admin server's base URL, e.g. http://127.0.0.1:15000.
func ResolveURL(o Options) (string, error) {
	if o.URL != "" {
		u, err := url.Parse(o.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return "", fmt.Errorf("invalid --admin-url %q: want http://host:port", o.URL)
		}
		return strings.TrimSuffix(u.String(), "/"), nil
	}
	if o.PortSet {
		if err := checkPort(o.Port); err != nil {
			return "", fmt.Errorf("invalid --proxy-admin-port: %w", err)
		}
		return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(o.Port)), nil
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if v := getenv(addrEnv); v != "" {
		if err := checkHostPort(v); err != nil {
			return "", fmt.Errorf("invalid %s %q: %w", addrEnv, v, err)
		}
		return "http://" + v, nil
	}
	if o.ConfigFile != "" {
		addr, err := configAdminAddr(o.ConfigFile)
		if err != nil {
			return "", err
		}
		if addr != "" {
			return "http://" + dialable(addr), nil
		}
	}
	port := o.Port
	if port == 0 {
		port = DefaultPort
	}
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// configAdminAddr reads config.adminAddr from a standalone config file; ""
// when the file does not set it. Errors name the file, line and field.
func configAdminAddr(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading config file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return "", nil
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return "", fmt.Errorf("%s:%d: the config file must be a mapping", path, top.Line)
	}
	cfg := mapValue(top, "config")
	if cfg == nil {
		return "", nil
	}
	if cfg.Kind != yaml.MappingNode {
		return "", fmt.Errorf("%s:%d: field config: want a mapping", path, cfg.Line)
	}
	addr := mapValue(cfg, "adminAddr")
	if addr == nil {
		return "", nil
	}
	if addr.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("%s:%d: field config.adminAddr: want a host:port string", path, addr.Line)
	}
	if err := checkHostPort(addr.Value); err != nil {
		return "", fmt.Errorf("%s:%d: field config.adminAddr %q: %w", path, addr.Line, addr.Value, err)
	}
	return addr.Value, nil
}

// dialable turns a listen address such as 0.0.0.0:15000 into one a client
// can connect to.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return net.JoinHostPort(host, port)
}

func mapValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func checkHostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return errors.New("want host:port")
	}
	if host == "" {
		return errors.New("want host:port with a host")
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("port %q is not a number", port)
	}
	return checkPort(p)
}

func checkPort(p int) error {
	if p < 1 || p > 65535 {
		return fmt.Errorf("port %d out of range 1-65535", p)
	}
	return nil
}
