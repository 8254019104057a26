package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gwdiag/gwdiag/steps"
	"github.com/gwdiag/gwdiag/steps/targets/cluster"
)

// TestClusterModeKind: --cluster kind turns the kind cluster on and keeps
// the options file's cluster.kind settings; another mode turns it off.
func TestClusterModeKind(t *testing.T) {
	fromFile := &cluster.KindOptions{Name: "ci", Image: "mirror.example/kindest/node:v1.33.1", Keep: true}
	for _, tt := range []struct {
		name, mode string
		file       *cluster.KindOptions
		want       *cluster.KindOptions
	}{
		{"kind", "kind", nil, &cluster.KindOptions{}},
		{"kind keeps the file's settings", "kind", fromFile, fromFile},
		{"local-node turns kind off", "local-node", fromFile, nil},
		{"local turns kind off", "local", fromFile, nil},
		{"kubeconfig turns kind off", "kubeconfig", fromFile, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var o steps.Options
			o.Cluster.Kind, o.Cluster.LocalNode = tt.file, true
			if err := setFlag(&o, "cluster", tt.mode); err != nil {
				t.Fatal(err)
			}
			got := o.Cluster.Kind
			if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
				t.Errorf("cluster.kind: got %+v, want %+v", got, tt.want)
			}
			if tt.mode == "kind" && (o.Cluster.LocalNode || o.Cluster.Local) {
				t.Errorf("--cluster kind: localNode %v, local %v; want both off", o.Cluster.LocalNode, o.Cluster.Local)
			}
		})
	}
}

// TestRunKindFlags: with kind the images are packed from the same binaries
// as on the local node, before kind runs, so a missing refproxy stops the
// run at once, from the flag or the options file (the example's shape).
func TestRunKindFlags(t *testing.T) {
	dir := t.TempDir()
	noProxy := filepath.Join(dir, "no-refproxy")
	file := filepath.Join(dir, "kind.yaml")
	os.WriteFile(file, []byte("target: cluster\ncluster:\n  kind: {name: ci, keep: true}\n  refproxyBinary: "+noProxy+"\n"), 0o644)
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"--cluster kind", []string{"run", "--target", "cluster", "--cluster", "kind", "--refproxy-binary", noProxy}},
		{"cluster.kind in the options file", []string{"run", "-c", file}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := "cluster target: kind cluster: cluster.refproxyBinary: stat " + noProxy
			if _, err := run(t, tt.args...); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%v: got %v, want an error with %q", tt.args, err, want)
			}
		})
	}
}

// setFlag sets the registry option of that flag in o, as the command does.
func setFlag(o *steps.Options, flag, value string) error {
	for _, r := range steps.OptionRegistry {
		if r.Flag == flag {
			return r.Set(o, value, false)
		}
	}
	return fmt.Errorf("no option with the flag --%s", flag)
}
