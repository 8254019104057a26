package admin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestResolveURL(t *testing.T) {
	cfg := writeFile(t, "config:\n  adminAddr: 127.0.0.1:16000\nbinds: []\n")
	wildcard := writeFile(t, "config: {adminAddr: 0.0.0.0:17000}\n")
	noAdmin := writeFile(t, "binds: []\n")
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == addrEnv {
				return v
			}
			return ""
		}
	}
	tests := []struct {
		name    string
		opts    Options
		want    string
		wantErr string
	}{
		{"default", Options{Port: DefaultPort, Getenv: env("")}, "http://127.0.0.1:15000", ""},
		{"admin url wins", Options{URL: "http://10.1.1.1:9/", Port: 1, PortSet: true, Getenv: env("a:1")}, "http://10.1.1.1:9", ""},
		{"explicit port beats env and file", Options{Port: 15001, PortSet: true, ConfigFile: cfg, Getenv: env("127.0.0.1:2")}, "http://127.0.0.1:15001", ""},
		{"env beats file", Options{Port: DefaultPort, ConfigFile: cfg, Getenv: env("127.0.0.1:2")}, "http://127.0.0.1:2", ""},
		{"config file", Options{Port: DefaultPort, ConfigFile: cfg, Getenv: env("")}, "http://127.0.0.1:16000", ""},
		{"config file wildcard address dials loopback", Options{ConfigFile: wildcard, Getenv: env("")}, "http://127.0.0.1:17000", ""},
		{"config file without adminAddr", Options{Port: DefaultPort, ConfigFile: noAdmin, Getenv: env("")}, "http://127.0.0.1:15000", ""},
		{"bad url", Options{URL: "localhost:15000"}, "", `invalid --admin-url "localhost:15000": want http://host:port`},
		{"bad port", Options{Port: 70000, PortSet: true}, "", "invalid --proxy-admin-port: port 70000 out of range 1-65535"},
		{"bad env", Options{Getenv: env("nope")}, "", `invalid ADMIN_ADDR "nope": want host:port`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveURL(tt.opts)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error:\ngot  %v\nwant %s", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ResolveURL = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestConfigAdminAddrErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string // substring after the file name
	}{
		{"config not a mapping", "config: [1]\n", ":1: field config: want a mapping"},
		{"adminAddr not a string", "config:\n  adminAddr: [a]\n", ":2: field config.adminAddr: want a host:port string"},
		{"adminAddr without port", "binds: []\nconfig:\n  adminAddr: localhost\n", `:3: field config.adminAddr "localhost": want host:port`},
		{"adminAddr port out of range", "config:\n  adminAddr: 127.0.0.1:99999\n", `:2: field config.adminAddr "127.0.0.1:99999": port 99999 out of range`},
		{"not yaml", "config: {\n", "yaml:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeFile(t, tt.content)
			_, err := configAdminAddr(p)
			if err == nil || !strings.HasPrefix(err.Error(), p) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error:\ngot  %v\nwant %s%s...", err, p, tt.want)
			}
		})
	}
	if _, err := configAdminAddr(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file error = %v, want it to name the file", err)
	}
}
