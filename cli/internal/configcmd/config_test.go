package configcmd

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/charmbracelet/x/exp/golden"
	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/golden/configdump"
)

// run executes `config <args>` as the root command would and returns stdout.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return runIn(t, "", args...)
}

// runIn is run with stdin.
func runIn(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "gwdiag", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(NewCommand())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(append([]string{"config"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestGoldenOutput(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"backends", []string{"backends", "--file", "testdata/dump.json"}},
		{"backends_all", []string{"b", "-f", "testdata/dump.json", "--all"}},
		{"all_short", []string{"all", "-f", "testdata/dump.json"}},
		{"all_yaml", []string{"all", "-f", "testdata/dump.json", "-o", "yaml"}},
		{"all_json", []string{"all", "-f", "testdata/dump.json", "-o", "json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := run(t, tt.args...)
			if err != nil {
				t.Fatalf("config %v: %v", tt.args, err)
			}
			golden.RequireEqual(t, []byte(out))
		})
	}
}

func TestAliases(t *testing.T) {
	want, err := run(t, "backends", "-f", "testdata/dump.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"be", "-f", "testdata/dump.json"}, {"b", "-f", "testdata/dump.json"}} {
		got, err := run(t, args...)
		if err != nil || got != want {
			t.Errorf("config %v = %q, %v; want the same as config backends", args, got, err)
		}
	}
}

func TestLocalReadsAdmin(t *testing.T) {
	dump, err := os.ReadFile("testdata/dump.json")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/config_dump" {
			http.NotFound(w, r)
			return
		}
		w.Write(dump)
	}))
	defer srv.Close()
	want, _ := run(t, "backends", "-f", "testdata/dump.json")
	got, err := run(t, "backends", "--local", "--admin-url", srv.URL)
	if err != nil || got != want {
		t.Errorf("backends --local:\ngot  %q (%v)\nwant %q", got, err, want)
	}
}

func TestErrors(t *testing.T) {
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	defer broken.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	notJSON := t.TempDir() + "/bad.json"
	os.WriteFile(notJSON, []byte("{nope"), 0o600)
	wrongType := t.TempDir() + "/wrong.json"
	os.WriteFile(wrongType, []byte("{\n  \"services\": [\n    {\"name\": \"a\", \"endpoints\": \"x\"}]}"), 0o600)
	list := t.TempDir() + "/list.yaml"
	os.WriteFile(list, []byte("- a\n- b\n"), 0o600)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad output", []string{"all", "-f", "testdata/dump.json", "-o", "xml"}, `invalid --output "xml": want short, json or yaml`},
		{"bad backends output", []string{"backends", "-f", "testdata/dump.json", "-o", "wide"}, `invalid --output "wide": want short, json or yaml`},
		{"wrong type names the field and line", []string{"backends", "-f", wrongType}, wrongType + ": not a config dump: line 3, column 34: field services.endpoints: want an array, got a JSON string"},
		{"not an object", []string{"all", "-f", list}, list + ": not a config dump: want an object (binds, backends, services, policies, ...), got a list"},
		{"two resources", []string{"all", "gateway/a", "gateway/b"}, "accepts at most 1 resource arg, received 2"},
		{"local with resource", []string{"backends", "--local", "gateway/a"}, "--local does not accept a resource argument"},
		{"file with local", []string{"backends", "--local", "-f", "x.json"}, "--file reads a saved dump and cannot be combined with --local or a resource argument"},
		{"missing file", []string{"backends", "-f", "testdata/missing.json"}, "reading config dump: open testdata/missing.json: no such file or directory"},
		{"not json", []string{"backends", "-f", notJSON}, notJSON + ": not a config dump:"},
		{"admin error", []string{"backends", "--local", "--admin-url", broken.URL}, "admin server answered 500 Internal Server Error for " + broken.URL + "/config_dump: boom"},
		{"admin unreachable", []string{"all", "--local", "--admin-url", dead.URL}, "cannot reach the admin server at " + dead.URL},
		{"missing kubeconfig", []string{"backends", "gateway/gw", "-n", "prod", "-k", "/nonexistent/kubeconfig"}, "cluster mode: reading kubeconfig (/nonexistent/kubeconfig): "},
		{"bad resource", []string{"backends", "pod/x"}, `invalid resource "pod/x": unsupported type "pod" (supported: gateway)`},
		{"admin url without local", []string{"backends", "--admin-url", "http://x:1"}, "--admin-url and --config apply to a standalone proxy: add --local"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := run(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("config %v error:\ngot  %v\nwant one containing %s", tt.args, err, tt.want)
			}
		})
	}
}

// TestPolicySummary: a policy is named by its resource, its target by the
// fields of its kind (never a listener in place of a gateway, nor a rule in
// place of a route), and each kind it holds is named.
func TestPolicySummary(t *testing.T) {
	tests := []struct {
		name       string
		policy     string
		wantName   string
		wantTarget string
		wantKinds  []string
	}{
		{"gateway, no listener",
			`{"name":{"name":"http1","namespace":"gw-ns"},"target":{"gateway":{"gatewayName":"proxy","gatewayNamespace":"gw-ns","listenerName":null}},"policy":{"frontend":{"hTTP":{"http1MaxHeaders":15}}}}`,
			"gw-ns/http1", "gateway gw-ns/proxy", []string{"frontend http"}},
		{"gateway listener",
			`{"name":{"name":"t","namespace":"ns"},"target":{"gateway":{"gatewayName":"proxy","gatewayNamespace":"ns","listenerName":"http"}},"policy":{"traffic":{"phase":"route","timeout":{"requestTimeout":"2s"}}}}`,
			"ns/t", "gateway ns/proxy listener http", []string{"timeout"}},
		{"route rule",
			`{"name":{"name":"r","namespace":"ns"},"target":{"route":{"name":"retry","namespace":"ns","ruleName":"rule0"}},"policy":{"traffic":{"phase":"route","retry":{"attempts":3}}}}`,
			"ns/r", "route ns/retry rule rule0", []string{"retry"}},
		{"backend service, health",
			`{"name":{"name":"h","namespace":"ns"},"target":{"backend":{"service":{"hostname":"a.ns.svc","namespace":"ns"}}},"policy":{"backend":{"health":{}}}}`,
			"ns/h", "backend service ns/a.ns.svc", []string{"health"}},
		{"tcp keepalive and null kinds left out",
			`{"name":{"name":"k","namespace":"ns"},"target":{"gateway":{"gatewayName":"p","gatewayNamespace":"ns"}},"policy":{"frontend":{"tCP":{"keepalives":{}},"hTTP":null}}}`,
			"ns/k", "gateway ns/p", []string{"frontend tcp"}},
		{"several traffic kinds",
			`{"name":{"name":"rl","namespace":"default"},"target":{"route":{"name":"httpbin","namespace":"default"}},"policy":{"traffic":{"phase":"route","localRateLimit":[{}],"remoteRateLimit":{},"cors":null}}}`,
			"default/rl", "route default/httpbin", []string{"localRateLimit", "remoteRateLimit"}},
		{"unknown target shape kept as sorted JSON",
			`{"name":{"name":"x","namespace":""},"target":{"service":{"b":1,"a":2}},"policy":{"cors":{}}}`,
			"x", `service {"a":2,"b":1}`, []string{"cors"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := configdump.Parse([]byte(`{"policies":[` + tt.policy + `]}`))
			if err != nil {
				t.Fatal(err)
			}
			got := summarize(d).Policies
			if len(got) != 1 || got[0].Name != tt.wantName || got[0].Target != tt.wantTarget || !slices.Equal(got[0].Kinds, tt.wantKinds) {
				t.Errorf("got %+v, want name %q target %q kinds %q", got, tt.wantName, tt.wantTarget, tt.wantKinds)
			}
		})
	}
}
