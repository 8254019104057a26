package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// sameHeader checks that ParseHeader gives what encoding/json's Event
// gives for b: HeaderOf it, or the same error, and keeps nothing of its
// input (the bytes it read are overwritten before the header is
// compared). It reports whether the header scan decided.
func sameHeader(t *testing.T, b []byte) (fast bool) {
	t.Helper()
	in := bytes.Clone(b)
	got, gerr := ParseHeader(in)
	for i := range in {
		in[i] = '#'
	}
	ev, werr := parseJSON(b)
	if fmt.Sprint(gerr) != fmt.Sprint(werr) {
		t.Fatalf("ParseHeader(%q): error %v, encoding/json %v", b, gerr, werr)
	}
	if want := HeaderOf(ev); werr == nil && got != want {
		t.Fatalf("ParseHeader(%q):\n got %#v\nwant %#v", b, got, want)
	}
	_, fast = parseHeaderFast(&decoder{s: string(b)})
	// compact: what json.Compact says, where the scan decided; never
	// claimed of JSON it would change.
	if _, compact, err := parseHeaderCompact(b); err == nil {
		var c bytes.Buffer
		isCompact := json.Compact(&c, b) == nil && bytes.Equal(c.Bytes(), b)
		if compact && !isCompact || fast && compact != isCompact {
			t.Fatalf("ParseHeaderCompact(%q): compact %v, json.Compact says %v", b, compact, isCompact)
		}
	}
	return fast
}

// TestParseHeaderSavedTraces: on every saved trace of the repository, every
// line's header is what encoding/json's event gives, and the real proxies'
// events take the scan.
func TestParseHeaderSavedTraces(t *testing.T) {
	eachSavedEvent(t, sameHeader, "left to Parse")
}

// TestParseHeaderEdges: the header's fields where they are missing, of
// another type, given twice or nested otherwise, and input the scan must
// leave to Parse.
func TestParseHeaderEdges(t *testing.T) {
	for _, in := range []string{
		``, `null`, `{}`, `{"message":null}`, `{"message":[]}`, `{"message":{}}`, `{}x`,
		`{"message":{"type":"requestFinished"},"requestId":"r1","eventEnd":7}`,
		`{"message":{"type":1}}`, `{"message":{"type":null}}`, `{"message":{"type":{"a":"b"}}}`,
		`{"message":{"type":"a","type":2}}`, `{"message":{"type":2,"type":"b"}}`, `{"message":{"typ\u0065":"x"}}`,
		`{"message":{"Type":"x"}}`, `{"message":{"type":"\u0072equestFinished"}}`, "{\"message\":{\"type\":\"\xff\"}}",
		`{"message":{"status":503}}`, `{"message":{"status":"503"}}`, `{"message":{"status":5.5e2}}`,
		`{"message":{"status":1e400}}`, `{"message":{"status":-0}}`, `{"message":{"status":01}}`,
		`{"message":{"status":503,"status":null}}`, `{"message":{"status":[503]}}`, `{"message":{"status":-}}`,
		`{"message":{"status":x}}`, `{"message":{"status":tru}}`,
		`{"message":{"requestState":{"response":{"code":404}}}}`,
		`{"message":{"requestState":{"response":{"code":"404"}}}}`,
		`{"message":{"requestState":{"response":{"code":404,"code":true}}}}`,
		`{"message":{"requestState":{"response":{"code":404},"response":{}}}}`,
		`{"message":{"requestState":{"response":{"code":404}},"requestState":null}}`,
		`{"message":{"requestState":{"response":{"code":404}},"requestState":{"response":{"code":500}}}}`,
		`{"message":{"requestState":{"response":[{"code":404}]}}}`, `{"message":{"requestState":[]}}`,
		`{"message":{"requestState":{"response":{"code":1e999}}}}`, `{"message":{"requestState":{"response":{"code":4,}}}}`,
		`{"message":{"response":{"code":404}}}`, `{"message":{"requestState":{"code":404}}}`,
		`{"message":{"requestState":{"response":{"headers":{"a":["b"]},"code":200}}}}`,
		`{"message":{"type":"a"},"message":{"type":"b"}}`, `{"requestId":"a","requestId":"b"}`,
		`{"RequestId":"a"}`, `{"requestId":1}`, `{"requestId":"\u0061\ud800"}`, `{"eventEnd":1.5}`,
		`{"eventEnd":"1"}`, `{"eventStart":"1"}`, `{"severity":1}`, `{"scope":["a",null]}`, `{"scope":[1]}`,
		`{"other":{"type":"x","status":1}}`, `{"message":{"a":[1,2,]}}`, `{"message":{"a":{"b":}}}`,
		`{"message":{"requestState":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + "}}",
		`{"message":{"requestState":{"response":{"code":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + "}}}}",
		`{"x":` + strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20001),
	} {
		sameHeader(t, []byte(in))
	}
}

// TestParseHeaderRandom holds the scan to encoding/json on random events
// whose messages use the header's names in every shape, and the same cut,
// spliced and garbled; and on the random events of TestParseRandom.
func TestParseHeaderRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 2))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	fast := 0
	for range n {
		b := randomHeaderEvent(r)
		if sameHeader(t, b) {
			fast++
		}
		sameHeader(t, mutate(r, b))
		e := randomEvent(r)
		sameHeader(t, e)
		sameHeader(t, mutate(r, e))
	}
	if fast < n/4 {
		t.Errorf("only %d of %d random events took the scan: the test does not exercise it", fast, n)
	}
}

// FuzzParseHeader holds the scan to encoding/json on any input.
func FuzzParseHeader(f *testing.F) {
	f.Add([]byte(`{"eventEnd":1,"message":{"type":"requestFinished","status":200},"requestId":"x"}`))
	f.Add([]byte(`{"message":{"type":"responseSnapshot","requestState":{"response":{"code":503,"code":"x"}}}}`))
	f.Add([]byte(`{"message":{"typ\u0065":"a","type":"b"},"scope":["a"],"eventStart":3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		sameHeader(t, b)
	})
}

var (
	headerKeys   = []string{"type", "status", "requestState", "response", "code", "typ\\u0065", "Type", "other"}
	headerValues = []string{`"requestFinished"`, `"responseSnapshot"`, `"r\u0065quest"`, `"` + "\xff" + `"`, "null", "true", "503", "-0", "5.5e2", "1e400", `"200"`, "[]", "[1,{}]"}
)

// randomHeaderEvent writes an event whose message holds the header's
// fields, missing, repeated, of the wrong type or nested elsewhere.
func randomHeaderEvent(r *rand.Rand) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"eventEnd":%d,%s"requestId":"r%d",%s"message":`, r.IntN(1000), ws(r), r.IntN(9), ws(r))
	randomHeaderObject(r, &b, 0)
	b.WriteString("}")
	return b.Bytes()
}

func randomHeaderObject(r *rand.Rand, b *bytes.Buffer, depth int) {
	b.WriteString("{")
	for i := range r.IntN(5) {
		if i > 0 {
			b.WriteString("," + ws(r))
		}
		fmt.Fprintf(b, `"%s":%s`, headerKeys[r.IntN(len(headerKeys))], ws(r))
		if depth < 3 && r.IntN(3) == 0 {
			randomHeaderObject(r, b, depth+1)
		} else {
			b.WriteString(headerValues[r.IntN(len(headerValues))])
		}
	}
	b.WriteString("}")
}

// TestHeaderReaderMatchesParseHeader: a HeaderReader reading events one
// after another, from one buffer reused as a stream reader reuses it,
// gives what ParseHeaderCompact gives for each: over every saved trace,
// and over random sequences where the request state repeats, changes by
// a byte, is cut short, is followed by more members or by garbage, or
// holds whitespace.
func TestHeaderReaderMatchesParseHeader(t *testing.T) {
	check := func(name string, events [][]byte) {
		t.Helper()
		var r HeaderReader
		var buf []byte
		for i, e := range events {
			want, wantCompact, wantErr := parseHeaderCompact(e)
			buf = append(buf[:0], e...)
			got, gotCompact, gotErr := r.Parse(buf)
			for j := range buf {
				buf[j] = '#' // the reader keeps nothing of its input
			}
			if got != want || gotCompact != wantCompact || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Fatalf("%s: event %d %q:\n got %#v compact %v err %v\nwant %#v compact %v err %v",
					name, i, e, got, gotCompact, gotErr, want, wantCompact, wantErr)
			}
		}
	}
	for _, f := range traceFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		check(f, objects(b))
	}
	states := []string{
		`{"request":{"headers":{"host":"a"}}}`, `{"request":{"headers":{"host":"b"}}}`,
		`{"response":{"code":200,"headers":{}}}`, `{"response":{"code":503}}`, `{"response":{"code":"503"}}`,
		`{"response":{"code":200},"response":{"code":404}}`, `{ "response" : {"code":201} }`,
		`{"request":{"headers":{"host":"\u00e9"}}}`, `{"a":[1,2,{"b":null}]}`, `{}`,
	}
	tails := []string{`}}`, `,"stage":"x","type":"requestSnapshot"}}`, `,"status":500}}`, `}},"requestId":"r1"}`, `}} x`, `,}}`, `}`, ``}
	r := rand.New(rand.NewPCG(11, 13))
	for seq := range 3000 {
		var events [][]byte
		for range 1 + r.IntN(8) {
			st := states[r.IntN(len(states))]
			switch r.IntN(6) {
			case 0:
				st = st[:r.IntN(len(st)+1)] // cut short
			case 1:
				b := []byte(st)
				b[r.IntN(len(b))] ^= byte(1 << r.IntN(7)) // a byte changed
				st = string(b)
			}
			e := `{"eventEnd":1,"message":{"requestState":` + st + tails[r.IntN(len(tails))]
			if r.IntN(4) == 0 {
				e = `{"eventEnd":2,"message":{"type":"responseSnapshot","requestState":` + st + `,"requestState":` + states[r.IntN(len(states))] + `}}`
			}
			events = append(events, []byte(e))
		}
		check(fmt.Sprintf("sequence %d", seq), events)
	}
}
