// Package configtest holds the standalone configs that tests of several
// packages share, so that each does not write its own. It imports nothing,
// so any test may use it (the data plane's own tests included).
package configtest

import "fmt"

// OneRoute is a config with one bind on a free port (port 0) and one route,
// httpbin, that sends every path to the backend at host:port.
func OneRoute(backend string) string {
	return fmt.Sprintf(`binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: httpbin
      matches: [{path: {pathPrefix: /}}]
      backends: [{host: %q}]
`, backend)
}
