// Package steps is the conformance suite's engine: the godog step
// definitions of the features in features/, the Target interface through
// which a proxy under test is run and configured, the in-process and process
// targets, the runner and its options, and the ConformanceReport with its
// JUnit and Cucumber JSON companions.
//
// Layout: profiles.go (profiles and their core and extended features),
// *_steps.go (step definitions by topic, composed in step_definitions.go),
// state.go (the one
// per-scenario state, carried in the context), runner.go and options.go (Run
// and Options), report.go (ConformanceReport), check.go (the same trace
// checks on recorded traces). The targets live below steps/target: the
// Target interface and Setup in steps/target, one package per way of
// running a proxy (steps/target/inprocess, process, cluster) and what the
// on-machine targets share in steps/target/local. The trace rules live in
// steps/tracecheck, the SSE reader in refproxy/trace/sse.
//
// Each scenario gets a fresh deployment, so rate-limit windows start with
// the scenario and scenarios run in parallel. Features belong to profiles
// (profiles.go: standalone, cluster); a run covers the profiles its target
// hosts. Core features assert only what the spec says (each core scenario
// names its spec parts, features/spec.go); extended features check the
// reference implementation's behaviour where the spec is silent: a proxy
// that fails one is reported as not supporting it unless it claims it
// (Options.SupportedFeatures, AllFeatures). The spec-minimal proxy of
// steps/specminimal keeps that split honest in the tests.
package steps
