package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestRunArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"nothing to serve", []string{"--llm-addr", "", "--echo-addr", ""}, "nothing to serve"},
		{"stray argument", []string{"extra"}, `unexpected arguments ["extra"]`},
		{"unknown flag", []string{"--port", "1"}, "flag provided but not defined: -port"},
		{"bad address", []string{"--llm-addr", "nope", "--echo-addr", ""}, "--llm-addr: listen tcp: address nope: missing port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(t.Context(), tt.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("run(%q) = %v, want an error containing %q", tt.args, err, tt.wantErr)
			}
		})
	}
}

// TestRunServes starts both mocks on free ports, reads their addresses from
// the output, uses them, and stops them by cancelling the context.
func TestRunServes(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, []string{"--llm-addr", "127.0.0.1:0", "--echo-addr", "127.0.0.1:0"}, pw)
		pw.Close()
	}()
	addrs := map[string]string{}
	sc := bufio.NewScanner(pr)
	for len(addrs) < 2 && sc.Scan() {
		f := strings.Fields(sc.Text()) // "<name> listening on <addr>"
		if len(f) != 4 {
			t.Fatalf("unexpected output line %q", sc.Text())
		}
		addrs[f[0]] = f[3]
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	for path, addr := range map[string]string{"/v1/chat/completions": addrs["llm"], "/status/204": addrs["echo"]} {
		resp, err := http.Post("http://"+addr+path, "application/json", strings.NewReader(`{"model":"m"}`))
		if err != nil {
			t.Fatalf("POST %s on %s: %v", path, addr, err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Errorf("POST %s: status %d, want 2xx", path, resp.StatusCode)
		}
	}
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("run after cancel = %v, want nil", err)
	}
}
