package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/steps/mock"

	"github.com/gwdiag/gwdiag/golden/trace/sse"
)

// TestStreamCountedWhenClientGoesAway: a client that leaves after the usage
// chunk but before the stream ends is still charged, once the proxy notices
// it has gone; nothing crashes and the route keeps serving.
func TestStreamCountedWhenClientGoesAway(t *testing.T) {
	e := start(t, tokensConfig(100, 100, time.Minute))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/v1/chat/completions", strings.NewReader(chatBody(true)))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"Content-Type": "application/json", mock.HeaderHoldBeforeDone: "gone",
		mock.HeaderPromptTokens: "30", mock.HeaderCompletionTokens: "9",
	} {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	fr := sse.NewReader(resp.Body)
	for {
		f, err := fr.Next()
		if err != nil {
			t.Fatalf("reading the stream before its usage chunk: %v", err)
		}
		if strings.Contains(f.Data, `"usage":{`) {
			break // the backend now holds the stream before [DONE]
		}
	}
	cancel()
	resp.Body.Close()
	defer e.llm.Release("gone")

	// Zero-token requests do not change the budget, so polling with them
	// shows when the stream's 39 tokens are taken.
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := e.chat(t, false, 0, 0)
		if r.status != http.StatusOK {
			t.Fatalf("poll: status %d, want 200", r.status)
		}
		if r.remaining() == 61 {
			break
		}
		if r.remaining() != 100 || time.Now().After(deadline) {
			t.Fatalf("remaining %d, want 100 until the stream is charged, then 61", r.remaining())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
