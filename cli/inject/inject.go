// Package inject sends the request of `gwdiag trace --port P -- <url> [curl
// args]` to a proxy listener: with the user's real curl when it is installed,
// otherwise with a built-in client that understands curl's common options.
// Either way the URL's host only sets the Host header; the connection always
// goes to the given listener address.
package inject

import (
	"bytes"
	"context"
	"encoding/base64"
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

// errNoURL is the agctl error for request args without a URL.
var errNoURL = errors.New("request args after -- must include at least one http:// or https:// URL")

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
	return Request{}, errNoURL
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
		return curl{Path: p}
	}
	return Builtin{}
}

// curl runs the user's curl, so that every curl option works.
type curl struct {
	Path string
}

// Command returns the curl command line for req sent to addr.
func (c curl) Command(req Request, addr string) ([]string, error) {
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
func (c curl) Send(ctx context.Context, req Request, addr string) (string, error) {
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

// header is a header the request's arguments set.
type header struct{ Name, Value string }

// Credentials are what the request's arguments send that may be a
// credential, so that gwdiag can keep it out of what it prints: the
// headers they set, as curl sends them (-H; -u/--user as Authorization:
// Basic; --oauth2-bearer as Authorization: Bearer; -b/--cookie with a
// name=value as Cookie; --proxy-user as Proxy-Authorization; the URL's
// user info as Authorization: Basic), and the passwords of -u, --proxy-user
// and the URL as they are.
func (r Request) Credentials() (headers []header, secrets []string) {
	basic := func(name, userPass string) {
		headers = append(headers, header{name, "Basic " + base64.StdEncoding.EncodeToString([]byte(userPass))})
		secrets = append(secrets, userPass)
		if _, pass, ok := strings.Cut(userPass, ":"); ok && pass != "" {
			secrets = append(secrets, pass)
		}
	}
	if u := r.URL.User; u != nil {
		pass, _ := u.Password()
		basic("Authorization", u.Username()+":"+pass)
	}
	for i := 0; i < len(r.Args); i++ {
		opt, val, inline := splitOption(r.Args[i])
		if !inline {
			if i+1 >= len(r.Args) {
				break
			}
			val = r.Args[i+1]
		}
		consumed := true
		switch opt {
		case "-H", "--header", "--proxy-header":
			if name, value, ok := strings.Cut(val, ":"); ok {
				headers = append(headers, header{strings.TrimSpace(name), strings.TrimSpace(value)})
			}
		case "-u", "--user":
			basic("Authorization", val)
		case "-U", "--proxy-user":
			basic("Proxy-Authorization", val)
		case "--oauth2-bearer":
			headers = append(headers, header{"Authorization", "Bearer " + val})
		case "-b", "--cookie":
			if strings.Contains(val, "=") {
				headers = append(headers, header{"Cookie", val})
			}
		default:
			consumed = takesValue(opt)
		}
		if consumed && !inline {
			i++
		}
	}
	return headers, secrets
}
