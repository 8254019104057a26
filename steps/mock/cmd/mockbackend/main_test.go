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
		{"bad pool address", []string{"--pool-addr", "nope"}, "--pool-addr: address nope: missing port"},
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

// TestRunServesSeveralOfAKind: a repeated flag starts one server per
// address, each counting only its own requests (the container target runs
// all the backends of a scenario in one mock container this way).
func TestRunServesSeveralOfAKind(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	go func() {
		_ = run(ctx, []string{"--llm-addr", "", "--echo-addr", "127.0.0.1:0", "--echo-addr", "127.0.0.1:0"}, pw)
		pw.Close()
	}()
	var addrs []string
	sc := bufio.NewScanner(pr)
	for len(addrs) < 2 && sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "echo" {
			t.Fatalf("unexpected output line %q, want echo listening on <addr>", sc.Text())
		}
		addrs = append(addrs, f[3])
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if len(addrs) != 2 || addrs[0] == addrs[1] {
		t.Fatalf("echo servers: got %q, want two addresses", addrs)
	}
	get := func(url string) string {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.TrimSpace(string(b))
	}
	get("http://" + addrs[0] + "/anything")
	get("http://" + addrs[0] + "/anything")
	get("http://" + addrs[1] + "/anything")
	for i, want := range []string{`{"count":2}`, `{"count":1}`} {
		if got := get("http://" + addrs[i] + "/__count"); got != want {
			t.Errorf("server %d: /__count = %s, want %s", i, got, want)
		}
	}
}
