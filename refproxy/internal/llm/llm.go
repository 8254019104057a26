// Package llm reads what the rate limiter needs from OpenAI-style LLM traffic:
// it asks streaming requests to report usage, and finds usage in JSON and SSE
// response bodies without buffering or delaying them.
//
// Response bodies are scanned as they pass through, byte by byte, by a small
// state machine that only keeps the top-level "usage" value (at most
// maxUsageSize bytes) of a JSON document or of each SSE event, so memory stays
// bounded whatever the size of the response or of its lines.
//
// Files: llm.go (the API: requests, Watch, Usage), watch.go (the
// body tee that feeds the scanners), jsonscan.go (the JSON scanner that
// keeps the usage value), ssescan.go (the SSE scanner that feeds it per
// event), usage.go (one-pass validation and reading of the usage counts),
// gziptap.go (decoding a gzip body for the scanners off the copy path).
package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"strings"
)

// Usage is the token count of one LLM response.
type Usage struct {
	PromptTokens     uint64
	CompletionTokens uint64
}

// Total is prompt plus completion tokens: what a tokens bucket is charged.
func (u Usage) Total() uint64 { return u.PromptTokens + u.CompletionTokens }

// Errors passed to Watch's done, wrapped with details; test with errors.Is.
var (
	// errNoUsage: the response carried no usage (or "usage": null).
	errNoUsage = errors.New("no usage in LLM response")
	// errMalformedUsage: usage is not an object of non-negative integer token counts.
	errMalformedUsage = errors.New("malformed usage in LLM response")
	// errTruncated: the body ended (or the client went away) before the JSON
	// document or the SSE event carrying usage was complete.
	errTruncated = errors.New("truncated LLM response")
	// errUnsupportedEncoding: the body has a Content-Encoding other than
	// gzip or identity (br, zstd, deflate), so its usage cannot be read.
	errUnsupportedEncoding = errors.New("unsupported Content-Encoding of LLM response")
)

// maxUsageSize bounds the bytes kept of one "usage" value; a larger one is malformed.
const maxUsageSize = 64 << 10

// MaxRequestSize bounds the request bodies ReadBody reads to decide;
// a larger body is forwarded untouched.
const MaxRequestSize = 16 << 20

// ReadBody reads a request body of length n (-1: unknown) to decide on it.
// A body larger than MaxRequestSize, or one that fails to read, is not
// taken: ok is false and rest gives the bytes read followed by the remainder
// (or the read error), so that the body can go on as if nothing had been read.
func ReadBody(r io.Reader, n int64) (body []byte, rest io.Reader, ok bool) {
	if n > MaxRequestSize {
		return nil, r, false
	}
	var err error
	if n > 0 {
		// The server enforces Content-Length: read exactly that, in one buffer.
		body = make([]byte, n)
		var k int
		k, err = io.ReadFull(r, body)
		body = body[:k]
	} else {
		body, err = io.ReadAll(io.LimitReader(r, MaxRequestSize+1))
	}
	if err != nil || len(body) > MaxRequestSize {
		return nil, io.MultiReader(bytes.NewReader(body), errOr(err, r)), false
	}
	return body, nil, true
}

// readCloser reads from r and closes c.
type readCloser struct {
	io.Reader
	c io.Closer
}

func (rc readCloser) Close() error { return rc.c.Close() }

// errOr is a reader failing with err when err is set, else r.
func errOr(err error, r io.Reader) io.Reader {
	if err != nil {
		return errReader{err}
	}
	return r
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func isJSON(contentType string) bool {
	// The usual values, without mime.ParseMediaType's allocations.
	mt, params, _ := strings.Cut(contentType, ";")
	if strings.EqualFold(strings.TrimSpace(mt), "application/json") {
		if p := strings.TrimSpace(params); p == "" && !strings.Contains(contentType, ";") || strings.EqualFold(p, "charset=utf-8") {
			return true
		}
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// IsJSON reports whether a Content-Type is JSON (application/json or +json);
// PrepareBody applies to requests without a Content-Type or with a JSON one.
func IsJSON(contentType string) bool { return isJSON(contentType) }

// PrepareBody returns body with "stream_options": {"include_usage": true}
// added when it is a JSON object with "stream": true and no
// stream_options, and whether it did. The option is inserted right after
// the opening brace, so every other byte goes on as the client sent it. It
// looks at the top level of the object only, without decoding the rest
// (messages can be large).
func PrepareBody(body []byte) ([]byte, bool) {
	var buf [64]byte
	// One pass finds both keys: topValue(body, "stream") and whether
	// topValue(body, "stream_options") would find a value.
	s := jsonScanner{want: "stream", also: "stream_options", usage: buf[:0]}
	s.feed(body)
	if !s.complete || !s.sawUsage || s.sawAlso || string(trimSpace(s.usage)) != "true" {
		return nil, false
	}
	i := bytes.IndexByte(body, '{') // a whole object: only blanks before it
	const opt = `"stream_options":{"include_usage":true},`
	out := make([]byte, 0, len(body)+len(opt))
	out = append(out, body[:i+1]...)
	out = append(out, opt...)
	out = append(out, body[i+1:]...)
	return out, true
}

// Watch wraps body (of the given Content-Type and Content-Encoding) so that
// bytes pass through unchanged and unbuffered, and calls done exactly once,
// when the body reaches EOF or is closed (client gone), with the usage
// found: from a JSON body, or from the SSE chunk that carries "usage". err
// is non-nil when usage was missing, malformed or truncated; then u is
// zero. It returns nil when body is nil (no body: done has then been
// called, with the usage of an empty body).
//
// The response is also over, and done called, at the end of the JSON
// document or at the SSE event "data: [DONE]" that ends an OpenAI stream,
// from within the Read that returns those last bytes: the charge is made
// before the client can see the end of the response, so a client that stops
// reading there (as the OpenAI SDKs do) cannot race its next request past it.
//
// A gzip-encoded body (the backend may compress when the client's
// Accept-Encoding allows it; the proxy passes that header on) is decoded on
// the side for scanning, on its own goroutine, and passed on still encoded;
// its usage is then reported at EOF or Close only. Other encodings report
// an error naming the encoding.
//
// The body is scanned as JSON or SSE as its Content-Type says
// (application/json or +json, text/event-stream); with any other type, a
// body starting with '{' or '[' is JSON and anything else SSE. When several SSE events
// carry a non-null usage, the last one counts. A read error from the backend
// ends the watch like Close, with an error saying the body was cut short
// unless usage was already complete.
func Watch(body io.ReadCloser, contentType, contentEncoding string, done func(u Usage, err error)) io.ReadCloser {
	w := &watcher{body: body, done: done}
	switch ct := contentType; {
	case isJSON(ct):
		w.mode = modeJSON
	case strings.HasPrefix(ct, "text/event-stream"):
		w.mode = modeSSE
	}
	switch ce := strings.ToLower(strings.TrimSpace(contentEncoding)); ce {
	case "", "identity":
	case "gzip", "x-gzip":
		if body != nil {
			w.gz = newGzipTap(w.feed)
		}
	default:
		w.unsupported = ce
	}
	if body == nil {
		w.finish(true) // nothing will be read: the body is complete and empty
		return nil
	}
	return w
}

// ModelOf returns the top-level "model" of a JSON request body, and
// whether it has one that is a string.
func ModelOf(body []byte) (string, bool) {
	var buf [128]byte
	raw, found, complete := topValue(body, "model", buf[:0])
	if !found || !complete || len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var m string
	if json.Unmarshal(raw, &m) != nil {
		return "", false
	}
	return m, true
}

// SetModel returns body with its top-level "model" set to model, and
// whether it changed it: the body must be a JSON object. The other
// top-level fields keep their order and bytes.
func SetModel(body []byte, model string) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	quoted, _ := json.Marshal(model)
	out := append(make([]byte, 0, len(body)+len(quoted)), '{')
	set := false
	for dec.More() {
		k, err := dec.Token()
		key, ok := k.(string)
		if err != nil || !ok {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		kq, _ := json.Marshal(key)
		out = append(append(out, kq...), ':')
		if key == "model" {
			v, set = quoted, true
		}
		out = append(out, v...)
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, false
	}
	if !set {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(out, `"model":`...), quoted...)
	}
	return append(out, '}'), true
}
