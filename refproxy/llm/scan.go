package llm

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
)

// mode is how a response body is scanned.
type mode uint8

const (
	modeSniff mode = iota // decided by the first non-blank byte
	modeJSON
	modeSSE
)

// watcher is the resp.Body installed by WatchResponse.
type watcher struct {
	body io.ReadCloser
	done func(Usage, error)

	// gz decodes a gzip body on its own goroutine, which then owns the
	// scanners; unsupported is a Content-Encoding that cannot be scanned.
	gz          *gzipTap
	unsupported string

	mu       sync.Mutex // Read and Close may race when the client goes away
	finished bool
	mode     mode
	js       jsonScanner
	sse      sseScanner
}

func (w *watcher) Read(p []byte) (int, error) {
	n, err := w.body.Read(p)
	if n == 0 && err == nil {
		return 0, nil
	}
	if w.gz != nil || w.unsupported != "" {
		if w.gz != nil && n > 0 {
			w.gz.write(p[:n])
		}
		if err != nil {
			w.finish(err == io.EOF)
		}
		return n, err
	}
	w.mu.Lock()
	if w.finished {
		w.mu.Unlock()
		return n, err
	}
	w.feed(p[:n])
	ended := (w.mode == modeJSON && (w.js.complete || w.js.notObject)) || (w.mode == modeSSE && w.sse.doneEvent)
	w.mu.Unlock()
	if err != nil || ended {
		// Finishing before these bytes go on means the charge is in place
		// before the client can see the end of the response and send more.
		w.finish(ended || err == io.EOF)
	}
	return n, err
}

func (w *watcher) Close() error {
	w.finish(false)
	return w.body.Close()
}

// feed scans p. w.mu must be held, or feed runs on the gzip goroutine.
func (w *watcher) feed(p []byte) {
	if w.mode == modeSniff {
		i := 0
		for i < len(p) && isSpace(p[i]) {
			i++
		}
		if i == len(p) {
			return
		}
		if p[i] == '{' || p[i] == '[' {
			w.mode = modeJSON
		} else {
			w.mode = modeSSE
		}
		p = p[i:]
	}
	if w.mode == modeJSON {
		w.js.feed(p)
	} else {
		w.sse.feed(p)
	}
}

// finish calls done once, with what was found; eof tells a complete body
// from one that was closed or failed early.
func (w *watcher) finish(eof bool) {
	w.mu.Lock()
	if w.finished {
		w.mu.Unlock()
		return
	}
	w.finished = true
	w.mu.Unlock()
	var gzErr error
	if w.gz != nil {
		gzErr = w.gz.close(eof) // after this, the scanners are ours again
	}
	w.mu.Lock()
	var (
		u   Usage
		err error
	)
	switch w.mode {
	case modeSniff:
		if eof {
			err = fmt.Errorf("%w: empty body", ErrNoUsage)
		} else {
			err = fmt.Errorf("%w: body closed before any data", ErrTruncated)
		}
	case modeJSON:
		u, err = w.js.bodyUsage(eof)
	case modeSSE:
		u, err = w.sse.streamUsage(eof)
	}
	switch {
	case w.unsupported != "":
		err = fmt.Errorf("%w: %q", ErrUnsupportedEncoding, w.unsupported)
	case gzErr != nil:
		// Whatever was decoded before the damage is not to be trusted.
		err = fmt.Errorf("%w: gzip body: %v", ErrTruncated, gzErr)
	}
	w.mu.Unlock()
	if err != nil {
		u = Usage{}
	}
	if w.done != nil {
		w.done(u, err)
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// What the JSON scanner expects next at the top level of the document.
const (
	expKey = iota
	expColon
	expValue
)

// maxKey bounds the bytes kept of a top-level key: "usage" spelled with
// \u escapes only is 30 bytes, so longer keys can never be "usage".
const maxKey = 64

// jsonScanner follows a JSON document byte by byte and keeps only the raw
// value of one top-level key, "usage" unless want says otherwise (the last
// occurrence, as encoding/json does).
// It tracks strings and nesting, not full syntax: the kept value is checked
// by encoding/json at the end.
type jsonScanner struct {
	started   bool // first non-blank byte seen
	notObject bool // the document is not an object: nothing to find
	complete  bool // the top-level object was closed
	depth     int
	inStr     bool
	esc       bool
	expect    int

	inKey       bool
	key         [maxKey]byte
	keyLen      int
	keyOverflow bool
	usageKey    bool   // the key just read is the wanted one
	want        string // the top-level key whose value is kept; "" means "usage"

	capturing bool   // inside the usage value
	sawUsage  bool   // a usage key with a value was seen
	usage     []byte // the raw usage value
	overflow  bool   // usage exceeded MaxUsageSize
}

// reset empties s for the next document, keeping its buffer.
func (s *jsonScanner) reset() { *s = jsonScanner{usage: s.usage[:0], want: s.want} }

func (s *jsonScanner) put(c byte) {
	if s.capturing {
		if s.usage == nil {
			s.usage = make([]byte, 0, 256) // a usage object, in one allocation
		}
		if len(s.usage) >= MaxUsageSize {
			s.overflow = true
			return
		}
		s.usage = append(s.usage, c)
	}
}

func (s *jsonScanner) feed(p []byte) {
	for i := 0; i < len(p); i++ {
		if s.complete || s.notObject {
			return
		}
		c := p[i]
		if s.inStr && !s.esc && !s.inKey && !s.capturing {
			// Most bytes are content strings nobody needs: skip to the
			// next quote or backslash at once.
			j := indexQuoteOrBackslash(p[i:])
			if j < 0 {
				return
			}
			i += j
			c = p[i]
		}
		if s.inStr {
			switch {
			case s.esc:
				s.esc = false
			case c == '\\':
				s.esc = true
			case c == '"':
				s.inStr = false
				if s.inKey {
					s.inKey = false
					s.usageKey = !s.keyOverflow && keyIs(s.key[:s.keyLen], s.want)
					s.expect = expColon
					continue
				}
			}
			if s.inKey {
				if s.keyLen == maxKey {
					s.keyOverflow = true
				} else {
					s.key[s.keyLen] = c
					s.keyLen++
				}
			} else {
				s.put(c)
			}
			continue
		}
		if isSpace(c) {
			if len(s.usage) > 0 {
				s.put(c)
			}
			continue
		}
		if !s.started {
			s.started = true
			if c != '{' {
				s.notObject = true
				return
			}
			s.depth, s.expect = 1, expKey
			continue
		}
		if s.depth == 1 {
			switch s.expect {
			case expKey:
				switch c {
				case '"':
					s.inStr, s.inKey, s.keyLen, s.keyOverflow = true, true, 0, false
				case '}':
					s.depth, s.complete = 0, true
				}
				continue // anything else is invalid and ignored
			case expColon:
				if c == ':' {
					s.expect = expValue
					if s.usageKey {
						s.capturing, s.sawUsage, s.usage, s.overflow = true, true, s.usage[:0], false
					}
				}
				continue
			case expValue:
				switch c {
				case ',':
					s.capturing, s.expect = false, expKey
					continue
				case '}':
					s.capturing, s.depth, s.complete = false, 0, true
					continue
				}
			}
		}
		s.put(c)
		switch c {
		case '"':
			s.inStr = true
		case '{', '[':
			s.depth++
		case '}', ']':
			if s.depth > 1 {
				s.depth--
			}
		}
	}
}

// keyIs reports whether the raw key (between quotes) is want ("" means "usage").
func keyIs(raw []byte, want string) bool {
	if want == "" {
		want = "usage"
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == want
	}
	var k string
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	return json.Unmarshal(q, &k) == nil && k == want
}

// topValue returns the raw value of the top-level key of the JSON object
// doc (the last occurrence); complete is false when doc is not a whole
// object (unbalanced, or not an object at all).
//
// The value is kept in buf (grown only if it does not fit): callers pass a
// small array on their stack, as counts and flags are short, so that no
// call allocates.
func topValue(doc []byte, key string, buf []byte) (val []byte, found, complete bool) {
	s := jsonScanner{want: key, usage: buf[:0]}
	s.feed(doc)
	if !s.complete {
		return nil, false, false
	}
	if !s.sawUsage {
		return nil, false, true
	}
	return bytes.TrimSpace(s.usage), true, true
}

// found reports the usage of one document (an SSE event): whether it had a
// non-null usage and, if so, its value or why it is unusable.
func (s *jsonScanner) found() (Usage, bool, error) {
	if !s.sawUsage {
		return Usage{}, false, nil
	}
	raw := bytes.TrimSpace(s.usage)
	if !s.capturing && string(raw) == "null" {
		return Usage{}, false, nil
	}
	if s.capturing || !s.complete {
		return Usage{}, true, fmt.Errorf("%w: document ends inside or after usage %.64q", ErrTruncated, raw)
	}
	if s.overflow {
		return Usage{}, true, fmt.Errorf("%w: usage larger than %d bytes", ErrMalformedUsage, MaxUsageSize)
	}
	u, ok, err := parseUsage(raw)
	return u, ok, err
}

// bodyUsage is the usage of a whole JSON response body.
func (s *jsonScanner) bodyUsage(eof bool) (Usage, error) {
	switch {
	case !s.started && eof:
		return Usage{}, fmt.Errorf("%w: empty body", ErrNoUsage)
	case s.notObject:
		return Usage{}, fmt.Errorf("%w: body is not a JSON object", ErrNoUsage)
	case !s.complete:
		return Usage{}, fmt.Errorf("%w: JSON body ends before its closing brace", ErrTruncated)
	}
	u, ok, err := s.found()
	if !ok {
		return Usage{}, fmt.Errorf("%w: JSON body has no usage", ErrNoUsage)
	}
	return u, err
}

// parseUsage reads an OpenAI usage object (prompt_tokens, completion_tokens;
// input_tokens, output_tokens as the Responses API names them). ok is false
// for null.
func parseUsage(raw []byte) (u Usage, ok bool, err error) {
	if string(raw) == "null" {
		return Usage{}, false, nil
	}
	if !json.Valid(raw) || raw[0] != '{' {
		return Usage{}, true, fmt.Errorf("%w: usage %.64q is not an object", ErrMalformedUsage, raw)
	}
	var pb, cb [32]byte
	pk, ck := "prompt_tokens", "completion_tokens"
	p, hasP, _ := topValue(raw, pk, pb[:0])
	c, hasC, _ := topValue(raw, ck, cb[:0])
	if !hasP && !hasC {
		pk, ck = "input_tokens", "output_tokens"
		p, hasP, _ = topValue(raw, pk, pb[:0])
		c, hasC, _ = topValue(raw, ck, cb[:0])
	}
	if !hasP && !hasC {
		return Usage{}, true, fmt.Errorf("%w: usage has neither prompt_tokens nor completion_tokens", ErrMalformedUsage)
	}
	count := func(name string, v []byte, has bool) (uint64, error) {
		if !has {
			return 0, nil
		}
		n, err := parseCount(v)
		if err != nil {
			// string(v): passing v itself would move the callers' stack buffers to the heap.
			return 0, fmt.Errorf("%w: %s is %.32q, want an integer >= 0", ErrMalformedUsage, name, string(v))
		}
		return n, nil
	}
	if u.PromptTokens, err = count(pk, p, hasP); err != nil {
		return Usage{}, true, err
	}
	if u.CompletionTokens, err = count(ck, c, hasC); err != nil {
		return Usage{}, true, err
	}
	if u.PromptTokens > math.MaxUint64-u.CompletionTokens {
		return Usage{}, true, fmt.Errorf("%w: token counts overflow", ErrMalformedUsage)
	}
	return u, true, nil
}

// parseCount reads a JSON integer >= 0 without allocating.
func parseCount(v []byte) (uint64, error) {
	if len(v) == 0 || len(v) > 20 {
		return 0, strconv.ErrSyntax
	}
	var n uint64
	for i, c := range v {
		if c < '0' || c > '9' || (i == 1 && v[0] == '0') {
			return 0, strconv.ErrSyntax
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, strconv.ErrRange
		}
		n = n*10 + d
	}
	return n, nil
}

// Line states of the SSE scanner.
const (
	lineStart  = iota // nothing read on this line yet
	lineField         // reading the field name
	lineData          // in the value of a data field
	lineIgnore        // in a line that does not matter (comment, other field)
)

// maxField bounds the bytes kept of a field name; only "data" matters.
const maxField = 8

// sseScanner follows an SSE stream byte by byte. The data of each event is
// fed to a jsonScanner as it arrives, so no line is ever assembled whole.
type sseScanner struct {
	line      int
	field     [maxField]byte
	fieldLen  int
	skipSpace bool // a space right after "data:" is not part of the value
	prevCR    bool // a \n right after \r ends no second line
	hasData   bool // the current event has a data field
	ev        jsonScanner

	head      [6]byte // the first bytes of the event's data, to spot [DONE]
	headLen   int
	doneEvent bool // the OpenAI end-of-stream event "data: [DONE]" was dispatched

	seen    bool // an event carried a non-null usage
	last    Usage
	lastErr error
}

func (s *sseScanner) feed(p []byte) {
	for i := 0; i < len(p) && !s.doneEvent; i++ {
		c := p[i]
		if s.prevCR {
			s.prevCR = false
			if c == '\n' {
				continue
			}
		}
		if c == '\r' || c == '\n' {
			s.prevCR = c == '\r'
			s.endLine()
			continue
		}
		switch s.line {
		case lineStart, lineField:
			s.line = lineField
			if c != ':' {
				if s.fieldLen == maxField {
					s.line = lineIgnore
				} else {
					s.field[s.fieldLen] = c
					s.fieldLen++
				}
				continue
			}
			if string(s.field[:s.fieldLen]) != "data" {
				s.line = lineIgnore
				continue
			}
			s.line, s.skipSpace = lineData, true
			s.dataLine()
		case lineData:
			if s.skipSpace {
				s.skipSpace = false
				if c == ' ' {
					continue
				}
			}
			j := indexLineEnd(p[i:])
			if j < 0 {
				j = len(p) - i
			}
			if s.headLen < len(s.head) {
				s.headLen += copy(s.head[s.headLen:], p[i:i+j])
			}
			s.ev.feed(p[i : i+j])
			i += j - 1
		}
	}
}

// dataLine starts a data line; lines of one event are joined by \n.
func (s *sseScanner) dataLine() {
	if s.hasData {
		s.ev.feed([]byte{'\n'})
		if s.headLen < len(s.head) {
			s.head[s.headLen] = '\n'
			s.headLen++
		}
	}
	s.hasData = true
}

func (s *sseScanner) endLine() {
	switch s.line {
	case lineStart:
		s.dispatch()
	case lineField:
		if string(s.field[:s.fieldLen]) == "data" {
			s.dataLine() // "data" with no colon: an empty value
		}
	}
	s.line, s.fieldLen = lineStart, 0
}

// dispatch ends the current event.
func (s *sseScanner) dispatch() {
	if s.hasData {
		if u, ok, err := s.ev.found(); ok {
			s.seen, s.last, s.lastErr = true, u, err
		}
		s.doneEvent = string(s.head[:s.headLen]) == "[DONE]"
	}
	s.ev.reset()
	s.hasData, s.headLen = false, 0
}

// streamUsage is the usage of the whole stream, once it ended (eof) or was
// closed early. An event left open at the end is still looked at, so a cut
// usage chunk reports ErrTruncated rather than ErrNoUsage.
func (s *sseScanner) streamUsage(eof bool) (Usage, error) {
	if !s.doneEvent {
		s.dispatch()
	}
	switch {
	case s.seen:
		return s.last, s.lastErr
	case eof:
		return Usage{}, fmt.Errorf("%w: no SSE event carried usage", ErrNoUsage)
	default:
		return Usage{}, fmt.Errorf("%w: stream closed before the usage event", ErrTruncated)
	}
}

// gzipTap decodes a copy of a gzip body for the scanners while the encoded
// bytes pass through untouched. The decoding runs on its own goroutine,
// fed through a pipe, so the pass-through never waits for it.
type gzipTap struct {
	pw   *io.PipeWriter
	done chan struct{}
	err  error // decoding error, set before done is closed
}

// errTapEnded lets writes go on (and be ignored) once decoding stopped.
var errTapEnded = errors.New("gzip decoding ended")

func newGzipTap(feed func([]byte)) *gzipTap {
	pr, pw := io.Pipe()
	g := &gzipTap{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		zr, err := gzip.NewReader(pr)
		if err == nil {
			buf := make([]byte, 4096)
			for {
				n, rerr := zr.Read(buf)
				feed(buf[:n])
				if rerr != nil {
					err = rerr
					break
				}
			}
		}
		if err != io.EOF {
			g.err = err
		}
		// Corrupt data must not block the pass-through: later writes fail at once.
		pr.CloseWithError(errTapEnded)
	}()
	return g
}

// write hands encoded bytes to the decoder; it returns as soon as they are taken.
func (g *gzipTap) write(p []byte) { _, _ = g.pw.Write(p) }

// close ends the input (at EOF, or early with ErrTruncated) and waits for
// the decoder to finish.
func (g *gzipTap) close(eof bool) error {
	if eof {
		_ = g.pw.Close()
	} else {
		_ = g.pw.CloseWithError(ErrTruncated)
	}
	<-g.done
	return g.err
}

// indexQuoteOrBackslash is bytes.IndexAny(p, `"\`) without building a
// byte set on every call: two vectorised scans instead.
func indexQuoteOrBackslash(p []byte) int {
	q := bytes.IndexByte(p, '"')
	end := q
	if end < 0 {
		end = len(p)
	}
	if b := bytes.IndexByte(p[:end], '\\'); b >= 0 {
		return b
	}
	return q
}

// indexLineEnd is bytes.IndexAny(p, "\r\n"), the same way.
func indexLineEnd(p []byte) int {
	n := bytes.IndexByte(p, '\n')
	end := n
	if end < 0 {
		end = len(p)
	}
	if r := bytes.IndexByte(p[:end], '\r'); r >= 0 {
		return r
	}
	return n
}
