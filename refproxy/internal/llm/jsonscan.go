package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
)

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
// It tracks strings and nesting, not full syntax: the kept value is
// validated at the end by parseUsage (usage.go), as json.Valid would.
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
	overflow  bool   // usage exceeded maxUsageSize
}

// reset empties s for the next document, keeping its buffer.
func (s *jsonScanner) reset() { *s = jsonScanner{usage: s.usage[:0], want: s.want} }

func (s *jsonScanner) put(c byte) {
	if s.capturing {
		if s.usage == nil {
			s.usage = make([]byte, 0, 256) // a usage object, in one allocation
		}
		if len(s.usage) >= maxUsageSize {
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
		return Usage{}, true, fmt.Errorf("%w: document ends inside or after usage %.64q", errTruncated, raw)
	}
	if s.overflow {
		return Usage{}, true, fmt.Errorf("%w: usage larger than %d bytes", errMalformedUsage, maxUsageSize)
	}
	u, ok, err := parseUsage(raw)
	return u, ok, err
}

// bodyUsage is the usage of a whole JSON response body.
func (s *jsonScanner) bodyUsage(eof bool) (Usage, error) {
	switch {
	case !s.started && eof:
		return Usage{}, fmt.Errorf("%w: empty body", errNoUsage)
	case s.notObject:
		return Usage{}, fmt.Errorf("%w: body is not a JSON object", errNoUsage)
	case !s.complete:
		return Usage{}, fmt.Errorf("%w: JSON body ends before its closing brace", errTruncated)
	}
	u, ok, err := s.found()
	if !ok {
		return Usage{}, fmt.Errorf("%w: JSON body has no usage", errNoUsage)
	}
	return u, err
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
