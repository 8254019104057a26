package e2e

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/steps/mock"
)

// TestStreamingCountedAtEnd: a slow multi-chunk stream reaches the client
// chunk by chunk (the first chunk arrives while the backend is still held
// mid-stream), is charged only once it has ended, from its final usage
// chunk, and is never cut even though it takes the budget over the limit.
func TestStreamingCountedAtEnd(t *testing.T) {
	e := start(t, tokensConfig(50, 50, time.Minute))

	req, err := http.NewRequest(http.MethodPost, e.base+"/v1/chat/completions", strings.NewReader(chatBody(true)))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"Content-Type": "application/json", mock.HeaderHold: "stream-1", mock.HeaderChunks: "5",
		mock.HeaderChunkDelayMs: "20", mock.HeaderPromptTokens: "30", mock.HeaderCompletionTokens: "50",
	} {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got := resp.Header.Get("X-Ratelimit-Remaining"); got != "50" {
		t.Errorf("stream: x-ratelimit-remaining %q, want 50", got)
	}
	if got := resp.Header.Get(mock.HeaderIncludeUsage); got != "true" {
		t.Errorf("backend saw include_usage=%q, want true (the proxy adds stream_options)", got)
	}
	fr := sse.NewReader(resp.Body)
	first, err := fr.Next()
	if err != nil || !strings.Contains(first.Data, `"role":"assistant"`) {
		t.Fatalf("first frame %+v, %v; want the first content chunk", first, err)
	}
	// The backend is held after its first chunk, so the proxy passed that
	// chunk on before the backend finished. Meanwhile the stream is not
	// charged: another request sees the whole budget less its own token.
	wantReply(t, "request during the stream", e.chat(t, false, 1, 0), http.StatusOK, "50/49", time.Minute)

	e.llm.Release("stream-1")
	frames := []string{first.Data}
	for {
		f, err := fr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading the rest of the stream: %v", err)
		}
		frames = append(frames, f.Data)
	}
	body := strings.Join(frames, "\n")
	if n := strings.Count(body, `"content":"tok`); n != 5 {
		t.Errorf("stream has %d content chunks, want 5:\n%s", n, body)
	}
	if !strings.Contains(body, `"usage":{"prompt_tokens":30,"completion_tokens":50,"total_tokens":80}`) || frames[len(frames)-1] != "[DONE]" {
		t.Errorf("stream was cut or lacks its usage chunk:\n%s", body)
	}
	// 50 - 1 - 80 floors at 0: the budget is exhausted until the window resets.
	wantReply(t, "after the stream", e.chat(t, false, 1, 0), http.StatusTooManyRequests, "50/0", time.Minute)
	if got := e.llm.Count(); got != 2 {
		t.Errorf("LLM backend got %d requests, want 2", got)
	}
}
