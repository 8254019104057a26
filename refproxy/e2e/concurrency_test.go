package e2e

import (
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestConcurrentClientsExact: 64 concurrent clients admit exactly maxTokens
// requests per window, with distinct remaining counts, and the backend's own
// counter agrees; the second round starts right at a refill boundary, where
// over-admission would show.
func TestConcurrentClientsExact(t *testing.T) {
	const (
		clients  = 64
		perCli   = 3
		max      = 10
		interval = 2 * time.Second
	)
	e := start(t, sprintf(`
binds:
- port: 0
  listeners:
  - protocol: HTTP
    routes:
    - name: httpbin
      policies:
        localRateLimit:
        - {maxTokens: %d, tokensPerFill: %d, fillInterval: %s}
      backends: [{host: "{{.Echo}}"}]
`, max, max, interval))

	// round sends clients*perCli requests at once and returns the remaining
	// counts of the admitted ones.
	round := func(name string) []int {
		var (
			wg        sync.WaitGroup
			mu        sync.Mutex
			remaining []int
			start     = make(chan struct{})
		)
		for range clients {
			wg.Go(func() {
				<-start
				for range perCli {
					r, err := e.try(http.MethodGet, "/status/200", "")
					if err != nil {
						t.Error(err)
						return
					}
					switch r.status {
					case http.StatusOK:
						mu.Lock()
						remaining = append(remaining, r.remaining())
						mu.Unlock()
					case http.StatusTooManyRequests:
					default:
						t.Errorf("%s: status %d, want 200 or 429", name, r.status)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		slices.Sort(remaining)
		return remaining
	}

	if got, want := round("round 1"), []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(got, want) {
		t.Fatalf("round 1: admitted with remaining %v, want exactly %v", got, want)
	}
	if got := e.echo.Count(); got != max {
		t.Fatalf("after round 1 the backend counted %d requests, want %d", got, max)
	}

	// Wait for the refill: the first admitted poll takes one token.
	if r := awaitAllowed(t, 2*interval, func() reply { return e.do(t, http.MethodGet, "/status/200", "") }); r.remaining() != max-1 {
		t.Fatalf("first request after the refill: remaining %d, want %d", r.remaining(), max-1)
	}
	if got, want := round("round 2"), []int{0, 1, 2, 3, 4, 5, 6, 7, 8}; !slices.Equal(got, want) {
		t.Fatalf("round 2: admitted with remaining %v, want exactly %v", got, want)
	}
	if got := e.echo.Count(); got != 2*max {
		t.Errorf("after round 2 the backend counted %d requests, want %d", got, 2*max)
	}
}
