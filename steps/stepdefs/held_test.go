package stepdefs

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/golden/trace/sse"
	"github.com/gwdiag/gwdiag/steps/targets"
)

// oneListener is a deployment whose default listener is addr.
type oneListener struct {
	targets.Deployment
	addr string
}

func (d oneListener) ListenerAddr(string) (string, error) { return d.addr, nil }

// TestHeldStreamRefusedAtOnce: a proxy that refuses the stream to be held
// (a 429 at once) fails the step that starts it, every time. The step
// once returned before it saw the stream's end, now and then, and the
// scenario failed later for another reason (the catalogue's fault "tokens
// counted before the response", on a loaded machine).
func TestHeldStreamRefusedAtOnce(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "rate limit exceeded", http.StatusTooManyRequests)
	}))
	defer srv.Close()
	for i := range 300 {
		s := &state{dep: oneListener{addr: strings.TrimPrefix(srv.URL, "http://")}, client: srv.Client(),
			cfg: Config{RequestTimeout: 5 * time.Second, Limits: sse.DefaultLimits()}}
		err := s.startHeld(context.Background(), 120, "slow")
		if err == nil || !strings.Contains(err.Error(), "the held stream ended before it was released (status 429, 0 chunks)") {
			t.Fatalf("try %d: got %v, want the stream's end reported", i+1, err)
		}
	}
}
