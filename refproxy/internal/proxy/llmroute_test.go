package proxy

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// rewriteLLMBody reads the body once and applies both rewrites a request
// to an LLM backend may need: the backend's model, then the stream
// options a token-counting route asks for.
func TestRewriteLLMBody(t *testing.T) {
	for _, tt := range []struct {
		name, ctype, body, model string
		tokens                   bool
		want                     string
	}{
		{"model", "application/json", `{"model":"smart","stream":true}`, "gpt-4o-mini", false,
			`{"model":"gpt-4o-mini","stream":true}`},
		{"tokens", "application/json", `{"model":"smart","stream":true}`, "", true,
			`{"stream_options":{"include_usage":true},"model":"smart","stream":true}`},
		{"both", "application/json", `{"model":"smart","stream":true}`, "gpt-4o-mini", true,
			`{"stream_options":{"include_usage":true},"model":"gpt-4o-mini","stream":true}`},
		{"tokens, not streaming", "application/json", `{"model":"smart"}`, "", true,
			`{"model":"smart"}`},
		{"not JSON", "text/plain", `{"model":"smart","stream":true}`, "gpt-4o-mini", true,
			`{"model":"smart","stream":true}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var req fasthttp.Request
			req.Header.SetMethod("POST")
			req.Header.SetContentType(tt.ctype)
			req.SetBodyString(tt.body)
			req.Header.SetContentLength(len(tt.body))
			rewriteLLMBody(&req, tt.model, tt.tokens)
			if got := string(req.Body()); got != tt.want {
				t.Errorf("body: got %s, want %s", got, tt.want)
			}
			if n := req.Header.ContentLength(); n != len(tt.want) {
				t.Errorf("Content-Length: got %d, want %d", n, len(tt.want))
			}
		})
	}
}
