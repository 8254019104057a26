package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// kind is the error class done reported, for comparing results.
func kind(err error) string {
	for _, e := range []error{errNoUsage, errMalformedUsage, errTruncated} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	if err != nil {
		return "unexpected: " + err.Error()
	}
	return "ok"
}

// watchBytes scans body in reads of at most step bytes (0: all at once).
func watchBytes(t *testing.T, contentType string, body []byte, step int) (Usage, error) {
	t.Helper()
	var (
		u     Usage
		err   error
		calls int
	)
	var rd io.Reader = bytes.NewReader(body)
	if step > 0 {
		rd = &stepReader{s: string(body), n: step}
	}
	resp := &http.Response{Header: http.Header{"Content-Type": {contentType}}, Body: io.NopCloser(rd)}
	watchResponse(resp, func(gu Usage, gerr error) { u, err = gu, gerr; calls++ })
	got, rerr := io.ReadAll(resp.Body)
	if rerr != nil || !bytes.Equal(got, body) {
		t.Fatalf("passed through %q, %v; want %q", got, rerr, body)
	}
	_ = resp.Body.Close()
	if calls != 1 {
		t.Fatalf("done called %d times, want 1", calls)
	}
	if err != nil && u != (Usage{}) {
		t.Fatalf("done(%+v, %v): usage must be zero with an error", u, err)
	}
	return u, err
}

// oracleJSON is the usage of a valid JSON document per encoding/json; known
// is false when the document is not valid JSON.
func oracleJSON(doc []byte) (u Usage, found bool, err error, known bool) {
	if !json.Valid(doc) {
		return Usage{}, false, nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(doc, &m) != nil {
		return Usage{}, false, nil, true // valid JSON, not an object
	}
	raw, ok := m["usage"]
	if !ok {
		return Usage{}, false, nil, true
	}
	u, found, err = refParseUsage(raw)
	return u, found, err, true
}

// refParseUsage is parseUsage written the obvious way, with encoding/json.
func refParseUsage(raw []byte) (u Usage, ok bool, err error) {
	if string(raw) == "null" {
		return Usage{}, false, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return Usage{}, true, errMalformedUsage
	}
	pk, ck := "prompt_tokens", "completion_tokens"
	_, hasP := m[pk]
	_, hasC := m[ck]
	if !hasP && !hasC {
		pk, ck = "input_tokens", "output_tokens"
	}
	p, hasP := m[pk]
	c, hasC := m[ck]
	if !hasP && !hasC {
		return Usage{}, true, errMalformedUsage
	}
	for _, f := range []struct {
		v   json.RawMessage
		has bool
		dst *uint64
	}{{p, hasP, &u.PromptTokens}, {c, hasC, &u.CompletionTokens}} {
		if !f.has {
			continue
		}
		if *f.dst, err = strconv.ParseUint(string(f.v), 10, 64); err != nil {
			return Usage{}, true, errMalformedUsage
		}
	}
	if u.PromptTokens > math.MaxUint64-u.CompletionTokens {
		return Usage{}, true, errMalformedUsage
	}
	return u, true, nil
}

// refAddIncludeUsage is the rule of PrepareRequest written the obvious way.
func refAddIncludeUsage(body []byte) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil || string(top["stream"]) != "true" {
		return false
	}
	_, has := top["stream_options"]
	return !has
}

func FuzzPrepareRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","stream":true}`, `{"stream":true,"stream_options":null}`, `{"stream":false}`,
		` {"messages":[{"stream":true}],"stream" : true}`, `{"stream":true,"stream":false}`, `{"str\u0065am":true}`,
		`[{"stream":true}]`, `{"stream":true`, `{"x":"}","stream":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := http.NewRequest(http.MethodPost, "http://x/", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		prepareRequest(r)
		got, err := io.ReadAll(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		if r.ContentLength != int64(len(got)) {
			t.Fatalf("ContentLength %d for a body of %d bytes", r.ContentLength, len(got))
		}
		added := !bytes.Equal(got, body)
		if added {
			var m map[string]json.RawMessage
			if json.Valid(body) && (json.Unmarshal(got, &m) != nil || string(m["stream_options"]) != `{"include_usage":true}`) {
				t.Fatalf("rewritten body %q is not the request with stream_options added", got)
			}
		}
		if json.Valid(body) && added != refAddIncludeUsage(body) {
			t.Fatalf("PrepareRequest added stream_options: %v, want %v, for %q", added, !added, body)
		}
	})
}

func FuzzJSONUsage(f *testing.F) {
	for _, s := range []string{
		openAIJSON, `{"usage":{"prompt_tokens":1,"completion_tokens":2}}`, `{"usage":null}`, `{"usage":"x"}`,
		`{"us\u0061ge":{"input_tokens":3}}`, `{"a":{"usage":{"prompt_tokens":1}},"usage":{"completion_tokens":4}}`,
		`{"usage":{"prompt_tok`, `[{"usage":{}}]`, `{"usage":{"prompt_tokens":-1}}`, ` {"usage" : [ "}" , "\"" ] } `,
	} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, body []byte, step uint8) {
		checkScan(t, "application/json", body, int(step), oracleJSON)
	})
}

// oracleSSE parses a whole SSE body the simple way (all in memory) and
// returns the usage of the last event with a non-null usage; known is false
// when an event is an object that is not valid JSON.
func oracleSSE(body []byte) (u Usage, found bool, err error, known bool) {
	s := strings.ReplaceAll(strings.ReplaceAll(string(body), "\r\n", "\n"), "\r", "\n")
	var (
		data    []string
		hasData bool
	)
	known = true
	ended := false // at [DONE], the scanner reports at once and reads no further
	dispatch := func() {
		if !hasData || ended {
			return
		}
		doc := strings.Join(data, "\n")
		data, hasData = nil, false
		if strings.HasPrefix(doc, "[DONE]") {
			ended = true
			return
		}
		if t := strings.TrimLeft(doc, " \t\r\n"); !strings.HasPrefix(t, "{") {
			return
		}
		eu, efound, eerr, eknown := oracleJSON([]byte(doc))
		if !eknown {
			known = false
			return
		}
		if efound {
			u, found, err = eu, true, eerr
		}
	}
	for _, line := range strings.Split(s, "\n") {
		if line == "" {
			dispatch()
			continue
		}
		field, value, ok := strings.Cut(line, ":")
		if field != "data" {
			continue
		}
		if ok {
			value = strings.TrimPrefix(value, " ")
		}
		data, hasData = append(data, value), true
	}
	dispatch()
	return u, found, err, known
}

func FuzzSSEUsage(f *testing.F) {
	for _, s := range []string{
		openAISSE, strings.ReplaceAll(openAISSE, "\n", "\r\n"), strings.ReplaceAll(openAISSE, "\n", "\r"),
		"data: {\"usage\":\ndata: {\"prompt_tokens\":7}}\n\n", "data\ndata:{\"usage\":{\"completion_tokens\":1}}\n\n",
		`data: {"usage":{"prompt_tok`, "event: x\n:comment\ndata: [DONE]\n\n", "data: {\"usage\":\"lots\"}\n\n",
		"datadatadata: {\"usage\":{\"prompt_tokens\":1}}\n\n",
		"data: [DONE]\n\ndata: {\"usage\":{\"prompt_tokens\":1}}\n\n", "data: [DO\ndata: NE]\n\ndata: {\"usage\":{\"prompt_tokens\":1}}\n\n",
	} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(1))
		f.Add([]byte(s), uint8(5))
	}
	f.Fuzz(func(t *testing.T, body []byte, step uint8) {
		checkScan(t, "text/event-stream", body, int(step), oracleSSE)
	})
}

// checkScan is the check both usage fuzzers make: reading body in pieces of
// step bytes gives what one read gives, every error is of a known class, and
// where the reference parser can judge the body, the scanner agrees with it.
func checkScan(t *testing.T, contentType string, body []byte, step int,
	oracle func([]byte) (u Usage, found bool, err error, known bool)) {
	t.Helper()
	u, err := watchBytes(t, contentType, body, step)
	whole, wholeErr := watchBytes(t, contentType, body, 0)
	if u != whole || kind(err) != kind(wholeErr) {
		t.Fatalf("reads of %d bytes: (%+v, %v); one read: (%+v, %v)", step, u, err, whole, wholeErr)
	}
	if strings.HasPrefix(kind(err), "unexpected") {
		t.Fatalf("error of no known class: %v", err)
	}
	ou, found, oerr, known := oracle(body)
	if !known {
		return
	}
	want := "ok"
	switch {
	case !found:
		want = kind(errNoUsage)
	case oerr != nil:
		want = kind(oerr)
	}
	if kind(err) != want || (err == nil && u != ou) {
		t.Fatalf("scanner: (%+v, %v); reference parser: (%+v, %s) for %q", u, err, ou, want, body)
	}
}
