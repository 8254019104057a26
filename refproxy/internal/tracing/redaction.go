package tracing

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/gwdiag/gwdiag/golden/trace/redact"
)

// Redaction keeps credentials out of a trace (golden/trace/redact; the
// issue is a trace that is safe to share). It is done in two places:
//
//   - the values of credential headers, where a snapshot shows them: the
//     header is kept, its secret replaced by a keyed fingerprint
//     (Redactor.AppendValue), in the request and the response alike;
//   - every other place a credential of the request turns up (a route's
//     reason, a rate-limit key, a global limit's descriptor, an error, a
//     policy's words): the tracer keeps the request's secrets, and every
//     frame of a trace that has some goes through one scrubbing pass when
//     it is rendered (Tracer.scrubFrame).
//
// The secrets are those of the request's and the response's credential
// headers, noted as they are captured (AddPair) and taken from the
// captured values when first needed (secrets: a frame rendered, Shown),
// and those the proxy or a policy registers (AddSecret: the API key
// refproxy sends an AI backend, a credential an auth policy consumed).
//
// Why a frame rendered before a secret is known cannot hold it: a frame is
// rendered from what the proxy had when its event happened (a capture, or
// fields built then), and a secret is known no later than the moment its
// bytes reach the proxy as a credential: the request's credential headers
// when the request is first captured (the initial snapshot, before any
// route selection, policy or event that could quote them; requestStarted,
// rendered before, holds nothing), the response's when the response is
// captured (before its snapshot and every event after), the provider key
// before the request goes to the backend, a policy's credential when the
// policy reads it (the caller's part: AddSecret). So a frame of an earlier
// event holds only bytes that were no credential when it was rendered.
// Fields built eagerly (a sentence quoting a rate-limit key: Shown) take
// the secrets noted so far, the request's among them. A trace held for an
// outcome filter renders its frames at requestFinished, with every secret
// of the trace known: stricter still (a value the client sent in a query
// that the backend then issues as a cookie is scrubbed there from the
// initial snapshot too, where a live stream had sent it already;
// TestTracesNeverShowCredentials, refproxy/e2e).
type Redaction struct {
	r *redact.Redactor
	// clear: the credentials are shown in clear (refproxy's
	// --trace-credentials-in-clear); only the names of r, those a config
	// asked for, are redacted, and AddSecret registers nothing.
	clear bool
	// lens has bit n set when some name is n bytes long (n < 64); byLen
	// lists them by length: most headers are told apart by their length
	// alone, the others by one comparison or two, without lowering them
	// or looking them up in a map (a header of every traced request).
	lens  uint64
	byLen [64][]string
	// firsts has, for each length, the bit of the first letter of each
	// name of that length (firstBit): "accept" is told from "cookie",
	// "user-agent" from "set-cookie" without a comparison.
	firsts [64]uint32
	// other are the names of 64 bytes or more, or not ASCII (whose upper
	// case may be of another length): compared lowered.
	other []string
}

// NewRedaction returns the redaction of r's headers; clear: the
// credentials are shown in clear, but for r's names (see Redaction).
func NewRedaction(r *redact.Redactor, clear bool) *Redaction {
	rd := &Redaction{r: r, clear: clear}
	for _, n := range r.Names() {
		if len(n) < len(rd.byLen) && isASCII(n) && n != "" {
			rd.lens |= 1 << len(n)
			rd.byLen[len(n)] = append(rd.byLen[len(n)], n)
			rd.firsts[len(n)] |= firstBit(n[0])
		} else {
			rd.other = append(rd.other, n)
		}
	}
	return rd
}

// Redactor is the redactor of rd's headers and fingerprints.
func (rd *Redaction) Redactor() *redact.Redactor { return rd.r }

// firstBit is the bit of a name's first byte in Redaction.firsts: a
// letter's, in either case, or bit 31 for any other byte.
func firstBit(c byte) uint32 {
	if c |= 0x20; 'a' <= c && c <= 'z' {
		return 1 << (c - 'a')
	}
	return 1 << 31
}

// Sensitive reports whether the header name k (any case) is redacted, and
// its lower-case name when it is. Most names are refused by their length
// and first letter, inline (AddPair tests every header captured).
func (rd *Redaction) Sensitive(k string) (string, bool) {
	if !rd.maybe(k) {
		return "", false
	}
	return rd.sensitive(k)
}

// maybe reports whether k may be a name rd redacts: false for most, by
// their length and first letter.
func (rd *Redaction) maybe(k string) bool {
	return rd != nil && (rd.other != nil || len(k) > 0 && len(k) < len(rd.firsts) && rd.firsts[len(k)]&firstBit(k[0]) != 0)
}

// sensitive is Sensitive past maybe.
func (rd *Redaction) sensitive(k string) (string, bool) {
	if len(k) < len(rd.byLen) && rd.lens&(1<<len(k)) != 0 {
		for _, n := range rd.byLen[len(k)] {
			if strings.EqualFold(n, k) {
				return n, true
			}
		}
	}
	if len(rd.other) > 0 {
		lower := strings.ToLower(k)
		for _, n := range rd.other {
			if n == lower {
				return n, true
			}
		}
	}
	return "", false
}

// SensitiveLower is Sensitive for a name already lower case.
func (rd *Redaction) SensitiveLower(k string) bool {
	if rd == nil {
		return false
	}
	if len(k) < len(rd.byLen) && rd.lens&(1<<len(k)) != 0 {
		for _, n := range rd.byLen[len(k)] {
			if n == k {
				return true
			}
		}
	}
	for _, n := range rd.other {
		if n == k {
			return true
		}
	}
	return false
}

// b2s views b as a string without copying (b must not change while the
// string is used).
func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// SetRedaction makes rd the redaction of the trace: set it before the
// first event (the request's capture registers its credentials).
func (t *Tracer) SetRedaction(rd *Redaction) {
	if t != nil {
		t.red = rd
	}
}

// Redaction is the trace's redaction (nil: none, nothing is redacted).
func (t *Tracer) Redaction() *Redaction {
	if t == nil {
		return nil
	}
	return t.red
}

// AddSecret marks v as a credential of the traced request: no event of
// the trace shows it (wherever a string of an event holds it, when it is
// MinSubstring bytes or more; where a string is it, when shorter). Call it
// as soon as the proxy holds v, before any event that could show it is
// built (see Redaction): the API key refproxy sends an AI backend, a
// credential an auth policy consumed. A value read from one of the
// headers the table redacts (its config's CredentialHeaders among them)
// is registered already, when the request was captured. With the
// credentials shown in clear, it does nothing.
func (t *Tracer) AddSecret(v string) {
	if t == nil || t.red == nil || t.red.clear {
		return
	}
	t.addSecret(v)
}

// addSecret keeps v among the trace's secrets, and the form an event
// shows it in when that differs (invalid UTF-8 is written as U+FFFD).
func (t *Tracer) addSecret(v string) {
	t.keepSecret(v)
	if !utf8.ValidString(v) {
		var shown string
		if json.Unmarshal(appendString(nil, v), &shown) == nil {
			t.keepSecret(shown)
		}
	}
}

// keepSecret adds v to the trace's secrets, and to its list when new.
func (t *Tracer) keepSecret(v string) {
	hb := t.buffers()
	n := hb.secrets.Len()
	if hb.secrets.Add(v); hb.secrets.Len() > n {
		hb.secretList = append(hb.secretList, v)
	}
}

// pendingSecret is a captured value of the credential header name (lower
// case), in the arena, whose secrets are yet to be taken.
type pendingSecret struct {
	name  string
	value Span
}

// secrets are the trace's secrets, with those of the credential headers
// captured so far: a header's are taken from its value when something
// first needs them (a frame rendered, Shown), so that a trace an outcome
// filter drops costs no parsing of its credentials. Nothing can see the
// secrets before they are taken; so taking them late changes nothing of
// what a frame shows (see Redaction on the order). The values are views
// of the arena, which does not change while the trace lasts.
func (t *Tracer) secrets() *redact.Secrets {
	hb := t.buffers()
	for _, p := range hb.pending {
		redact.Credentials(p.name, b2s(t.Bytes(p.value)), t.addSecret)
	}
	hb.pending = hb.pending[:0]
	return &hb.secrets
}

// redactedValue is a header value redacted, in the arena: its name, its
// value and what a snapshot shows.
type redactedValue struct{ name, value, out Span }

// AppendRedacted appends the value of the header name (lower case), which
// the trace's Redaction redacts, as a snapshot shows it (the redact
// package's value rules, each secret a keyed fingerprint). A request is
// shown at several stages, and a fingerprint is a keyed hash: one already
// shown in this trace is taken again.
func (t *Tracer) AppendRedacted(b []byte, name string, value []byte) []byte {
	hb := t.buffers()
	for _, rv := range hb.redacted {
		if string(t.Bytes(rv.value)) == string(value) && string(t.Bytes(rv.name)) == name {
			return append(b, t.Bytes(rv.out)...)
		}
	}
	at := len(b)
	b = t.red.r.AppendValue(b, name, b2s(value))
	hb.redacted = append(hb.redacted, redactedValue{t.CopyString(name), t.Copy(value), t.Copy(b[at:])})
	return b
}

// Shown is s as an event may show it: each secret of the request it holds
// replaced by its marker (a short one only where it is the whole of s).
// For a sentence that quotes a value the request carried (a rate-limit
// key: "for key %q"), where the scrubbing pass would not find a short
// secret.
func (t *Tracer) Shown(s string) string {
	if t == nil || t.red == nil || t.hb == nil {
		return s
	}
	out, _ := t.red.r.Scrub(s, t.secrets())
	return out
}

// scrubFrame is the scrubbing pass over the last frame of fs (begun at
// start): every secret of the trace a string of it holds is replaced by
// its marker. A frame of an event built as maps also has the sensitive
// members of any "headers" object redacted (redact's AppendEvent), for
// headers a map-built event might carry. What does not change is left
// byte for byte; what does is written as json.Marshal writes it.
func (t *Tracer) scrubFrame(fs *Frames, start int, mapBuilt bool) {
	if t.red == nil {
		return
	}
	hb := t.hb
	if hb == nil || t.secrets().Len() == 0 && !mapBuilt {
		return
	}
	frame := fs.b[start:]
	data, ok := bytes.CutPrefix(frame, []byte("data: "))
	if !ok || len(data) < 2 {
		return // a comment: nothing of the request
	}
	data = data[:len(data)-2] // the blank line
	if !mapBuilt && !t.mayHoldSecret(data) {
		return
	}
	var out []byte
	var changed bool
	if mapBuilt {
		out, changed = t.red.r.AppendEvent(hb.scratch[:0], data, &hb.secrets)
	} else {
		out, changed = t.red.r.AppendScrubbedJSON(hb.scratch[:0], data, &hb.secrets)
	}
	hb.scratch = out[:0]
	if !changed {
		return
	}
	b := append(fs.b[:start], "data: "...)
	b = append(b, out...)
	fs.b = append(b, "\n\n"...)
	fs.ends[len(fs.ends)-1] = int32(len(fs.b))
}

// scrubFrames is the scrubbing pass over the frames of fs rendered as a
// batch (a trace held for an outcome filter, at its end; but for those of
// events built as maps, scrubbed as they were rendered): one search over
// all of them for each secret, and, should one hold a secret (rare: the
// snapshots redacted their headers already), each frame scrubbed as
// scrubFrame does. A secret's JSON form holds no raw line break, so
// whatever the search finds lies inside one frame.
func (t *Tracer) scrubFrames(fs *Frames) {
	if t.red == nil || t.hb == nil || t.secrets().Len() == 0 || !t.mayHoldSecret(fs.b) {
		return
	}
	hb := t.hb
	hb.held.Reset()
	for i := range fs.Len() {
		start := len(hb.held.b)
		hb.held.b = append(hb.held.b, fs.Frame(i)...)
		hb.held.end()
		t.scrubFrame(&hb.held, start, false)
	}
	fs.b, hb.held.b = hb.held.b, fs.b
	fs.ends, hb.held.ends = hb.held.ends, fs.ends
	hb.held.Reset()
}

// mayHoldSecret reports whether the frame's JSON may hold a secret of the
// trace: the JSON form of one (quoted, for one short enough to be
// scrubbed only as a whole string) is among its bytes, or some secret is
// not plain ASCII (whose JSON form depends on what surrounds it). Most
// frames hold none (the snapshots redacted their headers already): they
// cost a search per secret, not a walk of every string.
func (t *Tracer) mayHoldSecret(data []byte) bool {
	hb := t.hb
	if hb.needlesFor != hb.secrets.Len() {
		t.makeNeedles()
	}
	if hb.anyNonASCII {
		return true
	}
	start := 0
	for i, end := range hb.needleEnds {
		if containsAt(data, hb.needles[start:end], int(hb.anchors[i])) {
			return true
		}
		start = int(end)
	}
	return false
}

// containsAt reports whether data holds needle, searching for its byte at
// anchor (its rarest in a trace's JSON, byteRarity) and comparing the
// rest there: bytes.Index searches for its first byte, which in a secret
// is often a letter every key of a frame has.
func containsAt(data, needle []byte, anchor int) bool {
	c := needle[anchor]
	for i := anchor; i <= len(data)-(len(needle)-anchor); {
		j := bytes.IndexByte(data[i:len(data)-(len(needle)-anchor-1)], c)
		if j < 0 {
			return false
		}
		i += j
		if bytes.Equal(data[i-anchor:i-anchor+len(needle)], needle) {
			return true
		}
		i++
	}
	return false
}

// rarestByte is the index of the byte of b that a trace's JSON holds the
// least often (byteRarity), the last of equals.
func rarestByte(b []byte) int {
	at := 0
	for i, c := range b {
		if byteRarity[c] >= byteRarity[b[at]] {
			at = i
		}
	}
	return at
}

// byteRarity ranks bytes by how seldom a trace's JSON holds them: the
// bytes of the kept trace of a forwarded request (refproxy/internal/proxy,
// captureConfig), the most frequent first; a byte it never held is the
// rarest.
var byteRarity = func() (r [256]uint8) {
	for i := range r {
		r[i] = 255
	}
	for i, c := range []byte("\"eta:dsrn,liu0o/chfp mb31{}.g\\7v84y2qxw956S-T\nEPIkM=ARHGzB;ZQL[]CF?O)(Kj") {
		r[c] = uint8(i)
	}
	return r
}()

// makeNeedles writes the JSON form of each secret, as appendString
// writes it inside a string (followed by its closing quote, for a short
// one, which is scrubbed only as a whole string: not by its opening
// quote, which a search would stop at in every string of the frame): the
// escapes of plain ASCII do not depend on what surrounds it. A secret
// that holds another long one is left out: where it is, the other is
// too.
func (t *Tracer) makeNeedles() {
	hb := t.hb
	hb.needles, hb.needleEnds, hb.anchors, hb.anyNonASCII = hb.needles[:0], hb.needleEnds[:0], hb.anchors[:0], false
	for _, v := range hb.secretList {
		if !isASCII(v) {
			hb.anyNonASCII = true
			break
		}
		if len(v) >= redact.MinSubstring && containsShorter(hb.secretList, v) {
			continue
		}
		at := len(hb.needles)
		hb.needles = appendString(hb.needles, v)
		// Without the opening quote; a long one without the closing
		// one too: inside any string.
		n := len(hb.needles)
		copy(hb.needles[at:], hb.needles[at+1:n])
		hb.needles = hb.needles[:n-1]
		if len(v) >= redact.MinSubstring {
			hb.needles = hb.needles[:n-2]
		}
		hb.anchors = append(hb.anchors, int32(rarestByte(hb.needles[at:])))
		hb.needleEnds = append(hb.needleEnds, int32(len(hb.needles)))
	}
	hb.needlesFor = hb.secrets.Len()
}

// containsShorter reports whether v holds one of secrets shorter than it,
// of MinSubstring bytes or more.
func containsShorter(secrets []string, v string) bool {
	for _, s := range secrets {
		if len(s) >= redact.MinSubstring && len(s) < len(v) && strings.Contains(v, s) {
			return true
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
