// Package steps is the conformance suite's engine: it runs the features of
// features/ with godog against a target and writes the ConformanceReport
// with its JUnit and Cucumber JSON companions.
//
// Layout: runner.go and options.go (Run and Options), profiles.go (profiles
// and their core and extended features), report.go (ConformanceReport),
// check.go (the same trace checks on recorded traces). The step definitions
// and the per-scenario state they share are in steps/stepdefs; the engine
// starts and ends each scenario and decides, from its feature and the
// claims, whether a failing step fails it or makes it unsupported. The
// targets live below steps/targets: the
// Target interface and Setup in steps/targets, one package per way of
// running a proxy (steps/targets/inprocess, process, container, cluster) and what the
// on-machine targets share in steps/targets/local. The trace rules live in
// steps/tracecheck, the SSE reader in golden/trace/sse.
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
