package cluster

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// TestWriteKubeconfig: the written kubeconfig gives back the target's
// server and credentials, by file (the local node) or inline (envtest).
func TestWriteKubeconfig(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"ca.crt", "admin.crt", "admin.key"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		cfg  *rest.Config
	}{
		{"files", &rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{
			CAFile: filepath.Join(dir, "ca.crt"), CertFile: filepath.Join(dir, "admin.crt"), KeyFile: filepath.Join(dir, "admin.key")}}},
		{"inline data and a token", &rest.Config{Host: "https://127.0.0.1:6444", BearerToken: "t0ken",
			TLSClientConfig: rest.TLSClientConfig{ServerName: "kubernetes", CAData: []byte("ca"), CertData: []byte("cert"), KeyData: []byte("key")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(Options{})
			if err := c.WriteKubeconfig(filepath.Join(t.TempDir(), "kubeconfig")); err == nil {
				t.Fatal("WriteKubeconfig before Start succeeded")
			}
			c.cfg = tt.cfg
			path := filepath.Join(t.TempDir(), "kubeconfig")
			if err := c.WriteKubeconfig(path); err != nil {
				t.Fatal(err)
			}
			got, err := clientcmd.BuildConfigFromFlags("", path)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.cfg
			if got.Host != want.Host || got.BearerToken != want.BearerToken || got.ServerName != want.ServerName ||
				got.CAFile != want.CAFile || got.CertFile != want.CertFile || got.KeyFile != want.KeyFile ||
				string(got.CAData) != string(want.CAData) || string(got.CertData) != string(want.CertData) || string(got.KeyData) != string(want.KeyData) {
				t.Errorf("read back:\ngot  %+v\nwant %+v", got, want)
			}
		})
	}
}
