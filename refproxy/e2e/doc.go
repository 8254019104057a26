// Package e2e holds end-to-end tests of local rate limiting through the
// whole reference proxy: refproxy.New(cfg).Start with localRateLimit on
// routes and gateway-wide policies, in front of the mock backends of
// steps/mock, driven by plain HTTP clients and the official OpenAI Go SDK.
//
// Each test file is one behaviour (burst, token overage, streaming, reset,
// several entries, refused requests, the SDK, concurrency, and the matrix
// of hostile backends and clients in hostile_test.go: what the client
// gets, what the trace says and what the backend's health becomes);
// helpers_test.go starts the pieces. The package has no non-test code besides this comment.
package e2e
