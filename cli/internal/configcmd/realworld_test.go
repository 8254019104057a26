package configcmd

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"

	"github.com/gwdiag/gwdiag/refproxy/config/configtest"
	"github.com/gwdiag/gwdiag/refproxy/refproxytest"
	"github.com/gwdiag/gwdiag/steps/mock"
)

// realDir holds dumps the real implementation wrote (testdata/agentgateway/README.md).
const realDir = "testdata/agentgateway"

// TestAgctlBackends: `config backends` shows agctl's rows for agctl's own
// test fixtures (testdata/agentgateway/README.md).
func TestAgctlBackends(t *testing.T) {
	const (
		services  = realDir + "/backends_test-TestParseBackendRowsIgnoresUnneededFields.json"
		providers = realDir + "/backends_test-TestParseBackendRowsIncludesTopLevelBackendProviders.json"
	)
	header := "TYPE      NAME   NAMESPACE   ENDPOINT       HEALTH         REQUESTS   LATENCY"
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"services, 0-request endpoint hidden", []string{"backends", "-f", services}, []string{
			header,
			"Service   echo   default     echo-b         1.00           5          302.91ms",
			"Service   echo   default     echo-evicted   Evict (3.3s)   3          500.00ms",
		}},
		{"services --all", []string{"backends", "-f", services, "--all"}, []string{
			header,
			"Service   echo   default     echo-a         1.00           0",
			"Service   echo   default     echo-b         1.00           5          302.91ms",
			"Service   echo   default     echo-evicted   Evict (3.3s)   3          500.00ms",
		}},
		{"AI provider, camelCase statistics", []string{"be", "-f", providers}, []string{
			"TYPE      NAME     NAMESPACE   ENDPOINT   HEALTH   REQUESTS   LATENCY",
			"Backend   openai   default     backend    0.88     1          1466.37ms",
		}},
		{"plain string targets add no row", []string{"backends", "-f", realDir + "/standalone-docs.dump.json", "--all"}, []string{
			"TYPE   NAME   NAMESPACE   ENDPOINT   HEALTH   REQUESTS   LATENCY",
		}},
		{"rows as JSON", []string{"backends", "-f", providers, "-o", "json"}, []string{
			`[`, `  {`, `    "type": "Backend",`, `    "name": "openai",`, `    "namespace": "default",`, `    "endpoint": "backend",`,
			`    "health": 0.875,`, `    "requests": 1,`, `    "latencyMs": 1466.366426`, `  }`, `]`,
		}},
		{"rows as YAML, evicted", []string{"backends", "-f", services, "-o", "yaml"}, []string{
			"- endpoint: echo-b", "  health: 1", "  latencyMs: 302.9091603725", "  name: echo", "  namespace: default", "  requests: 5",
			"  type: Service",
			"- endpoint: echo-evicted", "  evictedFor: 3.3s", "  health: 0", "  latencyMs: 500", "  name: echo", "  namespace: default",
			"  requests: 3", "  type: Service",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := run(t, tt.args...)
			if err != nil {
				t.Fatalf("config %v: %v", tt.args, err)
			}
			if want := strings.Join(tt.want, "\n") + "\n"; got != want {
				t.Errorf("config %v:\ngot\n%s\nwant\n%s", tt.args, got, want)
			}
		})
	}
}

// TestAgctlYAML: `config all -o yaml` writes a dump as agctl does, byte for
// byte (the reference's docs print agctl's output, cut short with "...").
func TestAgctlYAML(t *testing.T) {
	want, err := os.ReadFile(realDir + "/inspect-config-standalone.agctl-all-o-yaml.docs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := run(t, "all", "-f", realDir+"/standalone-docs.dump.json", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.TrimSuffix(string(want), "...\n"); got != w {
		t.Errorf("config all -o yaml:\ngot\n%s\nwant (agctl's)\n%s", got, w)
	}
}

// realDumps are the files of testdata/agentgateway that are dumps.
func realDumps(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(realDir + "/*")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		if !strings.HasSuffix(f, "README.md") {
			out = append(out, f)
		}
	}
	if len(out) != 5 {
		t.Fatalf("found %d real dumps in %s, want 5: %v", len(out), realDir, out)
	}
	return out
}

// TestRealDumpsRoundTrip: every real dump is read; `config all` gives the
// same bytes on every run; what -o json and -o yaml write, --file (and
// -f - from stdin) reads back to the same summary.
func TestRealDumpsRoundTrip(t *testing.T) {
	for _, f := range realDumps(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			want, err := run(t, "all", "-f", f)
			if err != nil {
				t.Fatalf("config all -f %s: %v", f, err)
			}
			for i := range 10 {
				if got, _ := run(t, "all", "-f", f); got != want {
					t.Fatalf("run %d of config all -f %s differs:\ngot\n%s\nwant\n%s", i+2, f, got, want)
				}
			}
			if _, err := run(t, "backends", "-f", f, "--all"); err != nil {
				t.Errorf("config backends -f %s: %v", f, err)
			}
			for _, format := range []string{"json", "yaml"} {
				saved, err := run(t, "all", "-f", f, "-o", format)
				if err != nil {
					t.Fatalf("config all -o %s: %v", format, err)
				}
				path := filepath.Join(t.TempDir(), "dump."+format)
				if err := os.WriteFile(path, []byte(saved), 0o600); err != nil {
					t.Fatal(err)
				}
				if got, err := run(t, "all", "--file", path); err != nil || got != want {
					t.Errorf("config all --file <its own -o %s>: %v\ngot\n%s\nwant\n%s", format, err, got, want)
				}
				if got, err := runIn(t, saved, "all", "-f", "-"); err != nil || got != want {
					t.Errorf("config all -f - <its own -o %s>: %v\ngot\n%s\nwant\n%s", format, err, got, want)
				}
				// Re-saving the saved dump changes nothing.
				if again, err := run(t, "all", "-f", path, "-o", format); err != nil || again != saved {
					t.Errorf("config all -f <saved> -o %s is not what was saved: %v\ngot\n%s\nwant\n%s", format, err, again, saved)
				}
			}
		})
	}
}

// TestK8sPolicies: on the policies the docs show (a cluster dump), targets
// name the gateway, its listener, the route and its rule from the right
// fields, and every kind is named.
func TestK8sPolicies(t *testing.T) {
	out, err := run(t, "all", "-f", realDir+"/k8s-docs-fragments.assembled-dump.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"agentgateway-system/http1        gateway agentgateway-system/agentgateway-proxy                 frontend http\n",
		"agentgateway-system/retry        gateway agentgateway-system/agentgateway-proxy listener http   retry\n",
		"agentgateway-system/retry        route agentgateway-system/retry rule agentgateway-proxy        retry\n",
		"httpbin/httpbin-health           backend service httpbin/httpbin.httpbin.svc.cluster.local      health\n",
		"httpbin/httpbin-keepalive        gateway httpbin/agentgateway-proxy                             frontend tcp\n",
		"httpbin/timeout                  route httpbin/httpbin-timeout rule timeout                     timeout\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config all lacks the line\n%s\nin\n%s", want, out)
		}
	}
	if strings.Contains(out, "{") {
		t.Errorf("config all shows raw JSON:\n%s", out)
	}
	golden.RequireEqual(t, []byte(out))
}

// TestRefproxyDump reads a running reference proxy's dump through the code
// that reads the real ones: its host backend's statistics show as a row, and
// its dump saved with -o json reads back to what the live proxy shows.
func TestRefproxyDump(t *testing.T) {
	srv := httptest.NewServer(mock.NewEcho())
	t.Cleanup(srv.Close)
	be := srv.Listener.Addr().String()
	p := refproxytest.Start(t, configtest.OneRoute(be))
	for range 3 {
		resp, err := http.Get("http://" + p.BindAddrs()[0] + "/x")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	live := []string{"--local", "--admin-url", "http://" + p.AdminAddr()}
	// Statistics are recorded just after the client has the response: poll,
	// bounded.
	var rows string
	for range 500 {
		out, err := run(t, append([]string{"backends"}, live...)...)
		if err != nil {
			t.Fatal(err)
		}
		if rows = out; strings.Contains(out, "   3   ") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	lines := strings.Split(strings.TrimSpace(rows), "\n")
	if len(lines) != 2 {
		t.Fatalf("config backends: want a header and one row, got\n%s", rows)
	}
	f := strings.Fields(lines[1])
	if len(f) != 7 || f[0] != "Backend" || f[1] != be || f[2] != "default" || f[3] != be || f[4] != "1.00" || f[5] != "3" || !strings.HasSuffix(f[6], "ms") {
		t.Errorf("row %q, want Backend %s default %s 1.00 3 <latency>ms", lines[1], be, be)
	}
	want, err := run(t, append([]string{"all"}, live...)...)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := run(t, append([]string{"all", "-o", "json"}, live...)...)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := runIn(t, saved, "all", "-f", "-"); err != nil || got != want {
		t.Errorf("config all -f <saved -o json>: %v\ngot\n%s\nwant (live)\n%s", err, got, want)
	}
	if !regexp.MustCompile(`(?m)^host +` + regexp.QuoteMeta(be) + ` +default +` + regexp.QuoteMeta(be) + ` +1 +3$`).MatchString(want) {
		t.Errorf("config all does not list the host backend %s with its endpoint and 3 requests:\n%s", be, want)
	}
}
