// Package features holds the Gherkin features of the conformance suite,
// embedded so that the gwdiag binary runs them outside the repository.
//
// Every scenario carries the tag of its feature (@trace-order, ...). Scenarios
// of optional behaviour also carry @extended: a proxy that lacks it is
// reported as not supporting the feature rather than as failing.
package features

import "embed"

// FS holds every .feature file of this folder.
//
//go:embed *.feature
var FS embed.FS
