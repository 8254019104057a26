package mock

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxWords caps the generated content, whatever usage a test asks for.
const maxWords = 4096

// LLM is the OpenAI-compatible mock. The zero value is not usable; use NewLLM.
type LLM struct {
	Counter
	holds holds
	ids   atomic.Int64

	mu       sync.Mutex
	lastBody []byte
}

// NewLLM returns a mock LLM with a count of 0.
func NewLLM() *LLM { return &LLM{} }

// LastRequestBody returns the body of the last chat completion request, as received.
func (l *LLM) LastRequestBody() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastBody
}

// Release lets every stream held with x-mock-hold: key (now or later) go on.
func (l *LLM) Release(key string) { l.holds.release(key) }

// chatRequest is the part of an OpenAI chat completion request the mock reads.
type chatRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// options are the per-request x-mock-* settings.
type options struct {
	prompt, completion uint64
	chunks             int
	delay              time.Duration
	usage              string
	status             int
	hold, holdDone     string
}

func parseOptions(h http.Header) (options, error) {
	o := options{prompt: 10, completion: 20, chunks: 3, usage: usageOK}
	var err error
	num := func(name string, dst *uint64) {
		if v := h.Get(name); v != "" && err == nil {
			if *dst, err = strconv.ParseUint(v, 10, 64); err != nil {
				err = fmt.Errorf("%s: want an integer >= 0, got %q", name, v)
			}
		}
	}
	var chunks, delay, status uint64 = 3, 0, 0
	num(HeaderPromptTokens, &o.prompt)
	num(HeaderCompletionTokens, &o.completion)
	num(HeaderChunks, &chunks)
	num(HeaderChunkDelayMs, &delay)
	num(headerStatus, &status)
	if err != nil {
		return o, err
	}
	if chunks < 1 || chunks > 10000 {
		return o, fmt.Errorf("%s: want 1..10000, got %d", HeaderChunks, chunks)
	}
	if status != 0 && (status < 100 || status > 999) {
		return o, fmt.Errorf("%s: want an HTTP status code, got %d", headerStatus, status)
	}
	o.chunks, o.delay, o.status = int(chunks), min(time.Duration(delay)*time.Millisecond, maxDelay), int(status)
	if v := h.Get(HeaderUsage); v != "" {
		switch v {
		case usageOK, UsageMissing, UsageMalformed, UsageGarbage, UsageTruncated, usageAbort:
			o.usage = v
		default:
			return o, fmt.Errorf("%s: want ok, missing, malformed, garbage, truncated or abort, got %q", HeaderUsage, v)
		}
	}
	o.hold, o.holdDone = h.Get(HeaderHold), h.Get(HeaderHoldBeforeDone)
	return o, nil
}

// ServeHTTP counts the request (control endpoints aside) and answers it.
func (l *LLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/__release" && r.Method == http.MethodPost {
		l.Release(r.URL.Query().Get("key"))
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if l.serveControl(w, r) {
		return
	}
	n := l.n.Add(1)
	w.Header().Set(headerRequestCount, strconv.FormatInt(n, 10))
	setCookies(w, r)
	w.Header().Set(HeaderAuthorizationSHA256, AuthorizationSHA256(r.Header.Get("Authorization")))
	if r.URL.Path != "/v1/chat/completions" && r.URL.Path != "/chat/completions" {
		openAIError(w, http.StatusNotFound, "mock LLM serves only POST /v1/chat/completions, got "+r.URL.Path)
		return
	}
	if r.Method != http.MethodPost {
		openAIError(w, http.StatusMethodNotAllowed, "mock LLM: want POST, got "+r.Method)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		openAIError(w, http.StatusBadRequest, "reading body: "+err.Error())
		return
	}
	l.mu.Lock()
	l.lastBody = body
	l.mu.Unlock()
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		openAIError(w, http.StatusBadRequest, "request body is not a chat completion request: "+err.Error())
		return
	}
	o, err := parseOptions(r.Header)
	if err != nil {
		openAIError(w, http.StatusBadRequest, err.Error())
		return
	}
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	w.Header().Set(HeaderIncludeUsage, strconv.FormatBool(includeUsage))
	if o.status != 0 {
		openAIError(w, o.status, fmt.Sprintf("mock error status %d", o.status))
		return
	}
	if req.Model == "" {
		req.Model = "mock-model"
	}
	id := fmt.Sprintf("chatcmpl-mock-%d", l.ids.Add(1))
	if req.Stream {
		l.stream(w, r, req, o, id, includeUsage)
		return
	}
	complete(w, r, req, o, id)
}

func openAIError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"message": msg, "type": "invalid_request_error", "param": nil, "code": nil,
	}})
}

type usageJSON struct {
	PromptTokens     uint64 `json:"prompt_tokens"`
	CompletionTokens uint64 `json:"completion_tokens"`
	TotalTokens      uint64 `json:"total_tokens"`
}

func (o options) usageJSON() usageJSON {
	return usageJSON{PromptTokens: o.prompt, CompletionTokens: o.completion, TotalTokens: o.prompt + o.completion}
}

// words is the generated content: one word per completion token, capped.
func (o options) words() []string {
	w := make([]string, min(o.completion, maxWords))
	for i := range w {
		w[i] = "tok" + strconv.Itoa(i) + " "
	}
	return w
}

// complete writes a non-streaming chat completion.
func complete(w http.ResponseWriter, r *http.Request, req chatRequest, o options, id string) {
	resp := map[string]any{
		"id": id, "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": strings.Join(o.words(), ""), "refusal": nil},
			"logprobs":      nil,
			"finish_reason": "stop",
		}},
	}
	switch o.usage {
	case usageOK, UsageTruncated, usageAbort:
		resp["usage"] = o.usageJSON()
	case UsageMalformed:
		resp["usage"] = "lots"
	}
	b, _ := json.Marshal(resp)
	w.Header().Set("Content-Type", "application/json")
	switch o.usage {
	case UsageGarbage:
		b = []byte(`{"id": "` + id + `", "usage": {prompt_tokens: 1` + "\n")
	case UsageTruncated, usageAbort:
		b = cutInUsage(b)
	default:
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			// Like real providers: compress when the client allows it.
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			_, _ = zw.Write(b)
			_ = zw.Close()
			b = z.Bytes()
			w.Header().Set("Content-Encoding", "gzip")
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	if o.usage == usageAbort {
		flush(w)
		panic(http.ErrAbortHandler)
	}
}

// cutInUsage cuts b in the middle of its usage object.
func cutInUsage(b []byte) []byte {
	i := strings.Index(string(b), `"usage":`)
	if i < 0 {
		return b[:len(b)/2]
	}
	return b[:i+len(`"usage":{"prompt_tok`)]
}

func flush(w http.ResponseWriter) { _ = http.NewResponseController(w).Flush() }

// stream writes an SSE chat completion: content chunks, a finish chunk, the
// usage chunk, then [DONE].
func (l *LLM) stream(w http.ResponseWriter, r *http.Request, req chatRequest, o options, id string, includeUsage bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	created := time.Now().Unix()
	chunk := func(choices []any, usage any) []byte {
		m := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model, "choices": choices}
		if usage != nil {
			m["usage"] = usage
		}
		b, _ := json.Marshal(m)
		return b
	}
	send := func(b []byte) bool {
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		flush(w)
		return true
	}
	words := o.words()
	for i := range o.chunks {
		if i > 0 && o.delay > 0 && !sleep(r, o.delay) {
			return
		}
		lo, hi := i*len(words)/o.chunks, (i+1)*len(words)/o.chunks
		delta := map[string]any{"content": strings.Join(words[lo:hi], "")}
		if i == 0 {
			delta["role"] = "assistant"
		}
		if !send(chunk([]any{map[string]any{"index": 0, "delta": delta, "finish_reason": nil}}, nil)) {
			return
		}
		if i == 0 && o.hold != "" {
			select {
			case <-l.holds.get(o.hold):
			case <-r.Context().Done():
				return
			}
		}
	}
	if !send(chunk([]any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}, nil)) {
		return
	}
	switch o.usage {
	case usageOK:
		if includeUsage && !send(chunk([]any{}, o.usageJSON())) {
			return
		}
	case UsageMalformed:
		if !send(chunk([]any{}, "lots")) {
			return
		}
	case UsageGarbage:
		if !send([]byte(`{"id": "` + id + `", "usage": {prompt_tokens: 1}`)) {
			return
		}
	case UsageTruncated, usageAbort:
		_, _ = fmt.Fprintf(w, "data: %s", cutInUsage(chunk([]any{}, o.usageJSON())))
		flush(w)
		if o.usage == usageAbort {
			panic(http.ErrAbortHandler)
		}
		return
	}
	if o.holdDone != "" {
		select {
		case <-l.holds.get(o.holdDone):
		case <-r.Context().Done():
			return
		}
	}
	send([]byte("[DONE]"))
}

// sleep waits d or until the client goes away; it reports whether to go on.
func sleep(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// AuthorizationSHA256 is what HeaderAuthorizationSHA256 carries for an
// Authorization value: its hex SHA-256, or "" for none.
func AuthorizationSHA256(v string) string {
	if v == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}

// setCookies adds each x-mock-response-header of r to the response, and
// answers each x-mock-set-cookie: NAME of r with a Set-Cookie of a cookie
// NAME with a random value: a credential the client never sent.
func setCookies(w http.ResponseWriter, r *http.Request) {
	for _, h := range r.Header.Values(HeaderResponseHeader) {
		if name, value, ok := strings.Cut(h, ":"); ok && strings.TrimSpace(name) != "" {
			w.Header().Add(strings.TrimSpace(name), strings.TrimSpace(value))
		}
	}
	for _, name := range r.Header.Values(HeaderSetCookie) {
		var v [12]byte
		rand.Read(v[:])
		w.Header().Add("Set-Cookie", name+"="+hex.EncodeToString(v[:])+"; Path=/; HttpOnly")
	}
}
