package tracecmd

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/cli/internal/connect/connecttest"
)

// TestClusterTrace runs `gwdiag trace gateway/gw --raw` through the cluster
// connector as in production: the pod is found through a real API server,
// and the admin and listener forwards go through that API server to the
// in-process kubelet of the pod's node, in front of an in-process reference
// proxy.
func TestClusterTrace(t *testing.T) {
	f := connecttest.StartFixture(t)
	tests := []struct {
		name     string
		args     []string
		send     bool   // watch mode: the test sends requests straight to the pod
		wantHost string // request.host of the initial snapshot
		forwards int    // port-forwards opened
	}{
		{"inject", []string{"gateway/gw", "-n", f.Namespace, "-k", f.Kubeconfig, "--raw", "--port", "8080", "--",
			"http://cluster.example/inject", "-H", "x-test: 1"}, false, "cluster.example", 2},
		{"inject, namespace in the resource", []string{"gateway/gw." + f.Namespace, "-k", f.Kubeconfig, "--raw", "--port", "8080", "--",
			"http://other.example/inject"}, false, "other.example", 2},
		{"watch, the only gateway", []string{"-n", f.Namespace, "-k", f.Kubeconfig, "--raw"}, true, "watch.example", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(f.Kubelet.Served())
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			type result struct {
				out string
				err error
			}
			done := make(chan result, 1)
			go func() {
				out, err := executeCtx(ctx, tt.args...)
				done <- result{out, err}
			}()
			var r result
			if tt.send {
				r = sendUntilDone(t, ctx, "http://"+f.Proxy.BindAddrs()[0]+"/watch", "watch.example", done)
			} else {
				r = <-done
			}
			if r.err != nil {
				t.Fatalf("gwdiag trace %v: %v\n%s", tt.args, r.err, r.out)
			}
			var types []string
			host, pod := "", ""
			for line := range strings.Lines(r.out) {
				var ev struct {
					Message struct {
						Type         string `json:"type"`
						Stage        string `json:"stage"`
						RequestState struct {
							Request struct{ Host string } `json:"request"`
							Env     struct {
								PodName string `json:"podName"`
							} `json:"env"`
						} `json:"requestState"`
					} `json:"message"`
				}
				if err := json.Unmarshal([]byte(line), &ev); err != nil {
					t.Fatalf("not a JSON event: %q: %v", line, err)
				}
				types = append(types, ev.Message.Type)
				if ev.Message.Type == "requestSnapshot" && ev.Message.Stage == "initial request" {
					host, pod = ev.Message.RequestState.Request.Host, ev.Message.RequestState.Env.PodName
				}
			}
			if len(types) == 0 || types[0] != "requestStarted" || types[len(types)-1] != "requestFinished" {
				t.Errorf("event types = %v, want requestStarted ... requestFinished", types)
			}
			if host != tt.wantHost || pod != f.Pod {
				t.Errorf("initial snapshot host %q pod %q, want %q %q", host, pod, tt.wantHost, f.Pod)
			}
			paths := f.Kubelet.Served()[before:]
			want := slices.Repeat([]string{f.KubeletPath()}, tt.forwards)
			if !slices.Equal(paths, want) {
				t.Errorf("port-forwards = %v, want %v", paths, want)
			}
		})
	}
}

// sendUntilDone sends requests to the pod's listener, as any client of
// the gateway would, until the watching command ends: the watcher
// registers at a moment the test cannot see, and only requests after it
// are traced.
func sendUntilDone[R any](t *testing.T, ctx context.Context, url, host string, done <-chan R) R {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case r := <-done:
			return r
		case <-ctx.Done():
			t.Fatalf("trace did not end: %v", ctx.Err())
		case <-tick.C:
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			req.Host = host
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	}
}

// executeCtx runs `trace <args>` in process under ctx.
func executeCtx(ctx context.Context, args ...string) (string, error) {
	root := &cobra.Command{Use: "gwdiag", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(NewCommand())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs(append([]string{"trace"}, args...))
	err := root.ExecuteContext(ctx)
	return out.String(), err
}
