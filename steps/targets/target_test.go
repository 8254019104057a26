package targets

import "testing"

// TestNamed: a name the scenario has gives its value; one it lacks gives
// the error a step reports, in the suite's words for a listener and for
// the rest.
func TestNamed(t *testing.T) {
	m := map[string]string{"api": "127.0.0.1:8080"}
	if a, err := Named(m, "backend", "api"); err != nil || a != "127.0.0.1:8080" {
		t.Errorf("Named(api): %q, %v; want the address", a, err)
	}
	for _, tt := range []struct{ what, want string }{
		{"listener", `no listener "web" in this scenario's configuration`},
		{"mock backend", `no mock backend "web" in this scenario`},
	} {
		if a, err := Named(m, tt.what, "web"); err == nil || err.Error() != tt.want || a != "" {
			t.Errorf("Named(%s web): %q, %v; want %q", tt.what, a, err, tt.want)
		}
	}
}
