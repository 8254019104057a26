// Package targettest holds the fixtures of the targets' own tests.
package targettest

import "github.com/gwdiag/gwdiag/steps/targets"

// OneRoute is a setup with one echo backend "b" and one route "r" to it,
// on the default listener.
var OneRoute = targets.Setup{Backends: []targets.Backend{{Name: "b", Kind: targets.BackendEcho}},
	Listeners: []targets.Listener{{Name: targets.DefaultListener, Routes: []targets.Route{{Name: "r", PathPrefix: "/", Backend: "b"}}}}}
