package stepdefs

import (
	"strings"
	"testing"
)

// TestBundleConfigDumpRedacted: the config dump a failure bundle keeps
// shows neither the credentials its config holds (a proxy that does not
// redact its dump: keys the run never planted) nor any the run planted;
// what is not JSON is redacted as a capture is.
func TestBundleConfigDumpRedacted(t *testing.T) {
	x := NewSecrets()
	planted := x.Plant("authorization")
	dump := `{"policies":[{"key":"backend/openai:backendAuth","policy":{"backend":{"backendAuth":{"key":"sk-config-held-0001"}}}}],` +
		`"binds":[{"listeners":{"l":{"routes":{"r":{"name":"r","inlinePolicies":[{"requestHeaderModifier":{"set":{"authorization":"Bearer up-held-0002"}}}],"note":"` + planted + `"}}}}}]}`
	out := string(x.Config([]byte(dump)))
	for _, s := range []string{"sk-config-held-0001", "up-held-0002", planted} {
		if strings.Contains(out, s) {
			t.Errorf("the bundle's dump shows %q:\n%s", s, out)
		}
	}
	if !strings.Contains(out, `"key":"backend/openai:backendAuth"`) || !strings.Contains(out, `"name":"r"`) {
		t.Errorf("the dump lost what is no credential:\n%s", out)
	}
	text := string(x.Config([]byte("not JSON\nauthorization: Bearer " + planted + "\n")))
	if strings.Contains(text, planted) {
		t.Errorf("a dump that is not JSON keeps a credential:\n%s", text)
	}
}
