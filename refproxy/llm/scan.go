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

// trimSpace trims JSON whitespace only: bytes.TrimSpace also takes Unicode
// spaces (U+0085, U+00A0), which are not JSON and would let a malformed
// value through.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

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
	also        string // another top-level key whose presence is noted, if not ""
	alsoKey     bool   // the key just read is also
	sawAlso     bool   // an also key was followed by a colon

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
					s.alsoKey = s.also != "" && !s.keyOverflow && keyIs(s.key[:s.keyLen], s.also)
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
					if s.alsoKey {
						s.sawAlso = true
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
	return trimSpace(s.usage), true, true
}

// found reports the usage of one document (an SSE event): whether it had a
// non-null usage and, if so, its value or why it is unusable.
func (s *jsonScanner) found() (Usage, bool, error) {
	if !s.sawUsage {
		return Usage{}, false, nil
	}
	raw := trimSpace(s.usage)
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
//
// One pass over raw both checks that it is valid JSON (as json.Valid would)
// and picks out the four counts at its top level (the last occurrence of
// each, keys compared as topValue compares them).
func parseUsage(raw []byte) (u Usage, ok bool, err error) {
	if string(raw) == "null" {
		return Usage{}, false, nil
	}
	var v usageValues
	if len(raw) == 0 || raw[0] != '{' || !v.scan(raw) {
		return Usage{}, true, fmt.Errorf("%w: usage %.64q is not an object", ErrMalformedUsage, raw)
	}
	pk, ck := "prompt_tokens", "completion_tokens"
	pi, ci := usagePrompt, usageCompletion
	if !v.has[pi] && !v.has[ci] {
		pk, ck = "input_tokens", "output_tokens"
		pi, ci = usageInput, usageOutput
	}
	if !v.has[pi] && !v.has[ci] {
		return Usage{}, true, fmt.Errorf("%w: usage has neither prompt_tokens nor completion_tokens", ErrMalformedUsage)
	}
	count := func(name string, i int) (uint64, error) {
		if !v.has[i] {
			return 0, nil
		}
		n, err := parseCount(v.val[i])
		if err != nil {
			return 0, fmt.Errorf("%w: %s is %.32q, want an integer >= 0", ErrMalformedUsage, name, string(v.val[i]))
		}
		return n, nil
	}
	if u.PromptTokens, err = count(pk, pi); err != nil {
		return Usage{}, true, err
	}
	if u.CompletionTokens, err = count(ck, ci); err != nil {
		return Usage{}, true, err
	}
	if u.PromptTokens > math.MaxUint64-u.CompletionTokens {
		return Usage{}, true, fmt.Errorf("%w: token counts overflow", ErrMalformedUsage)
	}
	return u, true, nil
}

// The counts usageValues looks for, and their keys.
const (
	usagePrompt = iota
	usageCompletion
	usageInput
	usageOutput
	usageKeys
)

var usageKeyNames = [usageKeys]string{"prompt_tokens", "completion_tokens", "input_tokens", "output_tokens"}

// maxNesting is encoding/json's limit on nesting, which json.Valid enforces.
const maxNesting = 10000

// usageValues validates a JSON document and keeps the raw values of the
// usage counts at the top level of its object.
type usageValues struct {
	b     []byte
	i     int
	depth int
	has   [usageKeys]bool
	val   [usageKeys][]byte
}

// scan reports whether raw, which starts with '{', is valid JSON, and
// records the counts found at its top level.
func (v *usageValues) scan(raw []byte) bool {
	v.b, v.i, v.depth = raw, 1, 1
	v.space()
	if v.i < len(v.b) && v.b[v.i] == '}' {
		v.i++
	} else {
		for {
			k0 := v.i
			if !v.str() {
				return false
			}
			key := v.b[k0+1 : v.i-1]
			v.space()
			if v.i >= len(v.b) || v.b[v.i] != ':' {
				return false
			}
			v.i++
			v.space()
			v0 := v.i
			if !v.value() {
				return false
			}
			if k := usageKey(key); k >= 0 {
				v.has[k], v.val[k] = true, v.b[v0:v.i]
			}
			v.space()
			if v.i >= len(v.b) {
				return false
			}
			c := v.b[v.i]
			v.i++
			if c == '}' {
				break
			}
			if c != ',' {
				return false
			}
			v.space()
		}
	}
	v.space()
	return v.i == len(v.b)
}

// usageKey is the index in usageKeyNames of the raw key (between quotes),
// or -1, compared as topValue compares keys.
func usageKey(key []byte) int {
	if bytes.IndexByte(key, '\\') < 0 {
		switch string(key) {
		case "prompt_tokens":
			return usagePrompt
		case "completion_tokens":
			return usageCompletion
		case "input_tokens":
			return usageInput
		case "output_tokens":
			return usageOutput
		}
		return -1
	}
	if len(key) > maxKey { // topValue keeps no longer key
		return -1
	}
	for k, name := range usageKeyNames {
		if keyIs(key, name) {
			return k
		}
	}
	return -1
}

func (v *usageValues) space() {
	for v.i < len(v.b) && isSpace(v.b[v.i]) {
		v.i++
	}
}

// value reads one value at v.i (no blanks before it).
func (v *usageValues) value() bool {
	if v.i >= len(v.b) {
		return false
	}
	switch c := v.b[v.i]; c {
	case '"':
		return v.str()
	case '{', '[':
		return v.composite(c)
	case 't':
		return v.literal("true")
	case 'f':
		return v.literal("false")
	case 'n':
		return v.literal("null")
	default:
		return v.number()
	}
}

// composite reads an object or array nested in the top-level object.
func (v *usageValues) composite(open byte) bool {
	v.depth++
	if v.depth > maxNesting {
		return false
	}
	v.i++
	v.space()
	closer := byte(']')
	if open == '{' {
		closer = '}'
	}
	if v.i < len(v.b) && v.b[v.i] == closer {
		v.i++
		v.depth--
		return true
	}
	for {
		if open == '{' {
			if !v.str() {
				return false
			}
			v.space()
			if v.i >= len(v.b) || v.b[v.i] != ':' {
				return false
			}
			v.i++
			v.space()
		}
		if !v.value() {
			return false
		}
		v.space()
		if v.i >= len(v.b) {
			return false
		}
		c := v.b[v.i]
		v.i++
		if c == closer {
			v.depth--
			return true
		}
		if c != ',' {
			return false
		}
		v.space()
	}
}

func (v *usageValues) literal(lit string) bool {
	if !bytes.HasPrefix(v.b[v.i:], []byte(lit)) {
		return false
	}
	v.i += len(lit)
	return true
}

// str reads a string at v.i, which must start it.
func (v *usageValues) str() bool {
	if v.i >= len(v.b) || v.b[v.i] != '"' {
		return false
	}
	for v.i++; v.i < len(v.b); v.i++ {
		switch c := v.b[v.i]; {
		case c == '"':
			v.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			v.i++
			if v.i >= len(v.b) {
				return false
			}
			switch v.b[v.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(v.b)-v.i <= 4 {
					return false
				}
				for _, h := range v.b[v.i+1 : v.i+5] {
					if !isHex(h) {
						return false
					}
				}
				v.i += 4
			default:
				return false
			}
		}
	}
	return false
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// number reads a JSON number at v.i.
func (v *usageValues) number() bool {
	b, i := v.b, v.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	v.i = i
	return true
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
