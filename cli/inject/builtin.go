package inject

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"strings"
)

// Builtin sends the request with net/http when curl is not installed. It
// understands -X/--request, -H/--header, -d/--data/--data-raw/--data-binary,
// --json, -u/--user and -A/--user-agent, and refuses anything else with an
// error, since silently ignoring an option would trace a different request.
type Builtin struct{}

// builtinOptions are the options the built-in client understands; each
// takes a value.
var builtinOptions = map[string]struct{}{
	"-X": {}, "--request": {}, "-H": {}, "--header": {}, "-d": {}, "--data": {}, "--data-binary": {},
	"--data-raw": {}, "--json": {}, "-u": {}, "--user": {}, "-A": {}, "--user-agent": {},
}

// supported lists the options the built-in client understands, for errors.
const supported = "-X, -H, -d/--data/--data-raw/--data-binary, --json, -u, -A"

type builtinRequest struct {
	method      string
	headers     http.Header
	body        []string
	json        bool
	form        bool
	user        string
	userAgent   string
	hasUA       bool
	contentType bool
}

// Build turns req into the *http.Request the built-in client would send.
func (Builtin) Build(ctx context.Context, req Request) (*http.Request, error) {
	b := builtinRequest{headers: http.Header{}}
	args := req.Args
	for i := 0; i < len(args); i++ {
		opt, val, inline := splitOption(args[i])
		if _, known := builtinOptions[opt]; known && !inline {
			if i+1 >= len(args) {
				return nil, fmt.Errorf("curl option %s needs a value", opt)
			}
			i++
			val = args[i]
		}
		var err error
		switch opt {
		case "-X", "--request":
			b.method = val
		case "-H", "--header":
			err = b.addHeader(val)
		case "-d", "--data", "--data-binary", "--data-raw", "--json":
			if val, err = readData(opt, val); err == nil {
				b.body = append(b.body, val)
				b.json = b.json || opt == "--json"
				b.form = b.form || opt != "--json"
			}
		case "-u", "--user":
			b.user = val
		case "-A", "--user-agent":
			b.userAgent, b.hasUA = val, true
		default:
			if strings.HasPrefix(args[i], "-") {
				return nil, fmt.Errorf("curl is not installed and the built-in client does not support option %s (it supports %s); install curl to use it", opt, supported)
			}
			return nil, fmt.Errorf("curl is not installed and the built-in client takes one URL; unexpected argument %q", args[i])
		}
		if err != nil {
			return nil, err
		}
	}
	method := b.method
	var body io.Reader
	var bodyText string
	if len(b.body) > 0 {
		if b.json {
			bodyText = strings.Join(b.body, "")
		} else {
			bodyText = strings.Join(b.body, "&")
		}
		body = strings.NewReader(bodyText)
		if method == "" {
			method = http.MethodPost
		}
	}
	if method == "" {
		method = http.MethodGet
	}
	hr, err := http.NewRequestWithContext(ctx, method, req.URL.String(), body)
	if err != nil {
		return nil, fmt.Errorf("building the request: %w", err)
	}
	for k, vs := range b.headers {
		if k == "Host" {
			hr.Host = vs[0]
			continue
		}
		hr.Header[k] = vs
	}
	if !b.hasUA {
		b.userAgent = "gwdiag"
	}
	hr.Header.Set("User-Agent", b.userAgent)
	if hr.Header.Get("Accept") == "" && !b.json {
		hr.Header.Set("Accept", "*/*")
	}
	if b.json {
		if !b.contentType {
			hr.Header.Set("Content-Type", "application/json")
		}
		if hr.Header.Get("Accept") == "" {
			hr.Header.Set("Accept", "application/json")
		}
	} else if b.form && !b.contentType {
		hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if b.user != "" {
		hr.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(b.user)))
	}
	return hr, nil
}

// addHeader takes one -H value as curl does: "Name: value" added, "Name:"
// removing a header curl would send, Host and User-Agent kept apart.
func (b *builtinRequest) addHeader(v string) error {
	name, value, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(name) == "" {
		// Not quoted whole: a header written without its colon
		// ("Authorization Bearer sk-...") holds a credential.
		shown := strings.TrimSpace(v)
		if first, _, cut := strings.Cut(shown, " "); cut {
			shown = first + " ..."
		}
		return fmt.Errorf("invalid header %q: want 'Name: value'", shown)
	}
	name = textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(name))
	value = strings.TrimSpace(value)
	switch {
	case name == "Host":
		b.headers.Set("Host", value)
	case name == "User-Agent":
		b.userAgent, b.hasUA = value, true
	case value == "":
		// curl: "-H 'Name:'" removes a header it would send.
		b.headers.Del(name)
	default:
		b.headers.Add(name, value)
	}
	if name == "Content-Type" {
		b.contentType = true
	}
	return nil
}

// readData is a data option's value: @file read (a file given to -d or
// --data lost its line breaks, as curl strips them), else as it is.
func readData(opt, v string) (string, error) {
	if opt == "--data-raw" || !strings.HasPrefix(v, "@") {
		return v, nil
	}
	data, err := os.ReadFile(v[1:])
	if err != nil {
		return "", fmt.Errorf("curl option %s: %w", opt, err)
	}
	v = string(data)
	if opt == "-d" || opt == "--data" {
		v = strings.NewReplacer("\r", "", "\n", "").Replace(v)
	}
	return v, nil
}

// splitOption splits the "-XPOST" form into option and value, as curl does
// for short options; long options (curl has no --opt=value form) are whole.
func splitOption(a string) (opt, val string, inline bool) {
	if !strings.HasPrefix(a, "--") && strings.HasPrefix(a, "-") && len(a) > 2 {
		return a[:2], a[2:], true
	}
	return a, "", false
}

// Send sends the request to addr, never resolving the URL's host, and does
// not follow redirects, as curl does not by default.
func (bl Builtin) Send(ctx context.Context, req Request, addr string) (string, error) {
	hr, err := bl.Build(ctx, req)
	if err != nil {
		return "", err
	}
	dialer := &net.Dialer{}
	client := &http.Client{
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return dialer.DialContext(ctx, network, addr)
			},
			TLSClientConfig:   &tls.Config{ServerName: req.URL.Hostname()},
			DisableKeepAlives: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(hr)
	if err != nil {
		return "", fmt.Errorf("sending the request to %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return "", fmt.Errorf("reading the response from %s: %w", addr, err)
	}
	return "", nil
}
