// Package inject sends the request of `gwdiag trace --port P -- <url> [curl
// args]` to a proxy listener: with the user's real curl when it is installed,
// otherwise with a built-in client that understands curl's common options.
// Either way the URL's host only sets the Host header; the connection always
// goes to the given listener address.
package inject

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"strings"
)

// Request is what the user asked to send: the URL and the other curl arguments.
type Request struct {
	URL  *url.URL
	Args []string // curl arguments other than the URL, in order
}

// ErrNoURL is the agctl error for request args without a URL.
var ErrNoURL = errors.New("request args after -- must include at least one http:// or https:// URL")

// ParseArgs splits the arguments after `--` into the first http:// or
// https:// URL and the remaining curl arguments.
func ParseArgs(args []string) (Request, error) {
	for i, a := range args {
		if !strings.HasPrefix(a, "http://") && !strings.HasPrefix(a, "https://") {
			continue
		}
		// An argument of -H, -d and the like is a value, not the URL.
		if i > 0 && takesValue(args[i-1]) {
			continue
		}
		u, err := url.Parse(a)
		if err != nil || u.Host == "" {
			return Request{}, fmt.Errorf("invalid request URL %q: want http://host[:port]/path", a)
		}
		rest := append(append([]string(nil), args[:i]...), args[i+1:]...)
		return Request{URL: u, Args: rest}, nil
	}
	return Request{}, ErrNoURL
}

// takesValue reports whether a curl short or long option consumes the next
// argument, for the options a URL could follow as a value (e.g. -e/--referer).
func takesValue(opt string) bool {
	switch opt {
	case "-X", "--request", "-H", "--header", "-d", "--data", "--data-raw", "--data-binary",
		"--data-urlencode", "--json", "-u", "--user", "-A", "--user-agent", "-e", "--referer",
		"-x", "--proxy", "-o", "--output", "--url":
		return true
	}
	return false
}

// HostPort returns the URL's host and port, the port defaulted from the scheme.
func (r Request) HostPort() (host, port string) {
	host, port = r.URL.Hostname(), r.URL.Port()
	if port == "" {
		port = "80"
		if r.URL.Scheme == "https" {
			port = "443"
		}
	}
	return host, port
}

// Sender sends a Request to a listener address (127.0.0.1:P). The returned
// text is what the sender printed (curl's -v output, for example), if any.
type Sender interface {
	Send(ctx context.Context, req Request, addr string) (string, error)
}

// NewSender returns a Curl sender when curl is on PATH, else the Builtin one.
func NewSender() Sender {
	if p, err := exec.LookPath("curl"); err == nil {
		return Curl{Path: p}
	}
	return Builtin{}
}

// Curl runs the user's curl, so that every curl option works.
type Curl struct {
	Path string
}

// Command returns the curl command line for req sent to addr.
func (c Curl) Command(req Request, addr string) ([]string, error) {
	lhost, lport, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listener address %q: %w", addr, err)
	}
	host, port := req.HostPort()
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	argv := []string{c.Path, "--silent", "--show-error", "--output", "/dev/null"}
	argv = append(argv, req.Args...)
	argv = append(argv, req.URL.String(), "--connect-to", host+":"+port+":"+lhost+":"+lport)
	return argv, nil
}

// Send runs curl and waits for it.
func (c Curl) Send(ctx context.Context, req Request, addr string) (string, error) {
	argv, err := c.Command(req, addr)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if msg == "" {
			return "", fmt.Errorf("sending the request with curl failed: %w", err)
		}
		return "", fmt.Errorf("sending the request with curl failed (%v): %s", err, msg)
	}
	return out.String(), nil
}
