package configcmd

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
)

// unredactedDump is the real proxy's standalone dump
// (testdata/agentgateway/standalone-docs.dump.json) as a proxy that does
// not redact its config would write it: DERIVED, with credentials planted
// in its route's inline policies (a header modifier's authorization, an
// apiKey policy's keys, a basicAuth htpasswd), a match of its route on an
// authorization header and a ?key= parameter, a backendAuth policy's key
// and a URL's password.
// Each planted value holds "PLANTED" or is k3P.
const unredactedDump = "testdata/unredacted_dump.json"

var planted = regexp.MustCompile(`PLANTED|k3P`)

// warning is what --redact=false says on stderr.
const warning = "warning: --redact=false: credentials (authorization, cookie, API-key headers, ...) are shown in clear\n"

// TestConfigRedactsTheDump: what config all, backends and explain print of
// a dump that holds its config's credentials shows none of them, in every
// format and from a file or stdin, JSON or the YAML config all writes; a
// marker stands where each was. --redact=false shows them.
func TestConfigRedactsTheDump(t *testing.T) {
	raw, err := os.ReadFile(unredactedDump)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(planted.FindAll(raw, -1)); n != 8 {
		t.Fatalf("%s holds %d planted values, want 8", unredactedDump, n)
	}
	yaml, err := run(t, "all", "-f", unredactedDump, "-o", "yaml", "--redact=false")
	yaml = strings.TrimPrefix(yaml, warning)
	if err != nil || len(planted.FindAllString(yaml, -1)) != 8 {
		t.Fatalf("--redact=false -o yaml: %v, %d planted values shown, want 8\n%s", err, len(planted.FindAllString(yaml, -1)), yaml)
	}
	req := []string{"--", "http://localhost:3000/get", "-H", "x-api-key: k3P"}
	for _, tt := range []struct {
		name, stdin string
		args, req   []string
		markers     int // at least
	}{
		{"all", "", []string{"all", "-f", unredactedDump}, nil, 0},
		{"all -o json", "", []string{"all", "-f", unredactedDump, "-o", "json"}, nil, 6},
		{"all -o yaml", "", []string{"all", "-f", unredactedDump, "-o", "yaml"}, nil, 6},
		{"all -o yaml of the YAML", yaml, []string{"all", "-f", "-", "-o", "yaml"}, nil, 6},
		{"backends --all", "", []string{"backends", "-f", unredactedDump, "--all", "-o", "yaml"}, nil, 0},
		{"explain", "", []string{"explain", "-f", unredactedDump}, req, 4},
		{"explain -o json", "", []string{"explain", "-f", unredactedDump, "-o", "json"}, req, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runIn(t, tt.stdin, append(tt.args, tt.req...)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if m := planted.FindAllString(out, -1); len(m) > 0 {
				t.Errorf("%d planted credentials shown (%q):\n%s", len(m), m, out)
			}
			if n := strings.Count(out, "redacted:"); n < tt.markers { // JSON: \u003credacted:
				t.Errorf("%d markers, want %d or more:\n%s", n, tt.markers, out)
			}
			clear, err := runIn(t, tt.stdin, append(append(tt.args, "--redact=false"), tt.req...)...)
			if err != nil {
				t.Fatalf("--redact=false: %v\n%s", err, clear)
			}
			if tt.markers > 0 && !planted.MatchString(clear) {
				t.Errorf("--redact=false shows no planted credential:\n%s", clear)
			}
		})
	}
	if _, err := run(t, "all", "-f", unredactedDump, "--redact-header", "a b"); exitcode.Code(err) != 2 {
		t.Errorf("a bad --redact-header: %v, want exit 2", err)
	}
}

// TestRealDumpsAsBefore: the real proxy's dumps hold no credential: what
// config prints of them is the same redacted or not.
func TestRealDumpsAsBefore(t *testing.T) {
	for _, f := range []string{"testdata/agentgateway/standalone-docs.dump.json", "testdata/agentgateway/k8s-docs-fragments.assembled-dump.json",
		"testdata/agentgateway/inspect-config-standalone.agctl-all-o-yaml.docs.yaml", "testdata/agentgateway_dump.json"} {
		for _, o := range []string{"short", "json", "yaml"} {
			red, err := run(t, "all", "-f", f, "-o", o)
			if err != nil {
				t.Fatalf("%s -o %s: %v", f, o, err)
			}
			clear, _ := run(t, "all", "-f", f, "-o", o, "--redact=false")
			if clear = strings.TrimPrefix(clear, warning); red != clear {
				t.Errorf("%s -o %s: redacting changed it", f, o)
			}
		}
	}
}
