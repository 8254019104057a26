package e2e

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/gwdiag/gwdiag/steps/mock"
)

// TestOpenAISDK drives a token-limited route with the official OpenAI Go
// SDK, streaming and not, and checks the accounting from the client's side:
// each response's x-ratelimit-remaining is the limit minus the usage the SDK
// reported for the earlier responses. The SDK sends no stream_options, so
// streamed usage reaching it proves the proxy asked for it.
func TestOpenAISDK(t *testing.T) {
	const limit = 100
	e := start(t, tokensConfig(limit, limit, time.Minute))
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client := openai.NewClient(
		option.WithBaseURL(e.base+"/v1/"),
		option.WithAPIKey("test-key"),
		option.WithMaxRetries(0), // a 429 must surface, not be retried
		// A client as the SDK makes it by default: Go's transport asks for
		// gzip, the mock compresses non-streamed answers, and the proxy
		// must still read their usage.
		option.WithHTTPClient(&http.Client{Transport: tr}),
	)
	params := openai.ChatCompletionNewParams{
		Model:    openai.ChatModelGPT4oMini,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	}
	withUsage := func(prompt, completion int) []option.RequestOption {
		return []option.RequestOption{
			option.WithHeader(mock.HeaderPromptTokens, strconv.Itoa(prompt)),
			option.WithHeader(mock.HeaderCompletionTokens, strconv.Itoa(completion)),
			option.WithHeader(mock.HeaderChunks, "4"),
		}
	}
	spent := int64(0) // tokens the SDK has seen reported
	// own is the call's own usage when its headers include it (a
	// non-streamed answer, read whole before its headers go out).
	wantRemaining := func(what string, hr *http.Response, own int64) {
		t.Helper()
		want := max(limit-spent-own, 0)
		if hr == nil {
			t.Fatalf("%s: no HTTP response", what)
		}
		if got := hr.Header.Get("X-Ratelimit-Remaining"); got != strconv.FormatInt(want, 10) {
			t.Errorf("%s: x-ratelimit-remaining %q, want %d (limit %d minus %d tokens reported so far)", what, got, want, limit, spent)
		}
	}

	for i, c := range []struct {
		stream             bool
		prompt, completion int
	}{{false, 30, 9}, {true, 20, 21}, {false, 10, 5}, {true, 20, 20}} {
		what := "call " + strconv.Itoa(i+1)
		var hr *http.Response
		opts := append(withUsage(c.prompt, c.completion), option.WithResponseInto(&hr))
		var (
			usage   openai.CompletionUsage
			content string
		)
		if !c.stream {
			comp, err := client.Chat.Completions.New(t.Context(), params, opts...)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			usage, content = comp.Usage, comp.Choices[0].Message.Content
		} else {
			stream := client.Chat.Completions.NewStreaming(t.Context(), params, opts...)
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("%s: stream: %v", what, err)
			}
			usage, content = acc.Usage, acc.Choices[0].Message.Content
		}
		own := int64(0)
		if !c.stream {
			own = int64(c.prompt + c.completion)
		}
		wantRemaining(what, hr, own)
		if !c.stream && !hr.Uncompressed {
			t.Errorf("%s: the answer was not gzip-compressed; the test means to cover that", what)
		}
		if usage.PromptTokens != int64(c.prompt) || usage.CompletionTokens != int64(c.completion) || usage.TotalTokens != int64(c.prompt+c.completion) {
			t.Errorf("%s: SDK usage %d+%d=%d, want %d+%d", what, usage.PromptTokens, usage.CompletionTokens, usage.TotalTokens, c.prompt, c.completion)
		}
		if n := len(strings.Fields(content)); n != c.completion {
			t.Errorf("%s: content has %d words, want %d (the whole response)", what, n, c.completion)
		}
		spent += usage.TotalTokens
	}

	// The last stream was admitted with 5 tokens left and took 40: it was
	// not cut, and the next call is refused, as the SDK sees it.
	var hr *http.Response
	_, err := client.Chat.Completions.New(t.Context(), params, append(withUsage(1, 1), option.WithResponseInto(&hr))...)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("call after the budget: err = %v, want an *openai.Error with status 429", err)
	}
	wantRemaining("refused call", apiErr.Response, 0)
	if got := e.llm.Count(); got != 4 {
		t.Errorf("LLM backend got %d requests, want 4", got)
	}
}
