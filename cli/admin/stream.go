package admin

import (
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
	"time"

	"github.com/gwdiag/gwdiag/golden/trace"
	"github.com/gwdiag/gwdiag/golden/trace/sse"
)

// Event is one trace event as received: Raw holds the exact JSON object of
// the SSE data frame (compacted), Event its decoded form (left zero by a
// HeaderOnly handler), Header what the follow checks read of it.
type Event struct {
	Raw    json.RawMessage
	Event  trace.Event
	Header trace.Header
}

// Handler receives what a trace stream carries, in order. Any field may be nil.
type Handler struct {
	// Ready is called once, when the proxy has registered the watcher: on the
	// `: ready` comment, or on the first other frame from proxies that do not
	// send it.
	Ready func()
	// Event is called for every data frame.
	Event func(Event)
	// HeaderOnly skips decoding each event whole: Event's Event is left
	// zero, its Raw and Header are set (trace.ParseHeader), with the same
	// errors for an event that is no trace event. For a reader that passes
	// events on as received (gwdiag trace --follow --raw).
	HeaderOnly bool
	// BorrowRaw lends Event's Raw rather than giving a copy: the reader's
	// buffer, valid only until Event returns. For a handler that writes
	// each event out and keeps none of its bytes (gwdiag trace --follow
	// --raw), so that reading an event allocates nothing for it.
	BorrowRaw bool
	// Dropped is called when the proxy announces `: dropped N events`.
	Dropped func(n int)
	// Follow reads a follow stream: past every requestFinished, to the end
	// the proxy gives it (max traces or its duration), which is then no
	// error.
	Follow bool
	// Comment is called for comment frames other than ready, keepalive and
	// dropped (a follow stream's ": ended with N traces incomplete").
	Comment func(text string)
	// Limits bounds what is read (zero fields: sse.DefaultLimits); in
	// follow mode the trace bounds apply to each trace.
	Limits sse.Limits
	// Idle is called before a read that may wait for the proxy (nothing of
	// the next frame has arrived yet): a handler that batches its output
	// flushes it there, so that what arrived is shown at once.
	Idle func()
}

// ErrIncomplete is wrapped by Stream's error when the stream ended before
// requestFinished.
var ErrIncomplete = errors.New("trace stream ended before requestFinished")

// Client talks to one admin server.
type Client struct {
	// BaseURL is the admin server, e.g. http://127.0.0.1:15000.
	BaseURL string
	// Hint says what to check when the admin server cannot be reached;
	// empty means the standalone hint (--admin-url, --proxy-admin-port).
	Hint string
	// HTTP is the client to use; nil means a client without timeout, since a
	// watch may wait for a request for as long as the user likes, that
	// refuses header blocks past Limits.HeaderBytes.
	HTTP *http.Client
	// Limits bounds what is read from the admin server (zero fields:
	// sse.DefaultLimits).
	Limits sse.Limits
	// Timeout bounds a one-shot request such as ConfigDump, body included;
	// 0 means DefaultTimeout. A trace stream has no such bound: its frames
	// are bounded by Limits.FrameTime.
	Timeout time.Duration
}

// defaultTimeout bounds a one-shot admin request: a config dump arrives in
// well under a second from a real proxy.
const defaultTimeout = 30 * time.Second

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Transport: c.Limits.Transport()}
}

// OpenTrace registers a watcher on /debug/trace (POST, with ?expression= when
// expression is set; GET for older proxies that refuse POST) and returns the
// open response body. The caller must close it.
func (c *Client) OpenTrace(ctx context.Context, expression string) (io.ReadCloser, error) {
	q := url.Values{}
	if expression != "" {
		q.Set("expression", expression)
	}
	return c.OpenTraceQuery(ctx, q)
}

// OpenTraceQuery is OpenTrace with the stream's query parameters
// (expression; follow, max and duration for a follow stream).
func (c *Client) OpenTraceQuery(ctx context.Context, q url.Values) (io.ReadCloser, error) {
	st, err := sse.OpenQuery(ctx, c.http(), c.BaseURL, q)
	var se *sse.StatusError
	switch {
	case errors.As(err, &se):
		return nil, statusError(se.URL, se.Status, se.Body)
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case sse.IsHeaderLimit(err):
		return nil, fmt.Errorf("%s/debug/trace: response header block exceeds %s", c.BaseURL, sse.Size(c.Limits.WithDefaults().HeaderBytes))
	case err != nil:
		return nil, c.unreachable(err)
	}
	return st.Response.Body, nil
}

func (c *Client) unreachable(err error) error {
	hint := c.Hint
	if hint == "" {
		hint = "is the proxy running? set --admin-url or --proxy-admin-port"
	}
	return fmt.Errorf("cannot reach the admin server at %s (%s): %w", c.BaseURL, hint, err)
}

func statusError(u string, code int, body string) error {
	status := strconv.Itoa(code) + " " + http.StatusText(code)
	if msg := strings.TrimSpace(body); msg != "" {
		return fmt.Errorf("admin server answered %s for %s: %s", status, u, msg)
	}
	return fmt.Errorf("admin server answered %s for %s", status, u)
}

// ReadStream parses SSE frames from r and hands them to h until the stream
// ends. It returns nil when the stream carried requestFinished, an error
// wrapping ErrIncomplete when it ended before, or the read or decode error.
// It returns right after requestFinished rather than waiting for an EOF a
// slow or older proxy might never send.
//
// Past a bound of h.Limits it stops and returns the *sse.LimitError (also
// wrapping ErrIncomplete); when r is also an io.Closer, a frame that takes
// longer than Limits.FrameTime closes it.
func ReadStream(r io.Reader, h Handler) error {
	frames := sse.NewReaderLimits(r, h.Limits)
	if c, ok := r.(io.Closer); ok {
		frames.CloseOnStall(c)
	}
	ready, count := false, 0
	var headers trace.HeaderReader // a request's snapshots share their states
	markReady := func() {
		if !ready {
			ready = true
			if h.Ready != nil {
				h.Ready()
			}
		}
	}
	for {
		if h.Idle != nil && !frames.Buffered() {
			h.Idle()
		}
		f, data, err := frames.NextBytes()
		if errors.Is(err, io.EOF) {
			if h.Follow {
				return nil
			}
			return fmt.Errorf("%w (after %d events)", ErrIncomplete, count)
		}
		if sse.IsLimit(err) {
			return fmt.Errorf("%w (after %d events): %w", ErrIncomplete, count, err)
		}
		if err != nil {
			return fmt.Errorf("%w (after %d events): %v", ErrIncomplete, count, err)
		}
		markReady()
		if f.IsComment {
			if n, ok := strings.CutPrefix(f.Comment, "dropped "); ok {
				if v, err := strconv.Atoi(strings.TrimSuffix(n, " events")); err == nil && h.Dropped != nil {
					h.Dropped(v)
				}
			} else if f.Comment != "ready" && f.Comment != "keepalive" && h.Comment != nil {
				h.Comment(f.Comment)
			}
			continue
		}
		var raw []byte
		var ev trace.Event
		var hd trace.Header
		if h.HeaderOnly {
			// One scan reads the header and tells whether the event is
			// compact already (a proxy writes it so).
			var compact bool
			if hd, compact, err = headers.Parse(data); err == nil {
				switch {
				case !compact:
					raw, err = compactJSON(data, false)
				case h.BorrowRaw:
					raw = data
				default:
					raw = bytes.Clone(data)
				}
			}
			if raw == nil {
				raw = data
			}
		} else {
			if raw, err = compactJSON(data, h.BorrowRaw); err != nil {
				return fmt.Errorf("trace event %d is not JSON: %w", count+1, err)
			}
			if ev, err = trace.Parse(raw); err == nil {
				hd = trace.HeaderOf(ev)
			}
		}
		if err != nil {
			// Compact data reaches Parse unchecked: JSON it refuses is
			// named as json.Compact names it.
			if cerr := json.Compact(new(bytes.Buffer), raw); cerr != nil {
				return fmt.Errorf("trace event %d is not JSON: %w", count+1, cerr)
			}
			return fmt.Errorf("trace event %d: %w", count+1, err)
		}
		count++
		if h.Event != nil {
			h.Event(Event{Raw: raw, Event: ev, Header: hd})
		}
		if hd.Type == trace.RequestFinished {
			if !h.Follow {
				return nil
			}
			frames.EndTrace()
		}
	}
}

// compactJSON returns data without whitespace between tokens, as
// json.Compact makes it (its error for data that is not JSON). A proxy
// writes its events compact already: data without whitespace outside its
// strings is passed on as it is (a copy, or data itself when borrow), and
// its validity left to trace.Parse, which checks it as strictly.
func compactJSON(data []byte, borrow bool) ([]byte, error) {
	if isCompact(data) {
		if borrow {
			return data, nil
		}
		return bytes.Clone(data), nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, data); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// isCompact reports whether data has no whitespace outside JSON strings.
// A string is skipped to its closing quote with bytes.IndexByte (a quote
// preceded by an odd run of backslashes is escaped): a trace event is
// mostly strings. An unterminated string ends the scan (trace.Parse
// refuses it). FuzzIsCompact holds it to a byte-by-byte scan.
func isCompact(data []byte) bool {
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			end := stringEnd(data, i+1)
			if end < 0 {
				return true
			}
			i = end
		case ' ', '\t', '\n', '\r':
			return false
		}
	}
	return true
}

// stringEnd is the index of the quote that closes a JSON string whose
// content starts at from, or -1.
func stringEnd(data []byte, from int) int {
	for j := from; ; {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		backslashes := 0
		for p := j - 1; p >= from && data[p] == '\\'; p-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return j
		}
		j++
	}
}

// ConfigDump fetches /config_dump as raw JSON, within Limits.BodyBytes and
// Timeout.
func (c *Client) ConfigDump(ctx context.Context) ([]byte, error) {
	return c.get(ctx, "/config_dump", "config dump")
}

// get reads one admin response whole, what naming it in errors: bounded in
// size and time, since the proxy on the other side may never end it.
func (c *Client) get(ctx context.Context, path, what string) ([]byte, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u := c.BaseURL + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http().Do(req)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, fmt.Errorf("%s: no answer within %s", u, timeout)
	}
	if sse.IsHeaderLimit(err) {
		return nil, fmt.Errorf("%s: response header block exceeds %s", u, sse.Size(c.Limits.WithDefaults().HeaderBytes))
	}
	if err != nil {
		return nil, c.unreachable(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, statusError(u, resp.StatusCode, string(body))
	}
	b, err := sse.ReadBody(resp.Body, c.Limits.BodyBytes, what)
	switch {
	case sse.IsLimit(err):
		return nil, fmt.Errorf("%s: %w", u, err)
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, fmt.Errorf("%s: %s did not arrive within %s (proxy sent %d bytes of it)", u, what, timeout, len(b))
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", u, err)
	}
	return b, nil
}
