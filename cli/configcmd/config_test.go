package configcmd

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/charmbracelet/x/exp/golden"
	"github.com/spf13/cobra"
)

// run executes `config <args>` as the root command would and returns stdout.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "gwdiag", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(NewCommand())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
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
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad output", []string{"all", "-f", "testdata/dump.json", "-o", "xml"}, `invalid --output "xml": want short, json or yaml`},
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

func TestPolicyNames(t *testing.T) {
	tests := []struct {
		name       string
		policy     string
		wantName   string
		wantTarget string
	}{
		{"reference shape, gateway target",
			`{"name":{"name":"cap","namespace":"default"},"target":{"gateway":{"gatewayName":"bind/3000","gatewayNamespace":"default"}},"policy":{"localRateLimit":[{}]}}`,
			"default/cap", "gateway default/bind/3000"},
		{"route target",
			`{"name":{"name":"rl","namespace":"ns"},"target":{"route":{"name":"httpbin","namespace":"ns"}},"policy":{"cors":{}}}`,
			"ns/rl", "route ns/httpbin"},
		{"plain strings", `{"name":"rl","target":"route/default/httpbin","policy":{}}`, "rl", "route/default/httpbin"},
		{"unknown target shape kept as JSON", `{"name":"x","target":{"a":1,"b":2}}`, "x", `{"a":1,"b":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := ParseDump([]byte(`{"policies":[` + tt.policy + `]}`))
			if err != nil {
				t.Fatal(err)
			}
			got := Summarize(d).Policies
			if len(got) != 1 || got[0].Name != tt.wantName || got[0].Target != tt.wantTarget {
				t.Errorf("got %+v, want name %q target %q", got, tt.wantName, tt.wantTarget)
			}
		})
	}
}
