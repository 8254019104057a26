package admin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gwdiag/gwdiag/refproxy/trace"
)

// Event is one trace event as received: Raw holds the exact JSON object of
// the SSE data frame (compacted), Event its decoded form.
type Event struct {
	Raw   json.RawMessage
	Event trace.Event
}

// Handler receives what a trace stream carries, in order. Any field may be nil.
type Handler struct {
	// Ready is called once, when the proxy has registered the watcher: on the
	// `: ready` comment, or on the first other frame from proxies that do not
	// send it.
	Ready func()
	// Event is called for every data frame.
	Event func(Event)
	// Dropped is called when the proxy announces `: dropped N events`.
	Dropped func(n int)
}

// ErrIncomplete is wrapped by Stream's error when the stream ended before
// requestFinished.
var ErrIncomplete = errors.New("trace stream ended before requestFinished")

// Client talks to one admin server.
type Client struct {
	// BaseURL is the admin server, e.g. http://127.0.0.1:15000.
	BaseURL string
	// HTTP is the client to use; nil means a client without timeout, since a
	// watch may wait for a request for as long as the user likes.
	HTTP *http.Client
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{}
}

// OpenTrace registers a watcher on /debug/trace (POST, with ?expression= when
// expression is set; GET for older proxies that answer POST with 405) and
// returns the open response body. The caller must close it.
func (c *Client) OpenTrace(ctx context.Context, expression string) (io.ReadCloser, error) {
	u := c.BaseURL + "/debug/trace"
	if expression != "" {
		u += "?expression=" + url.QueryEscape(expression)
	}
	resp, err := c.do(ctx, http.MethodPost, u)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusMethodNotAllowed && expression == "" {
		resp.Body.Close()
		if resp, err = c.do(ctx, http.MethodGet, u); err != nil {
			return nil, err
		}
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, statusError(u, resp)
	}
	return resp.Body, nil
}

func (c *Client) do(ctx context.Context, method, u string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, fmt.Errorf("admin request %s: %w", u, err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.http().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("cannot reach the admin server at %s (is the proxy running? set --admin-url or --proxy-admin-port): %w", c.BaseURL, err)
	}
	return resp, nil
}

func statusError(u string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	msg := strings.TrimSpace(string(b))
	if msg == "" {
		return fmt.Errorf("admin server answered %s for %s", resp.Status, u)
	}
	return fmt.Errorf("admin server answered %s for %s: %s", resp.Status, u, msg)
}

// ReadStream parses SSE frames from r and hands them to h until the stream
// ends. It returns nil when the stream carried requestFinished, an error
// wrapping ErrIncomplete when it ended before, or the read or decode error.
func ReadStream(r io.Reader, h Handler) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 16*1024*1024) // events can be large; most are small
	var data bytes.Buffer
	haveData, ready, finished := false, false, false
	count := 0
	markReady := func() {
		if !ready {
			ready = true
			if h.Ready != nil {
				h.Ready()
			}
		}
	}
	dispatch := func() error {
		if !haveData {
			return nil
		}
		raw := append([]byte(nil), data.Bytes()...)
		data.Reset()
		haveData = false
		markReady()
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil {
			return fmt.Errorf("trace event %d is not JSON: %w", count+1, err)
		}
		ev, err := trace.Parse(compact.Bytes())
		if err != nil {
			return fmt.Errorf("trace event %d: %w", count+1, err)
		}
		count++
		if h.Event != nil {
			h.Event(Event{Raw: compact.Bytes(), Event: ev})
		}
		if ev.Type() == trace.RequestFinished {
			finished = true
		}
		return nil
	}
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		switch {
		case line == "":
			if err := dispatch(); err != nil {
				return err
			}
			if finished {
				// The stream ends after requestFinished; do not wait for an
				// EOF a slow or older proxy might never send.
				return nil
			}
		case strings.HasPrefix(line, ":"):
			comment := strings.TrimSpace(line[1:])
			if n, ok := strings.CutPrefix(comment, "dropped "); ok {
				if v, err := strconv.Atoi(strings.TrimSuffix(n, " events")); err == nil && h.Dropped != nil {
					h.Dropped(v)
				}
			}
			markReady()
		case strings.HasPrefix(line, "data:"):
			if haveData {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
			haveData = true
		default:
			// event:, id:, retry: carry nothing a trace needs.
		}
	}
	if err := sc.Err(); err != nil {
		if finished {
			return nil
		}
		return fmt.Errorf("%w (after %d events): %v", ErrIncomplete, count, err)
	}
	if err := dispatch(); err != nil {
		return err
	}
	if !finished {
		return fmt.Errorf("%w (after %d events)", ErrIncomplete, count)
	}
	return nil
}

// ConfigDump fetches /config_dump as raw JSON.
func (c *Client) ConfigDump(ctx context.Context) ([]byte, error) {
	u := c.BaseURL + "/config_dump"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the admin server at %s (is the proxy running? set --admin-url or --proxy-admin-port): %w", c.BaseURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(u, resp)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", u, err)
	}
	return b, nil
}
