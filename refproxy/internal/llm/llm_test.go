package llm

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

func TestPrepareRequest(t *testing.T) {
	const added = `"stream_options":{"include_usage":true},`
	tests := []struct {
		name, contentType, body, want string
	}{
		{"stream without options gets include_usage", "application/json",
			`{"model":"m","stream":true}`, `{` + added + `"model":"m","stream":true}`},
		{"leading whitespace and charset", "application/json; charset=utf-8",
			" \n{\"stream\": true, \"x\": [1, 2]}", " \n{" + added + "\"stream\": true, \"x\": [1, 2]}"},
		{"no content type, still JSON", "", `{"stream":true}`, `{` + added + `"stream":true}`},
		{"stream false", "application/json", `{"stream":false}`, `{"stream":false}`},
		{"no stream", "application/json", `{"model":"m"}`, `{"model":"m"}`},
		{"stream as string", "application/json", `{"stream":"true"}`, `{"stream":"true"}`},
		{"options present without include_usage", "application/json",
			`{"stream":true,"stream_options":{}}`, `{"stream":true,"stream_options":{}}`},
		{"options include_usage false", "application/json",
			`{"stream":true,"stream_options":{"include_usage":false}}`, `{"stream":true,"stream_options":{"include_usage":false}}`},
		{"not JSON", "application/json", `{"stream":true`, `{"stream":true`},
		{"array", "application/json", `[{"stream":true}]`, `[{"stream":true}]`},
		{"other content type", "text/plain", `{"stream":true}`, `{"stream":true}`},
		{"empty", "application/json", ``, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := http.NewRequest("POST", "http://x/v1/chat/completions", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.contentType != "" {
				r.Header.Set("Content-Type", tt.contentType)
			}
			prepareRequest(r)
			got, err := io.ReadAll(r.Body)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("body = %q, want %q", got, tt.want)
			}
			if r.ContentLength != int64(len(tt.want)) {
				t.Errorf("ContentLength = %d, want %d", r.ContentLength, len(tt.want))
			}
			if tt.want != tt.body && r.Header.Get("Content-Length") != strconv.Itoa(len(tt.want)) {
				t.Errorf("Content-Length header = %q, want %d", r.Header.Get("Content-Length"), len(tt.want))
			}
			if r.GetBody != nil {
				again, _ := r.GetBody()
				if b, _ := io.ReadAll(again); string(b) != tt.want {
					t.Errorf("GetBody = %q, want %q", b, tt.want)
				}
			}
		})
	}
}

func TestPrepareRequestLargeBodies(t *testing.T) {
	big := `{"stream":true,"x":"` + strings.Repeat("a", MaxRequestSize) + `"}`
	for _, known := range []bool{true, false} {
		r, _ := http.NewRequest("POST", "http://x/", strings.NewReader(big))
		if !known {
			r.ContentLength = -1 // chunked: the size shows only while reading
		}
		prepareRequest(r)
		got, err := io.ReadAll(r.Body)
		if err != nil || string(got) != big {
			t.Errorf("Content-Length known %v: body of %d bytes (%v) after PrepareRequest, want the %d bytes untouched", known, len(got), err, len(big))
		}
	}
}

func TestPrepareRequestReadError(t *testing.T) {
	boom := errors.New("boom")
	r, _ := http.NewRequest("POST", "http://x/", io.NopCloser(io.MultiReader(strings.NewReader(`{"stream":`), iotest.ErrReader(boom))))
	prepareRequest(r)
	got, err := io.ReadAll(r.Body)
	if string(got) != `{"stream":` || !errors.Is(err, boom) {
		t.Errorf("forwarded body = %q, %v; want the bytes read then the read error", got, err)
	}
}

// result is what done received.
type result struct {
	u     Usage
	err   error
	calls int
}

// watch runs WatchResponse over body, reading it with reads of at most
// step bytes (0: all at once), and returns what passed and what done got.
func watch(t *testing.T, contentType, body string, step int) (string, *result) {
	t.Helper()
	res := &result{}
	var rd io.Reader = strings.NewReader(body)
	if step > 0 {
		rd = &stepReader{s: body, n: step}
	}
	resp := &http.Response{Header: http.Header{"Content-Type": {contentType}}, Body: io.NopCloser(rd)}
	watchResponse(resp, func(u Usage, err error) { res.u, res.err = u, err; res.calls++ })
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading watched body: %v", err)
	}
	_ = resp.Body.Close()
	return string(got), res
}

// stepReader returns at most n bytes per Read.
type stepReader struct {
	s string
	n int
}

func (r *stepReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), r.n)], r.s)
	r.s = r.s[k:]
	return k, nil
}

const openAIJSON = `{"id":"chatcmpl-1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"a \"usage\": {\"prompt_tokens\": 999}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":30,"completion_tokens":9,"total_tokens":39,"prompt_tokens_details":{"cached_tokens":0}}}`

func chunk(s string) string { return "data: " + s + "\n\n" }

var openAISSE = chunk(`{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"}}],"usage":null}`) +
	chunk(`{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`) +
	": keepalive comment\n\n" +
	chunk(`{"id":"c","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":27,"total_tokens":39}}`) +
	chunk(`[DONE]`)

func TestWatchResponse(t *testing.T) {
	tests := []struct {
		name, contentType, body string
		want                    Usage
		wantErr                 error
	}{
		{"json", "application/json", openAIJSON, Usage{30, 9}, nil},
		{"json with whitespace and escaped key", "application/json", "\n { \"us\\u0061ge\" : { \"prompt_tokens\" : 1 , \"completion_tokens\" : 2 } } ", Usage{1, 2}, nil},
		{"json duplicate usage, last wins", "application/json", `{"usage":{"prompt_tokens":1},"usage":{"prompt_tokens":5}}`, Usage{5, 0}, nil},
		{"json responses api names", "application/json", `{"usage":{"input_tokens":3,"output_tokens":4}}`, Usage{3, 4}, nil},
		{"json nested usage is not top-level", "application/json", `{"choices":[{"usage":{"prompt_tokens":5}}]}`, Usage{}, errNoUsage},
		{"json missing", "application/json", `{"id":"x"}`, Usage{}, errNoUsage},
		{"json null", "application/json", `{"usage":null}`, Usage{}, errNoUsage},
		{"json malformed type", "application/json", `{"usage":"lots"}`, Usage{}, errMalformedUsage},
		{"json negative", "application/json", `{"usage":{"prompt_tokens":-1}}`, Usage{}, errMalformedUsage},
		{"json float", "application/json", `{"usage":{"prompt_tokens":1.5}}`, Usage{}, errMalformedUsage},
		{"json string count", "application/json", `{"usage":{"prompt_tokens":"1"}}`, Usage{}, errMalformedUsage},
		{"json empty usage", "application/json", `{"usage":{}}`, Usage{}, errMalformedUsage},
		{"json overflow", "application/json", `{"usage":{"prompt_tokens":18446744073709551615,"completion_tokens":1}}`, Usage{}, errMalformedUsage},
		{"json garbage", "application/json", `{"usage": {prompt_tokens: 1}}`, Usage{}, errMalformedUsage},
		{"json truncated in usage", "application/json", `{"id":"x","usage":{"prompt_tok`, Usage{}, errTruncated},
		{"json truncated after usage", "application/json", `{"usage":{"prompt_tokens":1},"x":`, Usage{}, errTruncated},
		{"json empty body", "application/json", ``, Usage{}, errNoUsage},
		{"json array", "application/json", `[1,2]`, Usage{}, errNoUsage},
		{"sse", "text/event-stream", openAISSE, Usage{12, 27}, nil},
		{"sse crlf and no space", "text/event-stream", strings.ReplaceAll(strings.ReplaceAll(openAISSE, "\n", "\r\n"), "data: ", "data:"), Usage{12, 27}, nil},
		{"sse cr only", "text/event-stream", strings.ReplaceAll(openAISSE, "\n", "\r"), Usage{12, 27}, nil},
		{"sse usage split over data lines", "text/event-stream", "data: {\"usage\":\ndata: {\"prompt_tokens\":7}}\n\n", Usage{7, 0}, nil},
		{"sse other fields ignored", "text/event-stream", "event: usage\nid: 1\nretry: 5\n" + chunk(`{"usage":{"completion_tokens":3}}`), Usage{0, 3}, nil},
		{"sse without final blank line", "text/event-stream", `data: {"usage":{"prompt_tokens":2}}`, Usage{2, 0}, nil},
		{"sse last usage wins", "text/event-stream", chunk(`{"usage":{"prompt_tokens":1}}`) + chunk(`{"usage":{"prompt_tokens":2}}`), Usage{2, 0}, nil},
		{"sse sniffed without content type", "", openAISSE, Usage{12, 27}, nil},
		{"sse missing", "text/event-stream", chunk(`{"choices":[]}`) + chunk(`[DONE]`), Usage{}, errNoUsage},
		{"sse malformed", "text/event-stream", chunk(`{"usage":"lots"}`) + chunk(`[DONE]`), Usage{}, errMalformedUsage},
		{"sse garbage", "text/event-stream", chunk(`{"id": "x", "usage": {prompt_tokens: 1}`), Usage{}, errTruncated},
		{"sse truncated", "text/event-stream", chunk(`{"choices":[]}`) + `data: {"choices":[],"usage":{"prompt_tok`, Usage{}, errTruncated},
		{"sse empty", "text/event-stream", ``, Usage{}, errNoUsage},
	}
	for _, tt := range tests {
		for _, step := range []int{0, 1, 3, 17} {
			t.Run(tt.name+"/step "+strconv.Itoa(step), func(t *testing.T) {
				got, res := watch(t, tt.contentType, tt.body, step)
				if got != tt.body {
					t.Errorf("body passed through = %q, want %q", got, tt.body)
				}
				if res.calls != 1 {
					t.Fatalf("done called %d times, want 1", res.calls)
				}
				if res.u != tt.want || !errors.Is(res.err, tt.wantErr) || (tt.wantErr == nil) != (res.err == nil) {
					t.Errorf("done(%+v, %v), want done(%+v, %v)", res.u, res.err, tt.want, tt.wantErr)
				}
			})
		}
	}
}

func TestWatchResponseCloseEarly(t *testing.T) {
	tests := []struct {
		name, contentType, body string
		read                    int
		want                    Usage
		wantErr                 error
	}{
		{"sse closed after the usage event", "text/event-stream", openAISSE, strings.Index(openAISSE, "[DONE]"), Usage{12, 27}, nil},
		{"sse closed before the usage event", "text/event-stream", openAISSE, 10, Usage{}, errTruncated},
		{"json closed mid-body", "application/json", openAIJSON, 20, Usage{}, errTruncated},
		{"closed before any byte", "application/json", openAIJSON, 0, Usage{}, errTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := &result{}
			resp := &http.Response{Header: http.Header{"Content-Type": {tt.contentType}}, Body: io.NopCloser(strings.NewReader(tt.body))}
			watchResponse(resp, func(u Usage, err error) { res.u, res.err = u, err; res.calls++ })
			if _, err := io.ReadFull(resp.Body, make([]byte, tt.read)); err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			_ = resp.Body.Close()
			if res.calls != 1 {
				t.Fatalf("done called %d times, want 1", res.calls)
			}
			if res.u != tt.want || !errors.Is(res.err, tt.wantErr) || (tt.wantErr == nil) != (res.err == nil) {
				t.Errorf("done(%+v, %v), want done(%+v, %v)", res.u, res.err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestWatchResponseReadError(t *testing.T) {
	boom := errors.New("connection reset")
	body := io.NopCloser(io.MultiReader(strings.NewReader(`data: {"usage":{"prompt`), iotest.ErrReader(boom)))
	resp := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: body}
	res := &result{}
	watchResponse(resp, func(u Usage, err error) { res.u, res.err = u, err; res.calls++ })
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, boom) {
		t.Errorf("read error = %v, want the backend's %v passed through", err, boom)
	}
	_ = resp.Body.Close()
	if res.calls != 1 || !errors.Is(res.err, errTruncated) {
		t.Errorf("done called %d times with %v, want once with ErrTruncated", res.calls, res.err)
	}
}

func TestWatchResponseNoBody(t *testing.T) {
	res := &result{}
	resp := &http.Response{Header: http.Header{}, Body: http.NoBody}
	watchResponse(resp, func(u Usage, err error) { res.u, res.err = u, err; res.calls++ })
	if res.calls != 1 || !errors.Is(res.err, errNoUsage) {
		t.Errorf("done called %d times with %v, want once with ErrNoUsage", res.calls, res.err)
	}
}

// TestWatchResponseDoesNotBuffer proves each byte is readable as soon as the
// backend sent it: the backend side of a pipe writes the next chunk only
// after the client side has read the previous one through the watcher.
func TestWatchResponseDoesNotBuffer(t *testing.T) {
	pr, pw := io.Pipe()
	resp := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: pr}
	got := make(chan Usage, 1)
	watchResponse(resp, func(u Usage, err error) {
		if err != nil {
			t.Errorf("done error: %v", err)
		}
		got <- u
	})
	frames := strings.SplitAfter(strings.TrimSuffix(openAISSE, "\n\n"), "\n\n")
	frames[len(frames)-1] += "\n\n" // data: [DONE]
	go func() {
		for _, f := range frames {
			if _, err := pw.Write([]byte(f)); err != nil {
				return
			}
		}
		_ = pw.Close()
	}()
	buf := make([]byte, 4096)
	for i, f := range frames[:len(frames)-1] {
		n, err := io.ReadFull(resp.Body, buf[:len(f)])
		if err != nil || string(buf[:n]) != f {
			t.Fatalf("frame %d: read %q, %v; want %q", i, buf[:n], err, f)
		}
		select {
		case u := <-got:
			t.Fatalf("done(%+v) before the stream ended", u)
		default:
		}
	}
	// The [DONE] event ends the stream: done runs before its bytes reach
	// the client, even though the backend has not closed the body yet.
	last := frames[len(frames)-1]
	if n, err := io.ReadFull(resp.Body, buf[:len(last)]); err != nil || string(buf[:n]) != last {
		t.Fatalf("last frame: read %q, %v; want %q", buf[:n], err, last)
	}
	select {
	case u := <-got:
		if u != (Usage{12, 27}) {
			t.Errorf("usage = %+v, want {12 27}", u)
		}
	default:
		t.Fatal("done not called once data: [DONE] was read")
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkWatchSSE(b *testing.B) {
	body := strings.Repeat(chunk(`{"id":"c","choices":[{"index":0,"delta":{"content":"some words of content here"}}],"usage":null}`), 200) +
		chunk(`{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":27}}`) + chunk("[DONE]")
	buf := make([]byte, 32<<10)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		resp := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(body))}
		watchResponse(resp, func(Usage, error) {})
		for {
			if _, err := resp.Body.Read(buf); err != nil {
				break
			}
		}
	}
}

func BenchmarkPrepareRequest(b *testing.B) {
	for _, stream := range []bool{false, true} {
		body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat("hello ", 200) + `"}],"stream":` + strconv.FormatBool(stream) + `}`
		b.Run("stream="+strconv.FormatBool(stream), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				r, _ := http.NewRequest(http.MethodPost, "http://x/", strings.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				prepareRequest(r)
			}
		})
	}
}

func BenchmarkWatchJSON(b *testing.B) {
	buf := make([]byte, 32<<10)
	b.SetBytes(int64(len(openAIJSON)))
	b.ReportAllocs()
	for b.Loop() {
		resp := &http.Response{Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(openAIJSON))}
		watchResponse(resp, func(Usage, error) {})
		for {
			if _, err := resp.Body.Read(buf); err != nil {
				break
			}
		}
		_ = resp.Body.Close()
	}
}

func gzipped(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestWatchResponseEncoded(t *testing.T) {
	tests := []struct {
		name, contentType, encoding, body string
		closeAt                           int // > 0: close after reading this many bytes
		want                              Usage
		wantErr                           error
	}{
		{"gzip json", "application/json", "gzip", gzipped(t, openAIJSON), 0, Usage{30, 9}, nil},
		{"gzip sse", "text/event-stream", "gzip", gzipped(t, openAISSE), 0, Usage{12, 27}, nil},
		{"x-gzip", "application/json", "x-gzip", gzipped(t, openAIJSON), 0, Usage{30, 9}, nil},
		{"gzip missing usage", "application/json", "gzip", gzipped(t, `{"id":"x"}`), 0, Usage{}, errNoUsage},
		{"gzip corrupt", "application/json", "gzip", "\x1f\x8b\x08\x00garbage-garbage-garbage", 0, Usage{}, errTruncated},
		{"gzip cut", "application/json", "gzip", gzipped(t, openAIJSON)[:40], 0, Usage{}, errTruncated},
		{"gzip closed early", "text/event-stream", "gzip", gzipped(t, openAISSE), 10, Usage{}, errTruncated},
		{"brotli", "application/json", "br", "\x0b\x02\x80{}\x03", 0, Usage{}, errUnsupportedEncoding},
		{"identity", "application/json", "identity", openAIJSON, 0, Usage{30, 9}, nil},
	}
	for _, tt := range tests {
		for _, step := range []int{0, 7} {
			t.Run(tt.name+"/step "+strconv.Itoa(step), func(t *testing.T) {
				res := &result{}
				var rd io.Reader = strings.NewReader(tt.body)
				if step > 0 {
					rd = &stepReader{s: tt.body, n: step}
				}
				resp := &http.Response{Header: http.Header{"Content-Type": {tt.contentType}, "Content-Encoding": {tt.encoding}}, Body: io.NopCloser(rd)}
				watchResponse(resp, func(u Usage, err error) { res.u, res.err = u, err; res.calls++ })
				var got []byte
				var err error
				if tt.closeAt > 0 {
					got = make([]byte, tt.closeAt)
					_, err = io.ReadFull(resp.Body, got)
				} else {
					got, err = io.ReadAll(resp.Body)
					if string(got) != tt.body {
						t.Errorf("passed through %q, want the encoded body unchanged", got)
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				_ = resp.Body.Close()
				if res.calls != 1 {
					t.Fatalf("done called %d times, want 1", res.calls)
				}
				if res.u != tt.want || !errors.Is(res.err, tt.wantErr) || (tt.wantErr == nil) != (res.err == nil) {
					t.Errorf("done(%+v, %v), want done(%+v, %v)", res.u, res.err, tt.want, tt.wantErr)
				}
			})
		}
	}
}

func TestWatchResponseLeavesUpgradesAlone(t *testing.T) {
	type rwc struct {
		io.Reader
		io.Writer
		io.Closer
	}
	body := rwc{strings.NewReader(""), io.Discard, io.NopCloser(nil)}
	resp := &http.Response{StatusCode: http.StatusSwitchingProtocols, Header: http.Header{}, Body: body}
	res := &result{}
	watchResponse(resp, func(u Usage, err error) { res.u, res.err = u, err; res.calls++ })
	if _, ok := resp.Body.(io.ReadWriteCloser); !ok {
		t.Errorf("101 body is %T, want the upgraded connection (io.ReadWriteCloser) left in place", resp.Body)
	}
	if res.calls != 1 || !errors.Is(res.err, errNoUsage) {
		t.Errorf("done called %d times with %v, want once with ErrNoUsage", res.calls, res.err)
	}
}

// TestUsageWithUnicodeSpaceIsMalformed: only JSON whitespace may surround
// the usage value; a U+0085 or U+00A0 there makes the document invalid.
func TestUsageWithUnicodeSpaceIsMalformed(t *testing.T) {
	for _, sp := range []string{"\u0085", "\u00a0"} {
		body := `{"id":"x","usage":` + sp + `{"prompt_tokens":3,"completion_tokens":4}}`
		var got Usage
		var gotErr error
		r := Watch(io.NopCloser(strings.NewReader(body)), "application/json", "", func(u Usage, err error) { got, gotErr = u, err })
		if _, err := io.ReadAll(r); err != nil {
			t.Fatal(err)
		}
		r.Close()
		if gotErr == nil || got.Total() != 0 {
			t.Errorf("space %q: usage %+v, err %v; want 0 and an error", sp, got, gotErr)
		}
	}
}

func TestModelOfAndSetModel(t *testing.T) {
	for _, tt := range []struct {
		body, model string
		found       bool
		set         string // SetModel(body, "m2"); "" when it refuses
	}{
		{`{"model":"gpt-4o","messages":[{"role":"user"}]}`, "gpt-4o", true, `{"model":"m2","messages":[{"role":"user"}]}`},
		{`{"messages":[], "stream": true}`, "", false, `{"messages":[],"stream":true,"model":"m2"}`},
		{`{"a":{"model":"inner"},"model":"outer"}`, "outer", true, `{"a":{"model":"inner"},"model":"m2"}`},
		{`{"model":"caf\u00e9"}`, "café", true, `{"model":"m2"}`},
		{`{"model":7}`, "", false, `{"model":"m2"}`},
		{`[1,2]`, "", false, ""},
		{`{"model":"x"`, "", false, ""},
		{``, "", false, ""},
	} {
		m, ok := ModelOf([]byte(tt.body))
		if m != tt.model || ok != tt.found {
			t.Errorf("ModelOf(%s) = %q, %v; want %q, %v", tt.body, m, ok, tt.model, tt.found)
		}
		out, ok := SetModel([]byte(tt.body), "m2")
		if got := string(out); ok != (tt.set != "") || got != tt.set {
			t.Errorf("SetModel(%s) = %s, %v; want %s", tt.body, got, ok, tt.set)
		}
	}
}

// prepareRequest is PrepareBody over a net/http request: it adds
// "stream_options": {"include_usage": true} to a JSON body that has
// "stream": true and no stream_options, fixing Content-Length; any other
// body is left untouched. The tests and the fuzzer drive PrepareBody
// through it.
func prepareRequest(r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !isJSON(ct) {
		return
	}
	if r.ContentLength > MaxRequestSize {
		return
	}
	orig := r.Body
	body, rest, ok := ReadBody(orig, r.ContentLength)
	if !ok {
		r.Body = readCloser{rest, orig}
		return
	}
	_ = orig.Close()
	if out, ok := PrepareBody(body); ok {
		body = out
		r.ContentLength = int64(len(body))
		r.Header.Set("Content-Length", strconv.Itoa(len(body)))
		r.TransferEncoding = nil
	}
	// io.NopCloser of a *bytes.Reader, not a type of our own: net/http
	// sends bodies it knows to be in memory with the headers, in one write.
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
}

// watchResponse is Watch over a net/http response's body: the tests and
// the fuzzer drive the watcher through it.
func watchResponse(resp *http.Response, done func(u Usage, err error)) {
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// The body is the upgraded connection, which the reverse proxy needs
		// as an io.ReadWriteCloser: leave it alone; it carries no usage.
		if done != nil {
			done(Usage{}, fmt.Errorf("%w: protocol upgrade (101)", errNoUsage))
		}
		return
	}
	body := resp.Body
	if body == http.NoBody {
		body = nil
	}
	if w := Watch(body, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Encoding"), done); w != nil {
		resp.Body = w
	} else {
		resp.Body = http.NoBody
	}
}
