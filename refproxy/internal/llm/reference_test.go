package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"
)

// The functions below are verbatim copies of parseUsage and PrepareBody as
// they were before they were rewritten to scan their input once; the
// fuzzers check the rewrites against them on every input.

func parseUsageReference(raw []byte) (u Usage, ok bool, err error) {
	if string(raw) == "null" {
		return Usage{}, false, nil
	}
	if !json.Valid(raw) || raw[0] != '{' {
		return Usage{}, true, fmt.Errorf("%w: usage %.64q is not an object", errMalformedUsage, raw)
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
		return Usage{}, true, fmt.Errorf("%w: usage has neither prompt_tokens nor completion_tokens", errMalformedUsage)
	}
	count := func(name string, v []byte, has bool) (uint64, error) {
		if !has {
			return 0, nil
		}
		n, err := parseCount(v)
		if err != nil {
			return 0, fmt.Errorf("%w: %s is %.32q, want an integer >= 0", errMalformedUsage, name, string(v))
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
		return Usage{}, true, fmt.Errorf("%w: token counts overflow", errMalformedUsage)
	}
	return u, true, nil
}

func prepareBodyReference(body []byte) ([]byte, bool) {
	var buf [64]byte
	stream, found, complete := topValue(body, "stream", buf[:0])
	if !complete || !found || string(stream) != "true" {
		return nil, false
	}
	if _, found, _ := topValue(body, "stream_options", buf[:0]); found {
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

// sameUsageResult fails t unless parseUsage and its reference agree on raw:
// the same Usage, ok, error class and error text.
func sameUsageResult(t *testing.T, raw []byte) {
	t.Helper()
	u, ok, err := parseUsage(raw)
	ru, rok, rerr := parseUsageReference(raw)
	if u != ru || ok != rok || (err == nil) != (rerr == nil) ||
		errors.Is(err, errMalformedUsage) != errors.Is(rerr, errMalformedUsage) ||
		(err != nil && err.Error() != rerr.Error()) {
		t.Fatalf("parseUsage(%q) = %+v, %v, %v; reference: %+v, %v, %v", raw, u, ok, err, ru, rok, rerr)
	}
}

func FuzzParseUsage(f *testing.F) {
	for _, s := range []string{
		`null`, ``, ` `, `{}`, ` {}`, `{} `, `{}x`, `[]`, `"x"`, `1`, `{"prompt_tokens":1,"completion_tokens":2}`,
		`{"input_tokens":3,"output_tokens":4}`, `{"prompt_tokens":1,"prompt_tokens":5}`, `{"pr\u006fmpt_tokens":7}`,
		`{"\u0070\u0072\u006f\u006d\u0070\u0074\u005f\u0074\u006f\u006b\u0065\u006e\u0073":7}`,
		`{"prompt_tokens":-1}`, `{"prompt_tokens":1.0}`, `{"prompt_tokens":1e3}`, `{"prompt_tokens":01}`,
		`{"prompt_tokens":18446744073709551615,"completion_tokens":1}`, `{"prompt_tokens":18446744073709551616}`,
		`{"prompt_tokens":"1"}`, `{"prompt_tokens":{"a":[1,2,{"b":null}]},"completion_tokens":true}`,
		`{"a":{"prompt_tokens":1},"completion_tokens":2}`, `{"prompt_tokens":1,}`, `{"prompt_tokens" 1}`,
		`{"prompt_tokens":1 "completion_tokens":2}`, `{"x":"\ud800\u00e9\"\\\/\b\f\n\r\t"}`, `{"x":"\x"}`,
		"{\"x\":\"\x01\"}", "{\"x\":\"\xff\"}", `{"x":[}`, `{"x":tru}`, `{"x":nul,"prompt_tokens":1}`,
		`{"total_tokens":3,"prompt_tokens_details":{"cached_tokens":0},"prompt_tokens":1,"completion_tokens":2}`,
	} {
		f.Add([]byte(s))
	}
	// Deep nesting is TestParseUsageNestingLimit's: seeds that large slow fuzzing down.
	f.Fuzz(sameUsageResult)
}

func TestParseUsageNestingLimit(t *testing.T) {
	// encoding/json rejects documents nested deeper than 10000 levels.
	for _, n := range []int{9998, 9999, 10000, 10001} {
		raw := []byte(`{"a":` + string(bytes.Repeat([]byte("["), n)) + string(bytes.Repeat([]byte("]"), n)) + `,"prompt_tokens":1}`)
		sameUsageResult(t, raw)
		raw = []byte(`{"a":` + string(bytes.Repeat([]byte(`{"b":`), n)) + "0" + string(bytes.Repeat([]byte("}"), n)) + `,"prompt_tokens":1}`)
		sameUsageResult(t, raw)
	}
}

func FuzzPrepareBody(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","stream":true}`, `{"stream":true,"stream_options":null}`, `{"stream":false}`,
		` {"messages":[{"stream":true}],"stream" : true}`, `{"stream":true,"stream":false}`, `{"str\u0065am":true}`,
		`[{"stream":true}]`, `{"stream":true`, `{"x":"}","stream":true}`, `{"stream_options" x : 1, "stream":true}`,
		`{"stream":true,"stream_options"}`, `{"stream_\u006fptions":1,"stream":true}`, `{"stream":true}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, ok := PrepareBody(body)
		rout, rok := prepareBodyReference(body)
		if ok != rok || !bytes.Equal(out, rout) || (out == nil) != (rout == nil) {
			t.Fatalf("PrepareBody(%q) = %q, %v; reference: %q, %v", body, out, ok, rout, rok)
		}
	})
}
