// Package targettest holds the fixtures of the targets' own tests.
package targettest

import "github.com/gwdiag/gwdiag/steps/target"

// OneRoute is a setup with one echo backend "b" and one route "r" to it,
// on the default listener.
var OneRoute = target.Setup{Backends: []target.Backend{{Name: "b", Kind: target.BackendEcho}},
	Listeners: []target.Listener{{Name: target.DefaultListener, Routes: []target.Route{{Name: "r", PathPrefix: "/", Backend: "b"}}}}}
