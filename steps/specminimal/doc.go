// Package specminimal is a gateway proxy written from the specification
// (shared/spec) alone, doing the least it allows, and differing from the
// reference implementation wherever the spec leaves room: severity "info" on
// every event, eventEnd in milliseconds, the standalone subset of trace
// events, one global trace watcher slot, no comment frames on the trace
// stream, fixed rate-limit windows, x-ratelimit-* headers on 429s only with
// a decimal reset, no stream_options injection, 502 for a backend that
// cannot be reached, listeners at the top of the config dump, 422 for bad
// admin input, route limits only.
//
// It exists for the conformance suite's own tests: every core scenario must
// pass against it, so a core assertion that the spec does not back fails the
// build. It is a test fixture, not a proxy to run in front of anything.
//
// Files: proxy.go (configuration, start and stop, the data plane: route,
// limit, forward), trace.go (the /debug/trace watcher slot and its events),
// limits.go (fixed windows, and the LLM usage read from a response as it
// passes), admin.go (the other admin endpoints).
//
// It imports the standard library only, nothing of this repository, and
// nothing but the suite's tests and its cmd/specminimal binary imports it.
package specminimal
