package toolbin

import "testing"

func TestNetworkFailure(t *testing.T) {
	tests := []struct {
		name string
		out  string
		want bool
	}{
		{"proxy unreachable", `go: k8s.io/kubernetes@v1.36.3: Get "https://proxy.golang.org/k8s.io/kubernetes/@v/v1.36.3.zip": dial tcp: lookup proxy.golang.org: no such host`, true},
		{"timeout", "read tcp 10.0.0.2:443: i/o timeout", true},
		{"compile error", "./main.go:3:1: syntax error: non-declaration statement outside function body", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := networkFailure(tt.out); got != tt.want {
				t.Errorf("networkFailure(%q) = %v, want %v", tt.out, got, tt.want)
			}
		})
	}
}
