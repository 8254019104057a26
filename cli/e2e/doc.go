// Package e2e holds the end-to-end tests of the gwdiag binary: they build
// it, start the reference proxy in-process on free loopback ports, and run
// the binary against it (and against admin servers that misbehave on purpose).
package e2e
