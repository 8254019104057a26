// Package specminimal is a gateway proxy written from the specification
// (shared/spec) alone, doing the least it allows, and differing from the
// reference implementation wherever the spec leaves room: severity "info" on
// every event, eventEnd in milliseconds, the standalone subset of trace
// events, one global trace watcher slot, no ": ready" comment, fixed
// rate-limit windows, x-ratelimit-* headers on 429s only with a decimal
// reset, no stream_options injection, listeners at the top of the config
// dump, 422 for bad admin input, route limits only.
//
// It exists for the conformance suite's own tests: every core scenario must
// pass against it, so a core assertion that the spec does not back fails the
// build. It imports nothing of this repository (standard library only), and
// nothing but tests imports it.
package specminimal
