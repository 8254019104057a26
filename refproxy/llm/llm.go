// Package llm reads what the rate limiter needs from OpenAI-style LLM traffic:
// it asks streaming requests to report usage, and finds usage in JSON and SSE
// response bodies without buffering or delaying them.
//
// SKELETON: the signatures below are the contract the data plane is written
// against; the bodies are placeholders to be replaced (issue 3).
package llm

import "net/http"

// Usage is the token count of one LLM response.
type Usage struct {
	PromptTokens     uint64
	CompletionTokens uint64
}

// Total is prompt plus completion tokens: what a tokens bucket is charged.
func (u Usage) Total() uint64 { return u.PromptTokens + u.CompletionTokens }

// PrepareRequest adds "stream_options": {"include_usage": true} to a JSON
// request body that has "stream": true and no stream_options, fixing
// Content-Length. Any other body is left untouched; it never fails the request.
func PrepareRequest(r *http.Request) { panic("llm: not implemented") }

// WatchResponse wraps resp.Body so that bytes pass through unchanged and
// unbuffered, and calls done exactly once, when the body reaches EOF or is
// closed (client gone), with the usage found: from a JSON body, or from the
// SSE chunk that carries "usage". err is non-nil when usage was missing,
// malformed or truncated; then u is zero.
func WatchResponse(resp *http.Response, done func(u Usage, err error)) {
	panic("llm: not implemented")
}
