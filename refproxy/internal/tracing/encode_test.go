package tracing

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/golden/trace"
)

// wantJSON is the reference: what encoding/json writes for e, or ok
// false when it refuses it.
func wantJSON(e trace.Event) ([]byte, bool) {
	b, err := json.Marshal(e)
	return b, err == nil
}

func checkAppendEvent(t *testing.T, e trace.Event) {
	t.Helper()
	want, wantOK := wantJSON(e)
	prefix := []byte("data: ")
	got, ok := appendEvent(bytes.Clone(prefix), e)
	if ok != wantOK {
		t.Fatalf("AppendEvent ok %v, json.Marshal ok %v, for %#v", ok, wantOK, e)
	}
	if !ok {
		if !bytes.Equal(got, prefix) {
			t.Fatalf("AppendEvent failed but left %q after the prefix", got[len(prefix):])
		}
		return
	}
	if !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want) {
		t.Fatalf("AppendEvent wrote\n%s\njson.Marshal\n%s", got, want)
	}
}

// nasty are strings that exercise every escape of encoding/json: quotes,
// backslashes, control bytes, HTML characters, DEL, invalid UTF-8, U+2028
// and U+2029, multi-byte runes, and a rune cut short.
var nasty = []string{"", "plain", `q"uo\te`, "\x00\x01\x1f\b\f\n\r\t", "<a href='x'>&amp;</a>", "\x7f", "\xff\xfe",
	"\u2028\u2029", "héllo wörld ✓ 🙂", "\xe2\x82", "a\u00e9\xc3", "</script>", "emoji🙂\x80end"}

// named is a value encoding/json encodes by reflection (a struct with tags).
type named struct {
	A string `json:"a"`
	B int    `json:"b,omitempty"`
}

type label string

func randString(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		return nasty[r.IntN(len(nasty))]
	}
	n := r.IntN(12)
	b := make([]byte, n)
	for i := range b {
		switch r.IntN(4) {
		case 0:
			b[i] = byte(r.IntN(256)) // any byte, invalid UTF-8 included
		default:
			b[i] = byte(' ' + r.IntN(95))
		}
	}
	return string(b)
}

func randFloat(r *rand.Rand) float64 {
	switch r.IntN(6) {
	case 0:
		return math.Float64frombits(r.Uint64()) // NaN and Inf included
	case 1:
		return float64(r.Int64N(1 << 53))
	case 2:
		return r.NormFloat64() * math.Pow(10, float64(r.IntN(60)-30))
	case 3:
		return []float64{0, math.Copysign(0, -1), 1e-6, 1e-7, 1e21, 1e20, 123456789e-15, -1.5e-9}[r.IntN(8)]
	}
	return r.Float64()
}

func randValue(r *rand.Rand, depth int) any {
	k := r.IntN(18)
	if depth > 3 && k >= 12 {
		k = r.IntN(12)
	}
	switch k {
	case 0:
		return nil
	case 1, 2:
		return randString(r)
	case 3:
		return r.IntN(2) == 0
	case 4:
		return r.IntN(1000) - 500
	case 5:
		return r.Int64() >> r.IntN(64)
	case 6:
		return r.Uint64() >> r.IntN(64)
	case 7:
		return randFloat(r)
	case 8:
		return float32(randFloat(r))
	case 9:
		return label(randString(r))
	case 10:
		return named{A: randString(r), B: r.IntN(3)}
	case 11:
		return int32(r.Int32()) - math.MaxInt32/2
	case 12, 13:
		m := randMap(r, depth+1)
		if r.IntN(4) == 0 {
			// The same, rendered ahead (as request snapshots are).
			if j, err := json.Marshal(m); err == nil {
				return rawJSON(j)
			}
		}
		return m
	case 14:
		if r.IntN(5) == 0 {
			return []any(nil)
		}
		s := make([]any, r.IntN(4))
		for i := range s {
			s[i] = randValue(r, depth+1)
		}
		return s
	case 15:
		if r.IntN(5) == 0 {
			return []string(nil)
		}
		s := make([]string, r.IntN(4))
		for i := range s {
			s[i] = randString(r)
		}
		return s
	case 16:
		if r.IntN(5) == 0 {
			return map[string]string(nil)
		}
		m := map[string]string{}
		for range r.IntN(5) {
			m[randString(r)] = randString(r)
		}
		return m
	}
	return uint32(r.Uint32())
}

func randMap(r *rand.Rand, depth int) map[string]any {
	if r.IntN(8) == 0 {
		return nil
	}
	m := map[string]any{}
	for range r.IntN(7) {
		m[randString(r)] = randValue(r, depth)
	}
	return m
}

func randEvent(r *rand.Rand) trace.Event {
	e := trace.Event{EventEnd: r.Int64() >> r.IntN(64), Severity: trace.Severity(randString(r)), Message: randMap(r, 0)}
	if r.IntN(2) == 0 {
		s := r.Int64N(1<<40) - 5
		e.EventStart = &s
	}
	if r.IntN(3) == 0 {
		e.Scope = []string{}
		for range r.IntN(3) {
			e.Scope = append(e.Scope, randString(r))
		}
	}
	if r.IntN(2) == 0 {
		e.RequestID = randString(r)
	}
	return e
}

// TestAppendEventMatchesMarshal: AppendEvent writes what json.Marshal
// writes, byte for byte, for 20 000 random events (nested maps and
// slices, strings with every escape, integers, floats of every range,
// NaN and infinities, which both refuse, named types and structs, which
// appendEvent hands to encoding/json), maps larger than smallMap, and
// for every string of nasty as a key and as a value.
func TestAppendEventMatchesMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 2026))
	for range 20000 {
		checkAppendEvent(t, randEvent(r))
	}
	big, bigs := map[string]any{}, map[string]string{}
	for range 3 * smallMap {
		k := randString(r)
		big[k], bigs[k] = randValue(r, 0), randString(r)
	}
	checkAppendEvent(t, trace.Event{Message: map[string]any{"big": big, "bigs": bigs}})
	for _, k := range nasty {
		for _, v := range nasty {
			checkAppendEvent(t, trace.Event{Severity: trace.SeverityInfo, Message: map[string]any{k: v, "type": "x"}, RequestID: v})
		}
	}
}

// FuzzAppendEvent: for any strings and numbers, AppendEvent writes what
// json.Marshal writes.
func FuzzAppendEvent(f *testing.F) {
	for _, s := range nasty {
		f.Add(s, s, int64(7), 1.5)
	}
	f.Fuzz(func(t *testing.T, k, v string, n int64, x float64) {
		e := trace.Event{EventEnd: n, Severity: trace.Severity(v), RequestID: k, Scope: []string{k, v},
			Message: map[string]any{k: v, "n": n, "x": x, "list": []any{k, x, map[string]any{v: k}}, strings.ToUpper(k): []string{v}}}
		checkAppendEvent(t, e)
	})
}

// TestAppendEventAllocations: encoding an event of small maps allocates
// nothing once the buffer has room (keys are sorted on the stack).
func TestAppendEventAllocations(t *testing.T) {
	s := int64(3)
	e := trace.Event{EventStart: &s, EventEnd: 9, Severity: trace.SeverityInfo, RequestID: "0123456789abcdef",
		Message: map[string]any{"type": "requestSnapshot", "stage": "initialRequest",
			"requestState": map[string]any{"request": map[string]any{"method": "GET", "headers": map[string]any{"host": "x"}}}}}
	buf := make([]byte, 0, 4096)
	n := testing.AllocsPerRun(100, func() { appendEvent(buf[:0], e) })
	if n != 0 {
		t.Errorf("allocs per event encoded = %v, want 0", n)
	}
}

// typicalTrace is the 12 events of a forwarded GET as the proxy traces it
// (four request headers, three response headers, 17 policy kinds).
func typicalTrace() []trace.Event {
	hs := map[string]any{"host": "gw.example", "user-agent": "bench/1.0", "accept": "*/*", "x-request-id": "0123456789abcdef"}
	req := map[string]any{"method": "GET", "uri": "http://gw.example/get?x=1", "path": "/get", "pathAndQuery": "/get?x=1",
		"host": "gw.example", "scheme": "http", "version": "HTTP/1.1", "headers": hs, "startTime": "2026-11-25T21:00:00.123456789Z"}
	src := map[string]any{"address": "127.0.0.1", "port": 40000, "rawAddress": "127.0.0.1", "rawPort": 40000}
	state := map[string]any{"request": req, "source": src}
	final := map[string]any{"request": req, "source": src, "backend": map[string]any{"name": "default/httpbin", "type": "service", "protocol": "http"}}
	eff := map[string]any{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q"} {
		eff["policy-"+k] = nil
	}
	resp := map[string]any{"response": map[string]any{"code": 200, "headers": map[string]any{"content-type": "application/json", "content-length": "312", "x-request-id": "0123456789abcdef"}}}
	start := int64(40)
	msgs := []map[string]any{
		{"type": "requestStarted"},
		{"type": "requestSnapshot", "stage": "initial request", "requestState": state},
		{"type": "requestSnapshot", "stage": "gateway policies", "requestState": state},
		{"type": "routeSelection", "selectedRoute": "default/default/bind/0/listener0/default/httpbin", "evaluatedRoutes": []any{"default/default/bind/0/listener0/default/httpbin"},
			"reasons": []any{map[string]any{"route": "default/default/bind/0/listener0/default/httpbin", "matched": true, "reason": "path prefix / matches /get"}}},
		{"type": "policySelection", "effectivePolicy": eff},
		{"type": "requestSnapshot", "stage": "route policies", "requestState": state},
		{"type": "requestSnapshot", "stage": "final request", "requestState": final},
		{"type": "backendCallStart", "target": "127.0.0.1:8080"},
		{"type": "backendCallResult", "status": 200, "error": nil},
		{"type": "responseSnapshot", "stage": "backend response ready", "requestState": resp},
		{"type": "responseSnapshot", "stage": "final response", "requestState": resp},
		{"type": "requestFinished", "status": 200, "timings": map[string]any{"routeSelectionMicros": 3, "policiesMicros": 5, "backendCallMicros": 180, "responseMicros": 12, "totalMicros": 200}},
	}
	evs := make([]trace.Event, len(msgs))
	for i, m := range msgs {
		evs[i] = trace.Event{EventEnd: int64(10 * i), Severity: trace.SeverityInfo, Message: m, RequestID: "0123456789abcdef"}
		if m["type"] == "backendCallResult" {
			evs[i].EventStart = &start
		}
	}
	return evs
}

// BenchmarkEncodeTrace is what encoding one followed trace as SSE frames
// costs (ns and allocations per trace): with encoding/json, as before, and
// with AppendEvent (appendEventFrame).
func BenchmarkEncodeTrace(b *testing.B) {
	evs := typicalTrace()
	b.Run("encoding-json", func(b *testing.B) {
		var buf bytes.Buffer
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			for _, e := range evs {
				buf.WriteString("data: ")
				if err := json.NewEncoder(&buf).Encode(e); err != nil {
					b.Fatal(err)
				}
				buf.WriteString("\n")
			}
		}
	})
	b.Run("append-event", func(b *testing.B) {
		var buf []byte
		b.ReportAllocs()
		for b.Loop() {
			buf = buf[:0]
			for _, e := range evs {
				buf = appendEventFrame(buf, e)
			}
		}
	})
}

// TestAppendStringMatchesMarshal: appendString writes what json.Marshal
// writes for a string, with every escaped byte, a multi-byte rune, an
// invalid byte and U+2028/9 at every offset of strings longer than a
// word, and for random strings.
func TestAppendStringMatchesMarshal(t *testing.T) {
	check := func(s string) {
		t.Helper()
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
	}
	inserts := []string{`"`, `\`, "<", ">", "&", "\x00", "\b", "\f", "\n", "\r", "\t", "\x1f", "\x7f", "é", "\u2028", "\u2029", "\xff", "\xe2\x80", "😀"}
	base := "Mozilla/5.0 (X11; Linux x86_64) text/html,application/json;q=0.9"
	for n := range 24 {
		s := base[:n]
		check(s)
		for at := 0; at <= n; at++ {
			for _, in := range inserts {
				check(s[:at] + in + s[at:])
				check(s[:at] + in + in + s[at:])
			}
		}
	}
	r := rand.New(rand.NewPCG(13, 17))
	for range 20000 {
		check(randString(r) + randString(r) + randString(r))
	}
}
