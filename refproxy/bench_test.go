package refproxy

import (
	"io"
	"net/http"
	"testing"

	"github.com/gwdiag/gwdiag/refproxy/internal/tracing"
)

// BenchmarkLoopback measures whole requests through a started proxy over
// loopback (client, proxy and backend in this process), with nobody watching
// and with every request traced by a registered watcher.
func BenchmarkLoopback(b *testing.B) {
	be := backendServer(b, "a", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	run := func(b *testing.B, watched bool) {
		p := startProxy(b, oneRoute(be))
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
		url := "http://" + p.BindAddrs()[0] + "/get"
		b.ReportAllocs()
		for b.Loop() {
			var w *tracing.Watcher
			if watched {
				w = p.reg.Watch(nil)
			}
			resp, err := client.Get(url)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if w != nil {
				w.Cancel()
			}
		}
	}
	b.Run("no-watcher", func(b *testing.B) { run(b, false) })
	b.Run("watcher", func(b *testing.B) { run(b, true) })
}
