package configcmd

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/exp/golden"

	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
)

// TestExplainGolden: what-ifs against the real proxy's dumps
// (testdata/agentgateway, sources in its README): the YAML the docs print
// (agctl config all -o yaml), a dump with hostnames and policies targeting
// routes, rules and listeners, and one with a method match.
func TestExplainGolden(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"standalone_docs_yaml", []string{"-f", "testdata/agentgateway/inspect-config-standalone.agctl-all-o-yaml.docs.yaml", "--", "http://localhost:3000/headers"}},
		{"k8s_fragments_timeout", []string{"-f", "testdata/agentgateway/k8s-docs-fragments.assembled-dump.json", "--", "http://timeout.example/delay/5"}},
		{"k8s_fragments_no_host", []string{"-f", "testdata/agentgateway/k8s-docs-fragments.assembled-dump.json", "--", "http://nobody.example/"}},
		{"method_mismatch", []string{"-f", "testdata/agentgateway_dump.json", "--", "http://httpbin.local/anything", "-X", "POST"}},
		{"policies_and_services", []string{"-f", "testdata/agentgateway_dump.json", "-o", "json", "--", "http://httpbin.local/anything"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := run(t, append([]string{"explain"}, tt.args...)...)
			if err != nil {
				t.Fatalf("config explain %v: %v\n%s", tt.args, err, out)
			}
			golden.RequireEqual(t, []byte(out))
		})
	}
}

func TestExplainUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"explain", "-f", "testdata/dump.json"}, "a request to evaluate is needed after --: a URL, then curl's -X, -H, -d ...", 2},
		{[]string{"explain", "-f", "testdata/dump.json", "--", "-X", "GET"}, "request args after -- must include at least one http:// or https:// URL", 2},
		{[]string{"explain", "-f", "testdata/dump.json", "-o", "yaml", "--", "http://x/"}, `invalid --output "yaml": want text or json`, 2},
		{[]string{"explain", "-f", "testdata/dump.json", "--port", "70000", "--", "http://x/"}, "invalid --port 70000: want 1-65535", 2},
		{[]string{"explain", "-f", "testdata/dump.json", "--port", "9", "--", "http://x/"}, "testdata/dump.json: the dump has no bind on port 9", 1},
		{[]string{"explain", "-f", "testdata/missing.json", "--", "http://x/"}, "reading config dump", 1},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := run(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) || exitcode.Code(err) != tt.code {
				t.Errorf("error %v (exit %d), want %q and exit %d", err, exitcode.Code(err), tt.want, tt.code)
			}
		})
	}
}

// TestExplainRedactsTheRequest: the what-if quotes the request (its URL,
// a header a route wanted): its credentials are shown redacted, in text
// and JSON, and in clear only with --redact=false.
func TestExplainRedactsTheRequest(t *testing.T) {
	planted := []string{"AIzaPlantExplain01", "Qx_1", "sk-plant-explain-02"}
	req := []string{"--", "http://httpbin.local/anything?key=" + planted[0] + "&access_token=" + planted[1], "-H", "authorization: Bearer " + planted[2]}
	for _, flags := range [][]string{nil, {"-o", "json"}, {"--redact=false"}} {
		out, err := run(t, append(append([]string{"explain", "-f", "testdata/agentgateway_dump.json"}, flags...), req...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", flags, err, out)
		}
		clear := len(flags) == 1 && flags[0] == "--redact=false"
		if got := strings.Contains(out, planted[0]) || strings.Contains(out, "access_token="+planted[1]); got != clear {
			t.Errorf("%v: the query's credentials in clear: %v, want %v\n%s", flags, got, clear, out)
		}
		if !clear && !strings.Contains(out, "key=<redacted:") {
			t.Errorf("%v: no marker where the key was\n%s", flags, out)
		}
	}
	if _, err := run(t, append([]string{"explain", "-f", "testdata/agentgateway_dump.json", "--redact-query-param", "a b"}, req...)...); exitcode.Code(err) != 2 {
		t.Errorf("a bad --redact-query-param: %v, want exit 2", err)
	}
}
