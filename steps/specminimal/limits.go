package specminimal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// limiter keeps a fixed window per route limit: the count restarts at each
// multiple of the limit's unit since the proxy started.
type limiter struct {
	start   time.Time
	mu      sync.Mutex
	windows map[*Route][]*window
}

type window struct {
	lim  Limit
	idx  int64 // which window the count is of
	used uint64
	end  time.Time
}

func (l *limiter) windowsOf(rt *Route, now time.Time) []*window {
	if l.windows == nil {
		l.windows = map[*Route][]*window{}
	}
	ws, ok := l.windows[rt]
	if !ok {
		for _, lim := range rt.Limits {
			ws = append(ws, &window{lim: lim, idx: -1})
		}
		l.windows[rt] = ws
	}
	for _, w := range ws {
		idx := int64(now.Sub(l.start) / w.lim.Unit)
		if idx != w.idx {
			w.idx, w.used = idx, 0
			w.end = l.start.Add(time.Duration(idx+1) * w.lim.Unit)
		}
	}
	return ws
}

// refusal is the limit that refused a request, for its headers.
type refusal struct {
	ceiling uint64
	end     time.Time
}

// admit checks every limit of the route, then counts the request in the
// request limits; a refused request counts nowhere.
func (l *limiter) admit(rt *Route, now time.Time) *refusal {
	l.mu.Lock()
	defer l.mu.Unlock()
	ws := l.windowsOf(rt, now)
	for _, w := range ws {
		ceiling := w.lim.Amount + w.lim.Burst
		if w.lim.Tokens {
			ceiling = w.lim.Amount
		}
		if w.used >= ceiling {
			return &refusal{ceiling: ceiling, end: w.end}
		}
	}
	for _, w := range ws {
		if !w.lim.Tokens {
			w.used++
		}
	}
	return nil
}

// charge adds a response's tokens to the route's token limits.
func (l *limiter) charge(rt *Route, tokens uint64, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.windowsOf(rt, now) {
		if w.lim.Tokens {
			w.used += tokens
		}
	}
}

// writeHeaders sets the x-ratelimit-* headers of a 429.
func (r *refusal) writeHeaders(h http.Header, now time.Time) {
	h.Set("X-Ratelimit-Limit", fmt.Sprint(r.ceiling))
	h.Set("X-Ratelimit-Remaining", "0")
	h.Set("X-Ratelimit-Reset", fmt.Sprintf("%.1f", max(r.end.Sub(now).Seconds(), 0)))
}

func hasTokenLimit(rt Route) bool {
	for _, l := range rt.Limits {
		if l.Tokens {
			return true
		}
	}
	return false
}

// usageBody passes an LLM response body on as it comes and, once it has
// ended, reports its usage: the JSON body's, or the last usage of an event
// stream's data chunks. The end is seen at the read that reaches it (EOF, or
// the last byte of a known length), before those bytes go on to the client,
// so that the client's next request meets the charged window; a body the
// client abandons is reported at Close with what was seen.
type usageBody struct {
	r      io.ReadCloser
	stream bool
	left   int64        // bytes still to come of a known length, else -1
	json   bytes.Buffer // a JSON body, kept (up to maxKept) to read its usage at the end
	line   bytes.Buffer // the event stream's current line
	usage  uint64
	report func(uint64)
	once   sync.Once
}

// maxKept bounds what a usage body keeps of a JSON answer or of one line.
const maxKept = 1 << 20

func newUsageBody(r io.ReadCloser, contentType string, length int64, report func(uint64)) io.ReadCloser {
	return &usageBody{r: r, stream: strings.HasPrefix(contentType, "text/event-stream"), left: length, report: report}
}

func (u *usageBody) Read(p []byte) (int, error) {
	n, err := u.r.Read(p)
	u.scan(p[:n])
	if u.left >= 0 {
		u.left -= int64(n)
	}
	if err == io.EOF || u.left == 0 {
		u.finish()
	}
	return n, err
}

// scan keeps a JSON body, or notes the usage of each data line of a stream.
func (u *usageBody) scan(b []byte) {
	if !u.stream {
		if u.json.Len() < maxKept {
			u.json.Write(b)
		}
		return
	}
	for len(b) > 0 {
		line, rest, full := bytes.Cut(b, []byte("\n"))
		if u.line.Len() < maxKept {
			u.line.Write(line)
		}
		if !full {
			return
		}
		u.endLine()
		b = rest
	}
}

func (u *usageBody) endLine() {
	if data, ok := bytes.CutPrefix(bytes.TrimSpace(u.line.Bytes()), []byte("data:")); ok {
		if t, ok := usageOf(bytes.TrimSpace(data)); ok {
			u.usage = t
		}
	}
	u.line.Reset()
}

// finish reports the usage, once.
func (u *usageBody) finish() {
	u.once.Do(func() {
		if u.stream {
			u.endLine() // a last line with no newline
		} else {
			u.usage, _ = usageOf(u.json.Bytes())
		}
		u.report(u.usage)
	})
}

// Close reports the usage if the end was not read.
func (u *usageBody) Close() error {
	err := u.r.Close()
	u.finish()
	return err
}

// usageOf reads total_tokens (or prompt + completion) of an OpenAI answer.
func usageOf(b []byte) (uint64, bool) {
	var v struct {
		Usage *struct {
			Prompt     uint64 `json:"prompt_tokens"`
			Completion uint64 `json:"completion_tokens"`
			Total      uint64 `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.Usage == nil {
		return 0, false
	}
	if v.Usage.Total > 0 {
		return v.Usage.Total, true
	}
	return v.Usage.Prompt + v.Usage.Completion, true
}
