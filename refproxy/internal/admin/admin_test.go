package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/pprof"
	"testing"
)

// TestGoIsListedOnReturn: a goroutine started by Go is in its own group of
// /debug/tasks as soon as Go returns. With one P the new goroutine does not
// run before its creator yields, so a plain go pprof.Do(...) would still
// carry the creator's labels here (refproxy's TestAdminJSONAndProfiles
// failed so on a loaded machine: its listener's group was not there yet).
func TestGoIsListedOnReturn(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for i := range 20 {
		component := fmt.Sprintf("probe-%d", i)
		release, done := make(chan struct{}), make(chan struct{})
		Go(pprof.Labels("component", component), func() {
			defer close(done)
			<-release
		})
		rec := httptest.NewRecorder()
		tasks(rec, httptest.NewRequest(http.MethodGet, "/debug/tasks", nil))
		close(release)
		<-done
		var got struct {
			Groups []struct {
				Labels map[string]string
				Count  int
			}
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("/debug/tasks: %v: %s", err, rec.Body)
		}
		count := 0
		for _, g := range got.Groups {
			if g.Labels["component"] == component {
				count += g.Count
			}
		}
		if count != 1 {
			t.Fatalf("round %d: %d goroutines labelled component=%s in /debug/tasks, want 1: %s", i, count, component, rec.Body)
		}
	}
}
