package trace

import (
	"strconv"
	"strings"
	"unsafe"
)

// Header is what a follow reader that passes events on as received reads
// of each one (gwdiag trace --follow --raw and its checks): whose request
// it is, its type, and what an outcome filter looks at. ParseHeader gets
// it without building the message's map.
type Header struct {
	Type      MessageType
	RequestID string
	EventEnd  int64
	// Status is message.status when it is a number (HasStatus): the
	// backend's or the request's status.
	Status    float64
	HasStatus bool
	// ResponseCode is message.requestState.response.code when it is a
	// number (HasResponseCode): a response snapshot's status.
	ResponseCode    float64
	HasResponseCode bool
}

// HeaderOf is e's Header.
func HeaderOf(e Event) Header {
	h := Header{Type: e.Type(), RequestID: e.RequestID, EventEnd: e.EventEnd}
	h.Status, h.HasStatus = e.Message["status"].(float64)
	if st, ok := e.Message["requestState"].(map[string]any); ok {
		if resp, ok := st["response"].(map[string]any); ok {
			h.ResponseCode, h.HasResponseCode = resp["code"].(float64)
		}
	}
	return h
}

// ParseHeader is HeaderOf(Parse(b)), errors included, through a scan that
// validates the whole event as Parse's fast path does but builds only the
// Header; what that path leaves to encoding/json goes to Parse.
// TestParseHeader and FuzzParseHeader hold the two to the same result.
//
// The scan reads b in place, and the Header's strings are copies of their
// own (a known type is the package's constant): b may be reused as soon
// as ParseHeader returns, and a follow reader pays for the few bytes it
// keeps rather than for a copy of each event.
func ParseHeader(b []byte) (Header, error) {
	h, _, err := parseHeaderCompact(b)
	return h, err
}

// parseHeaderCompact is ParseHeader, and whether b is compact JSON (no
// whitespace outside its strings, as json.Compact leaves it), which the
// same scan tells: a reader that passes events on compact need not scan
// them twice. compact is false when the scan cannot tell (events that
// only Parse reads); compacting such an event changes nothing.
func parseHeaderCompact(b []byte) (h Header, compact bool, err error) {
	var r HeaderReader
	return r.Parse(b)
}

// HeaderReader reads the headers of a stream's events one after another,
// as ParseHeaderCompact reads each, remembering the last request state it
// scanned (message.requestState, as it was written): a request's
// snapshots most often carry the same state, byte for byte, and a state
// scanned already is passed over by one comparison. A JSON object ends
// where its braces close, so bytes that begin with a whole object scanned
// before hold that object, and what follows it is scanned as ever.
// TestHeaderReaderMatchesParseHeader holds the two to the same results.
// A HeaderReader keeps a copy of the state, never the input; it is not
// for concurrent use.
type HeaderReader struct {
	state   []byte
	code    float64
	hasCode bool
	spaced  bool
}

// Parse is ParseHeaderCompact(b), the state remembered.
func (r *HeaderReader) Parse(b []byte) (h Header, compact bool, err error) {
	d := decoder{s: unsafe.String(unsafe.SliceData(b), len(b)), memo: r}
	if h, ok := parseHeaderFast(&d); ok {
		h.Type = knownType(h.Type)
		h.RequestID = strings.Clone(h.RequestID)
		return h, !d.spaced, nil
	}
	e, err := Parse(b)
	if err != nil {
		return Header{}, false, err
	}
	return HeaderOf(e), false, nil
}

// parseHeaderFast is parseFast's walk of the top-level object with the
// message scanned for the Header's fields instead of decoded.
func parseHeaderFast(d *decoder) (Header, bool) {
	var h Header
	d.ws()
	if !d.byte('{') {
		return h, false
	}
	var seen [6]bool
	d.ws()
	if d.byte('}') {
		return h, d.end()
	}
	for {
		d.ws()
		key, ok := d.plainKey()
		if !ok || !d.colon() {
			return h, false
		}
		field := fieldIndex(key)
		if field >= 0 {
			if seen[field] {
				return h, false
			}
			seen[field] = true
		}
		switch field {
		case 0: // eventStart
			if d.null() {
				break
			}
			if _, ok := d.int64(); !ok {
				return h, false
			}
		case 1: // eventEnd
			if d.null() {
				break
			}
			n, ok := d.int64()
			if !ok {
				return h, false
			}
			h.EventEnd = n
		case 2: // severity
			if d.null() {
				break
			}
			if _, _, ok := d.token(); !ok {
				return h, false
			}
		case 3: // scope
			if d.null() {
				break
			}
			if !d.skipStrings() {
				return h, false
			}
		case 4: // message
			if d.null() {
				break
			}
			if !d.messageHeader(&h) {
				return h, false
			}
		case 5: // requestId
			if d.null() {
				break
			}
			v, ok := d.str()
			if !ok {
				return h, false
			}
			h.RequestID = v
		case -2:
			return h, false
		default:
			if !d.scan(1) {
				return h, false
			}
		}
		if more, ok := d.next('}'); !more {
			return h, ok && d.end()
		}
	}
}

// messageHeader scans the message object (depth 1) for type, status and
// requestState.response.code; a name given twice counts by its last
// value, as in the map encoding/json builds.
func (d *decoder) messageHeader(h *Header) bool {
	return d.members(1, func(k string) bool {
		switch k {
		case "type":
			h.Type = ""
			if d.peek() == '"' {
				v, ok := d.str()
				h.Type = MessageType(v)
				return ok
			}
		case "status":
			h.Status, h.HasStatus = 0, false
			if f, ok, isNum := d.float(); isNum {
				h.Status, h.HasStatus = f, ok
				return ok
			}
		case "requestState":
			h.ResponseCode, h.HasResponseCode = 0, false
			if d.peek() == '{' {
				return d.requestState(h)
			}
		}
		return d.scan(2)
	})
}

// requestState scans message.requestState (an object, at depth 2) for
// response.code, or passes over the state the reader scanned last.
func (d *decoder) requestState(h *Header) bool {
	m := d.memo
	if m != nil && len(m.state) > 0 && strings.HasPrefix(d.s[d.i:], unsafe.String(unsafe.SliceData(m.state), len(m.state))) {
		d.i += len(m.state)
		h.ResponseCode, h.HasResponseCode = m.code, m.hasCode
		d.spaced = d.spaced || m.spaced
		return true
	}
	start, spaced := d.i, d.spaced
	d.spaced = false
	ok := d.members(2, func(k string) bool {
		if k != "response" {
			return d.scan(3)
		}
		h.ResponseCode, h.HasResponseCode = 0, false
		if d.peek() != '{' {
			return d.scan(3)
		}
		return d.members(3, func(k string) bool {
			if k != "code" {
				return d.scan(4)
			}
			h.ResponseCode, h.HasResponseCode = 0, false
			if f, ok, isNum := d.float(); isNum {
				h.ResponseCode, h.HasResponseCode = f, ok
				return ok
			}
			return d.scan(4)
		})
	})
	if ok && m != nil {
		m.state = append(m.state[:0], d.s[start:d.i]...)
		m.code, m.hasCode, m.spaced = h.ResponseCode, h.HasResponseCode, d.spaced
	}
	d.spaced = d.spaced || spaced
	return ok
}

// members scans a JSON object at depth as object does, calling member
// with the reader on each name's value; member must pass over the value
// (its members at depth+1).
func (d *decoder) members(depth int, member func(name string) bool) bool {
	if depth > maxFastDepth || !d.byte('{') {
		return false
	}
	d.ws()
	if d.byte('}') {
		return true
	}
	for {
		d.ws()
		k, ok := d.str()
		if !ok || !d.colon() {
			return false
		}
		if !member(k) {
			return false
		}
		if more, ok := d.next('}'); !more {
			return ok
		}
	}
}

// float reads a number as value does (ok false for one out of float64's
// range); isNum is false, and nothing read, when the value is no number.
func (d *decoder) float() (f float64, ok, isNum bool) {
	if c := d.peek(); c != '-' && (c < '0' || c > '9') {
		return 0, false, false
	}
	lit, ok := d.number()
	if !ok {
		return 0, false, true
	}
	f, err := strconv.ParseFloat(lit, 64)
	return f, err == nil, true
}

// scan passes over a value exactly where value would decode it (the same
// syntax, depth bound and number range), building nothing.
func (d *decoder) scan(depth int) bool {
	if depth > maxFastDepth {
		return false
	}
	switch c := d.peek(); {
	case c == '{':
		return d.members(depth, func(string) bool { return d.scan(depth + 1) })
	case c == '[':
		d.i++
		d.ws()
		if d.byte(']') {
			return true
		}
		for {
			d.ws()
			if !d.scan(depth + 1) {
				return false
			}
			if more, ok := d.next(']'); !more {
				return ok
			}
		}
	case c == '"':
		_, _, ok := d.token()
		return ok
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.null()
	default:
		lit, ok := d.number()
		if !ok {
			return false
		}
		if len(lit) < 300 && strings.IndexAny(lit, "eE") < 0 {
			return true // under 1e300: within float64's range
		}
		_, err := strconv.ParseFloat(lit, 64)
		return err == nil
	}
}

// skipStrings passes over an array of strings as strings reads it.
func (d *decoder) skipStrings() bool {
	if !d.byte('[') {
		return false
	}
	d.ws()
	if d.byte(']') {
		return true
	}
	for {
		d.ws()
		if _, _, ok := d.token(); !ok {
			return false
		}
		if more, ok := d.next(']'); !more {
			return ok
		}
	}
}

// knownTypes are the message types a header's type is most often.
var knownTypes = []MessageType{RequestStarted, RequestSnapshot, RouteSelection, PolicySelection,
	BackendCallStart, BackendCallResult, ResponseSnapshot, RequestFinished, PolicyResultType, PolicyEvent}

// knownType is t as the package's constant when it is one, else a copy.
func knownType(t MessageType) MessageType {
	for _, k := range knownTypes {
		if t == k {
			return k
		}
	}
	return MessageType(strings.Clone(string(t)))
}
