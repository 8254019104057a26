package e2e

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/gwdiag/gwdiag/refproxy/ratelimit"
)

func u64(v uint64) *uint64 { return &v }

// TestBurst is the documented example: requests 3 + burst 3 per second
// admits 6 at once and refuses the 7th, which never reaches the backend;
// the next window restores 3 with no manual action.
func TestBurst(t *testing.T) {
	spec, err := ratelimit.FromPolicy(ratelimit.PolicyEntry{Requests: u64(3), Burst: u64(3), Unit: "Seconds"})
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, `
binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: httpbin
      policies:
        localRateLimit:
        - `+specYAML(spec)+`
      backends: [{host: "{{.Echo}}"}]
`)
	for i := 1; i <= 7; i++ {
		r := e.do(t, http.MethodGet, "/anything/"+strconv.Itoa(i), "")
		if i <= 6 {
			wantReply(t, "request "+strconv.Itoa(i), r, http.StatusOK, "6/"+strconv.Itoa(6-i), time.Second)
		} else {
			wantReply(t, "request 7", r, http.StatusTooManyRequests, "6/0", time.Second)
		}
	}
	if got := e.echo.Count(); got != 6 {
		t.Fatalf("echo backend got %d requests, want 6 (the 7th was refused)", got)
	}

	// The window refills by tokensPerFill (3), not to the burst ceiling.
	r := awaitAllowed(t, 5*time.Second, func() reply { return e.do(t, http.MethodGet, "/anything/poll", "") })
	wantReply(t, "first request after the refill", r, http.StatusOK, "6/2", time.Second)
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		r := e.do(t, http.MethodGet, "/anything/after", "")
		if r.status != want {
			t.Errorf("request %d after the refill: got %d (%s), want %d", i+2, r.status, r.limits(), want)
		}
	}
	if got := e.echo.Count(); got != 9 {
		t.Errorf("echo backend got %d requests, want 9 (6 + 3 refilled)", got)
	}
}
