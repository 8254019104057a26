package trace

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sameParse checks that Parse gives what encoding/json gives for b: the
// same Event, deeply, and the same error. It reports whether the fast path
// decided.
func sameParse(t *testing.T, b []byte) (fast bool) {
	t.Helper()
	got, gerr := Parse(b)
	want, werr := parseJSON(b)
	if fmt.Sprint(gerr) != fmt.Sprint(werr) {
		t.Fatalf("Parse(%q): error %v, encoding/json %v", b, gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse(%q):\n got %#v\nwant %#v", b, got, want)
	}
	_, fast = parseFast(string(b))
	return fast
}

// traceFiles are the saved traces of the repository: real proxies' (the
// reference's and agentgateway's), golden traces, the viewer's and the
// suite's test inputs.
func traceFiles(t *testing.T) []string {
	var files []string
	for _, g := range []string{
		"sse/testdata/*/*.jsonl", "sse/testdata/*/*.sse", "../traces/*.jsonl",
		"../../cli/*/testdata/*.jsonl", "../../cli/internal/*/testdata/*.jsonl",
	} {
		m, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 20 {
		t.Fatalf("found %d saved traces, want the 20 and more the repository holds", len(files))
	}
	return files
}

// objects are the JSON objects of a saved trace: its JSON Lines, or its
// SSE data lines.
func objects(b []byte) [][]byte {
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		l = bytes.TrimSuffix(l, []byte("\r"))
		if d, ok := bytes.CutPrefix(l, []byte("data:")); ok {
			l = d
		} else if bytes.HasPrefix(l, []byte(":")) || bytes.HasPrefix(l, []byte("event:")) || bytes.HasPrefix(l, []byte("id:")) {
			continue // SSE comments and fields
		}
		if len(bytes.TrimSpace(l)) > 0 {
			out = append(out, l)
		}
	}
	return out
}

// TestParseFastPath: on every saved trace of the repository, every line
// parses to what encoding/json makes of it, and the real proxies' events
// take the fast path.
func TestParseFastPath(t *testing.T) {
	eachSavedEvent(t, sameParse, "left to encoding/json")
}

// eachSavedEvent checks every line of every saved trace of the repository
// (same fails the test where it differs from encoding/json), and that
// each real proxy's events take the fast path (same says so): a file
// with events left over fails, as "N of M events <left>". The docs'
// traces are excepted: their elided lines ("...") are not JSON, so not
// fast.
func eachSavedEvent(t *testing.T, same func(*testing.T, []byte) bool, left string) {
	for _, f := range traceFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		slow := 0
		objs := objects(b)
		for _, o := range objs {
			if !same(t, o) {
				slow++
			}
		}
		if slow > 0 && !strings.Contains(f, "standalone-latest.docs") && !strings.Contains(f, "standalone-12x.docs") {
			t.Errorf("%s: %d of %d events %s", f, slow, len(objs), left)
		}
	}
}

// TestParseEdges: inputs the fast path must leave to encoding/json, or
// take exactly as it does.
func TestParseEdges(t *testing.T) {
	for _, in := range []string{
		``, `null`, `[]`, `"x"`, `{}`, ` {} `, `{}x`, `{"eventEnd":1}{}`,
		`{"EventEnd":3}`, `{"eventend":3}`, `{"ſeverity":"info"}`, `{"\u0065ventEnd":3}`,
		`{"eventEnd":1,"eventEnd":2}`, `{"message":{"a":1},"message":{"b":2}}`,
		`{"message":{"a":1,"a":2}}`, `{"message":null}`, `{"message":[]}`, `{"message":"x"}`,
		`{"eventStart":1.0}`, `{"eventStart":1e3}`, `{"eventStart":-0}`, `{"eventStart":9223372036854775808}`,
		`{"eventEnd":"1"}`, `{"eventEnd":null}`, `{"eventStart":null}`, `{"severity":null}`, `{"severity":1}`,
		`{"scope":[]}`, `{"scope":null}`, `{"scope":["a",null]}`, `{"scope":["a",1]}`, `{"scope":"a"}`,
		`{"message":{"n":1e400}}`, `{"message":{"n":-0.0}}`, `{"message":{"n":01}}`, `{"message":{"n":1.}}`,
		`{"message":{"n":.5}}`, `{"message":{"n":+1}}`, `{"message":{"n":1E+2}}`, `{"message":{"n":-}}`,
		`{"message":{"s":"\ud83d\ude00 \ud800 \u00e9 \/ \" \\ \b\f\n\r\t \u0000"}}`,
		`{"message":{"s":"\x"}}`, `{"message":{"s":"\u12"}}`, "{\"message\":{\"s\":\"a\tb\"}}",
		"{\"message\":{\"s\":\"\xff\xfe\"}}", "{\"message\":{\"s\":\"\xed\xa0\x80\"}}", "{\"message\":{\"s\":\"é\"}}",
		"{\"message\":{\"\xff\":1}}", `{"message":{"a\"b":1}}`, `{"unknown":{"deep":[1,{"x":"\u00e9"}]}}`,
		`{"unknown":[1,}`, `{"message":{"a":tru}}`, `{"message":{"a":nul}}`, `{"message":{"a":true,}}`,
		`{"message":{"a":[1,2,]}}`, `{,}`, `{"a"}`, `{"a":}`, `{"eventEnd":1,}`, "\ufeff{}",
		`{"message":{"type":"requestStarted"},"requestId":"a\u0062c","eventStart":12,"eventEnd":34,"severity":"warn","scope":["x","y"]}`,
		strings.Repeat(`{"message":{"a":`, 1) + strings.Repeat("[", 300) + strings.Repeat("]", 300) + "}}",
		`{"message":` + strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20001),
	} {
		sameParse(t, []byte(in))
	}
}

// TestParseRandom holds the fast path to encoding/json on random events:
// valid ones of every shape, and the same cut, spliced and garbled.
func TestParseRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 1))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	fast := 0
	for range n {
		b := randomEvent(r)
		if sameParse(t, b) {
			fast++
		}
		sameParse(t, mutate(r, b))
	}
	if fast < n/4 {
		t.Errorf("only %d of %d random events took the fast path: the test does not exercise it", fast, n)
	}
}

// FuzzParse holds the fast path to encoding/json on any input.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"eventStart":null,"eventEnd":1,"severity":"info","message":{"type":"requestStarted","a":[1,"b",{"c":null}]},"requestId":"x"}`))
	f.Add([]byte(`{"message":{"s":"\ud83d\ude00\u00e9"},"scope":["a"],"eventStart":3}`))
	f.Add([]byte(`{"EventEnd":1,"eventEnd":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		sameParse(t, b)
	})
}

var (
	randKeys = []string{
		"eventStart", "eventEnd", "severity", "scope", "message", "requestId",
		"EventEnd", "REQUESTID", "Message", "other", "", "type", "stage", "status",
	}
	randStrings = []string{
		"", "info", "requestStarted", "a b", `q\"uote`, `\u00e9t\u00e9`, `\ud83d\ude00`, `\ud800`, `\/`,
		"caf\u00e9", "\xff", `\n\t`, "x\xe2\x82", "snapshot",
	}
	randNumbers = []string{"0", "-0", "1", "-17", "3.25", "1e3", "1E-2", "9223372036854775807", "9223372036854775808", "1e400", "0.1"}
)

// randomEvent writes a random JSON object, mostly of an event's shape.
func randomEvent(r *rand.Rand) []byte {
	var b bytes.Buffer
	b.WriteString("{")
	n := r.IntN(7)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		k := randKeys[r.IntN(len(randKeys))]
		if r.IntN(3) > 0 { // mostly the known fields, each once
			k = randKeys[i%6]
		}
		fmt.Fprintf(&b, "%s%q%s:%s", ws(r), k, ws(r), ws(r))
		switch k {
		case "eventStart", "eventEnd":
			if r.IntN(4) == 0 {
				b.WriteString("null")
			} else if r.IntN(3) == 0 {
				b.WriteString(randNumbers[r.IntN(len(randNumbers))])
			} else {
				fmt.Fprint(&b, r.Int64N(1<<40))
			}
		case "severity", "requestId":
			fmt.Fprintf(&b, `"%s"`, randStrings[r.IntN(len(randStrings))])
		case "scope":
			b.WriteString("[")
			for j := range r.IntN(3) {
				if j > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, `"%s"`, randStrings[r.IntN(len(randStrings))])
			}
			b.WriteString("]")
		default:
			randomValue(r, &b, 0, true)
		}
	}
	b.WriteString(ws(r) + "}")
	return b.Bytes()
}

func ws(r *rand.Rand) string {
	return []string{"", "", "", " ", "\n\t", "\r\n "}[r.IntN(6)]
}

func randomValue(r *rand.Rand, b *bytes.Buffer, depth int, object bool) {
	kind := r.IntN(8)
	if object || depth < 2 && kind < 2 {
		kind = 0
	}
	if depth > 4 {
		kind = 2 + r.IntN(6)
	}
	switch kind {
	case 0:
		b.WriteString("{")
		for i := range r.IntN(5) {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(b, `%s"%s"%s:`, ws(r), randStrings[r.IntN(len(randStrings))], ws(r))
			randomValue(r, b, depth+1, false)
		}
		b.WriteString("}")
	case 1:
		b.WriteString("[")
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteString("," + ws(r))
			}
			randomValue(r, b, depth+1, false)
		}
		b.WriteString("]")
	case 2, 3:
		fmt.Fprintf(b, `"%s"`, randStrings[r.IntN(len(randStrings))])
	case 4:
		b.WriteString(randNumbers[r.IntN(len(randNumbers))])
	case 5:
		b.WriteString([]string{"true", "false", "null"}[r.IntN(3)])
	default:
		fmt.Fprint(b, r.IntN(1000))
	}
}

// mutate cuts, garbles or splices b.
func mutate(r *rand.Rand, b []byte) []byte {
	b = bytes.Clone(b)
	if len(b) == 0 {
		return b
	}
	i := r.IntN(len(b))
	switch r.IntN(4) {
	case 0:
		return b[:i]
	case 1:
		b[i] = `{}[]",:\ 0a-e.`[r.IntN(14)]
		return b
	case 2:
		return append(b[:i:i], b[r.IntN(len(b)):]...)
	default:
		b[i] ^= 0x80
		return b
	}
}
