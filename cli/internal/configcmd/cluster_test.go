package configcmd

import (
	"bytes"
	"context"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/cli/internal/connect/connecttest"
)

// TestClusterConfig reads the config dump of a gateway's pod found through
// a real API server and port-forwarded through it to the in-process kubelet
// of the pod's node, in front of an in-process reference proxy; the output
// must be what --local gives for the same proxy.
func TestClusterConfig(t *testing.T) {
	f := connecttest.StartFixture(t)
	local := []string{"--local", "--admin-url", "http://" + f.Proxy.AdminAddr()}
	tests := []struct {
		name    string
		cluster []string
		local   []string
		podPort int
	}{
		{"all yaml", []string{"all", "gateway/gw", "-n", f.Namespace, "-k", f.Kubeconfig, "-o", "yaml"}, []string{"all", "-o", "yaml"}, connecttest.AdminPort},
		{"all short, the only gateway", []string{"all", "-n", f.Namespace, "-k", f.Kubeconfig}, []string{"all"}, connecttest.AdminPort},
		{"backends --all", []string{"be", "gateway/gw." + f.Namespace, "-k", f.Kubeconfig, "--all"}, []string{"backends", "--all"}, connecttest.AdminPort},
		{"--proxy-admin-port", []string{"backends", "-n", f.Namespace, "-k", f.Kubeconfig, "--proxy-admin-port", "19000"}, []string{"backends"}, connecttest.OtherAdminPort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, beforePorts := len(f.Kubelet.Served()), len(f.Kubelet.Ports())
			got, err := runCtx(t.Context(), tt.cluster...)
			if err != nil {
				t.Fatalf("config %v: %v\n%s", tt.cluster, err, got)
			}
			want, err := runCtx(t.Context(), append(tt.local, local...)...)
			if err != nil {
				t.Fatalf("config %v: %v", tt.local, err)
			}
			if got != want || got == "" {
				t.Errorf("config %v:\ngot\n%s\nwant (as --local)\n%s", tt.cluster, got, want)
			}
			if paths := f.Kubelet.Served()[before:]; len(paths) != 1 || paths[0] != f.KubeletPath() {
				t.Errorf("port-forwards = %v, want one to %s", paths, f.KubeletPath())
			}
			if ports := f.Kubelet.Ports()[beforePorts:]; len(ports) != 1 || ports[0] != tt.podPort {
				t.Errorf("forwarded pod ports = %v, want [%d]", ports, tt.podPort)
			}
		})
	}
}

func runCtx(ctx context.Context, args ...string) (string, error) {
	root := &cobra.Command{Use: "gwdiag", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(NewCommand())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"config"}, args...))
	err := root.ExecuteContext(ctx)
	return out.String(), err
}
