package steps

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/gwdiag/gwdiag/golden"
	"github.com/gwdiag/gwdiag/golden/trace"
)

var update = flag.Bool("update", false, "rewrite generated files: the golden traces in golden/traces from the reference proxy, the tables of features/README.md")

// goldenScenarios are the trace-order scenarios whose traces are kept as
// canonical JSONL in golden/traces, one file per scenario.
var goldenScenarios = []string{
	"A forwarded request traces every required event in order",
	"Inject mode sets the Host header from the URL host only",
	"An unmatched route traces no backend call",
	"A rate-limited request traces a 429 and no backend call",
	"A backend transport error is reported in backendCallResult",
}

func goldenPath(scenario string) string {
	slug := strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(scenario), "-"), "-")
	return filepath.Join("..", "golden", "traces", slug+".jsonl")
}

// TestGoldenTraces compares the reference proxy's normalised traces with
// the golden ones; go test ./steps -run TestGoldenTraces -update rewrites them.
func TestGoldenTraces(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]trace.Event{}
	rep, err := Run(context.Background(), Options{
		Tags:   "@trace-order && ~@extended",
		Output: &strings.Builder{},
		OnTrace: func(scenario string, events []trace.Event) {
			mu.Lock()
			defer mu.Unlock()
			got[scenario] = golden.Normalize(events)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed() {
		t.Fatalf("trace-order scenarios failed: %+v", rep.Features)
	}
	for _, sc := range goldenScenarios {
		t.Run(sc, func(t *testing.T) {
			events, ok := got[sc]
			if !ok {
				t.Fatalf("scenario %q took no trace", sc)
			}
			path := goldenPath(sc)
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := golden.WriteJSONL(path, events); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := golden.Read(path, nil)
			if err != nil {
				t.Fatalf("%v (run with -update to record it)", err)
			}
			if d := golden.Diff(want, events); d != "" {
				t.Errorf("trace of %q differs from %s (want -, got +):\n%s", sc, path, d)
			}
		})
	}
}
